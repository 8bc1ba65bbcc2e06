"""The team's library end to end (real serve in Socket Mode, a worker, real Redis, the fake Slack answering
conversations.info, conversations.members and users.info): a finished report is shelved with its
permalink, and `library <words>` (a mention, a thread reply, `/deepthread library …`) lists the
reports the asker can see, ephemerally in channels, never starting a run; a private channel's report
is listed to its members only, and `forget this thread` takes a report off the shelf."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from jobs import RunStore
from jobs.records.library import Library
from tests.e2e.stack import socket_mode_stack
from tests.fakes.slack import TEAM_ID, FakeSlack, app_mention_event, message_event
from tests.fakes.slack_commands import command_response, send_slash_command
from tests.processes import Stack, wait_for

PUBLIC, SECRET, OTHER = "C0PUBLIC", "G0SECRET", "C0OTHER"
ANA, BEN, ADMIN = "U0ANA", "U0BEN", "U0ADMIN"


@pytest.fixture
def stack(tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> Iterator[Stack]:
    fake_slack.add_user(ANA, name="ana")
    fake_slack.add_user(BEN, name="ben")
    fake_slack.add_user(ADMIN, name="alex", admin=True)
    fake_slack.add_conversation(PUBLIC, name="research", members=[ANA, BEN, "UBOT"])
    fake_slack.add_conversation(OTHER, name="general", members=[ANA, BEN, ADMIN, "UBOT"])
    fake_slack.add_conversation(SECRET, name="deals", members=[ANA, ADMIN, "UBOT"])
    with socket_mode_stack(tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url,
                           web_url=fake_web.url) as s:
        yield s


def _deliver(slack: FakeSlack, envelope: dict) -> str:
    ts = slack.seed_event(envelope)
    envelope_id = slack.send_socket_event(envelope)
    wait_for(lambda: envelope_id in slack.socket_acks, 5, "the ack")
    return ts


def ask(slack: FakeSlack, redis: Redis, channel: str, question: str, user: str = ANA) -> tuple[str, str]:
    """A question answered to the end and shelved; (thread ts, the report's permalink)."""
    ts = _deliver(slack, app_mention_event(f"<@UBOT> {question}", channel=channel, user=user))
    store = RunStore(redis)
    run_id = wait_for(lambda: (ids := store.thread_run_ids(TEAM_ID, channel, ts)) and ids[-1], 15, "the run")
    wait_for(lambda: Library(redis).shelved_version(run_id) is not None, 60, "the report shelved")
    entry = Library(redis).entry(run_id)
    assert entry is not None and entry.permalink.startswith("https://")
    return ts, entry.permalink


def _ephemeral(slack: FakeSlack, channel: str, user: str, after: int) -> str:
    return wait_for(lambda: [e for e in slack.ephemerals(channel) if e.user == user][after:], 15,
                    "the private answer")[0].text


def _slash(slack: FakeSlack, text: str, user: str, channel: str) -> str:
    envelope_id = send_slash_command(slack, text, user=user, channel=channel)
    return wait_for(lambda: command_response(slack, envelope_id), 10, "the slash command's answer")["text"]


def test_library_lists_the_reports_the_asker_can_see_privately_and_starts_no_run(
        stack: Stack, fake_slack: FakeSlack, redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    _, secret_link = ask(fake_slack, redis, SECRET, "expense ratio VTI deals")
    _, public_link = ask(fake_slack, redis, PUBLIC, "expense ratio SCHB research")
    runs_before = len(list(redis.scan_iter(match="deepthread:run:*:state")))

    # A mention in another channel: answered to Ben alone, with the public report only.
    _deliver(fake_slack, app_mention_event("<@UBOT> library expense ratio", channel=OTHER, user=BEN))
    seen_by_ben = _ephemeral(fake_slack, OTHER, BEN, 0)
    assert public_link in seen_by_ben and "expense ratio SCHB research" in seen_by_ben
    assert secret_link not in seen_by_ben and "VTI deals" not in seen_by_ben and SECRET not in seen_by_ben
    assert f"<#{PUBLIC}>" in seen_by_ben
    # The same command from Ana, who is in the private channel: both.
    _deliver(fake_slack, app_mention_event("<@UBOT> library expense ratio", channel=OTHER, user=ANA))
    seen_by_ana = _ephemeral(fake_slack, OTHER, ANA, 0)
    assert public_link in seen_by_ana and secret_link in seen_by_ana
    # The slash command, anywhere: only its author sees the answer.
    assert secret_link not in _slash(fake_slack, "library ratio VTI", BEN, OTHER)
    assert secret_link in _slash(fake_slack, "library ratio VTI", ANA, OTHER)
    # A reply in one of our threads is a command too.
    thread, _ = ask(fake_slack, redis, OTHER, "tracking error ITOT")
    runs_before += 1
    _deliver(fake_slack, message_event("library expense ratio", channel=OTHER, thread_ts=thread, user=BEN))
    in_thread = _ephemeral(fake_slack, OTHER, BEN, 1)
    assert public_link in in_thread and secret_link not in in_thread
    assert len(list(redis.scan_iter(match="deepthread:run:*:state"))) == runs_before, "a command, never a run"
    assert not [m for m in fake_slack.messages(OTHER) if "expense ratio" in m.text and m.user == "UBOT"], (
        "nothing of the list is posted where others read")


def test_forget_takes_the_report_off_the_shelf(stack: Stack, fake_slack: FakeSlack, redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    thread, link = ask(fake_slack, redis, SECRET, "expense ratio VTI deals")
    _deliver(fake_slack, message_event("forget this thread", channel=SECRET, thread_ts=thread, user=ADMIN))
    wait_for(lambda: Library(redis).size(TEAM_ID) == 0, 15, "the report off the shelf")
    assert link not in _slash(fake_slack, "library ratio VTI", ANA, SECRET)
    assert not list(redis.scan_iter(match="deepthread:library:*:term:vti"))


def _block_text(message) -> str:  # noqa: ANN001 - a fake Slack message
    texts = []
    for block in message.blocks or []:
        if block.get("type") == "section":
            texts.append(block["text"]["text"])
        elif block.get("type") == "context":
            texts += [e.get("text", "") for e in block["elements"]]
    return "\n".join([message.text, *texts])


def _tool_results(requests: list[dict], tool_use_id: str) -> list[str]:
    return [str(b.get("content")) for r in requests for m in r["messages"] if m["role"] == "user"
            and isinstance(m["content"], list) for b in m["content"]
            if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_use_id]


def test_a_second_question_in_another_channel_starts_from_the_first_report_but_never_from_a_private_one(
        stack: Stack, fake_slack: FakeSlack, fake_model, redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    _, public_link = ask(fake_slack, redis, PUBLIC, "expense ratio SCHB research")
    _, secret_link = ask(fake_slack, redis, SECRET, "expense ratio SCHB deals")
    asked = len(fake_model.requests)

    thread, _ = ask(fake_slack, redis, OTHER, "expense ratio SCHB", user=BEN)
    shown = "\n".join(_tool_results(fake_model.requests[asked:], "toolu_earlier_research_opening"))
    assert public_link in shown and "expense ratio SCHB research" in shown, "the first report, as a tool result"
    assert secret_link not in shown and "deals" not in shown, "Ben's channel is not all in the private one"
    replies = [m for m in fake_slack.thread(OTHER, thread) if m.ts != thread]
    progress, report = _block_text(replies[0]), _block_text(replies[1])
    assert "Earlier research:" in report and public_link in report and secret_link not in report
    assert "found 1 earlier report" in progress

