"""A mention becomes a cited, pinned report: real serve and worker processes, real Redis,
the real Slack/Anthropic clients talking to fakes."""
from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
from redis import Redis

from jobs import RunStore
from tests.e2e.stack import CHANNEL, assert_cited_report_pinned, block_text, bot_replies, post_event
from tests.fakes.slack import TEAM_ID, FakeSlack, app_mention_event, sign
from tests.processes import SIGNING_SECRET, Stack, wait_for


def test_mention_becomes_a_pinned_cited_report(stack: Stack, fake_slack: FakeSlack, fake_web, redis_url: str) -> None:
    envelope = app_mention_event("expense ratio VTI SCHB ITOT", channel=CHANNEL)
    mention_ts = fake_slack.seed_event(envelope)

    # Acked (Slack retries an event it has no answer to within 3 s; bench/ack.py measures how fast).
    assert post_event(stack, envelope).status_code == 200

    assert_cited_report_pinned(fake_slack, mention_ts, fake_web.url)

    # Slack retries the same event: nothing new starts.
    posts_before = len(fake_slack.calls_of("chat.postMessage"))
    retry = post_event(stack, envelope, headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
    assert retry.status_code == 200
    time.sleep(1.0)
    assert len(fake_slack.calls_of("chat.postMessage")) == posts_before
    assert len(RunStore(Redis.from_url(redis_url)).thread_run_ids(TEAM_ID, CHANNEL, mention_ts)) == 1, "one run in the thread"


def test_unsigned_and_stale_events_are_rejected(stack: Stack, fake_slack: FakeSlack) -> None:
    envelope = app_mention_event("a question", channel=CHANNEL)
    unsigned = httpx.post(stack.events_url, json=envelope, timeout=10)
    assert unsigned.status_code == 401
    stale = post_event(stack, envelope, timestamp=int(time.time()) - 3600)
    assert stale.status_code == 401
    forged = post_event(stack, envelope, secret="not-the-secret")
    assert forged.status_code == 401
    time.sleep(0.5)
    assert fake_slack.calls_of("chat.postMessage") == []


def test_signed_malformed_body_gets_400_and_the_server_keeps_serving(stack: Stack, fake_slack: FakeSlack) -> None:
    body = '{"type": "event_callback", "event": "not an object"'
    response = httpx.post(stack.events_url, content=body, headers=sign(SIGNING_SECRET, body), timeout=10)
    assert response.status_code == 400
    envelope = app_mention_event("", channel=CHANNEL)
    ts = fake_slack.seed_event(envelope)
    assert post_event(stack, envelope).status_code == 200
    help_reply = wait_for(lambda: bot_replies(fake_slack, ts), 10, "the help reply")
    assert "Ask me a research question" in help_reply[0].text
    time.sleep(0.5)
    assert fake_slack.pins(CHANNEL) == [], "an empty mention starts no run"


def test_huge_question_gets_advice_and_starts_no_run(stack: Stack, fake_slack: FakeSlack) -> None:
    envelope = app_mention_event("why " * 2000, channel=CHANNEL)
    ts = fake_slack.seed_event(envelope)
    assert post_event(stack, envelope).status_code == 200
    reply = wait_for(lambda: bot_replies(fake_slack, ts), 10, "the advice reply")
    assert "characters; I take up to 4,000" in reply[0].text
    assert fake_slack.pins(CHANNEL) == []


def test_model_that_keeps_failing_leaves_a_report_that_says_why(stack: Stack, fake_slack: FakeSlack, fake_model) -> None:
    fake_model.fail_always(500)
    envelope = app_mention_event("expense ratio VTI", channel=CHANNEL)
    ts = fake_slack.seed_event(envelope)
    post_event(stack, envelope)
    replies = wait_for(lambda: len(bot_replies(fake_slack, ts)) >= 2 and bot_replies(fake_slack, ts), 10, "replies")
    report = replies[1]
    wait_for(lambda: "Incomplete" in block_text(fake_slack.message(CHANNEL, report.ts)), 30, "the failed report")
    text = block_text(fake_slack.message(CHANNEL, report.ts))
    assert "model service kept failing (HTTP 500" in text
    assert "Ended early" in block_text(fake_slack.message(CHANNEL, replies[0].ts))


def test_ask_writes_a_report_whose_citations_resolve(tmp_path: Path, fake_model, fake_web) -> None:
    import subprocess

    from tests.processes import DEEPTHREAD, ROOT, environment

    out = tmp_path / "report.md"
    env = environment(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake_model.url, DEEPTHREAD_SEARCH="searxng",
                      SEARXNG_URL=fake_web.url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1")
    done = subprocess.run(DEEPTHREAD + ["ask", "expense ratio VTI SCHB ITOT", "--out", str(out)],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "[researching] Searching: expense ratio VTI SCHB ITOT" in done.stderr, "live progress"
    report = out.read_text()
    assert not re.search(r"\[s\d+\]", report)
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", report.split("## Sources")[0])}
    listed = dict(re.findall(r"^(\d+)\. \[[^\]]*\]\((http[^)]+)\)", report, re.M))
    assert cited and cited == {int(n) for n in listed}, "every footnote has a source and vice versa"
    assert all(url.startswith(f"{fake_web.url}/pages/") for url in listed.values())


def test_own_messages_edits_and_reactions_are_acknowledged_and_ignored(stack: Stack, fake_slack: FakeSlack) -> None:
    from tests.fakes.slack import message_event, reaction_added_event

    noise = [
        message_event("my own progress text", channel=CHANNEL, user="UBOT", bot_id="BBOT"),
        message_event("edited", channel=CHANNEL, subtype="message_changed"),
        message_event("gone", channel=CHANNEL, subtype="message_deleted"),
        message_event("a plain thread reply", channel=CHANNEL, thread_ts="1700000000.000001"),
        reaction_added_event("thumbsup", item_channel=CHANNEL, item_ts="1700000000.000001"),
        {"type": "event_callback", "event_id": "EvBROKEN", "team_id": "T0TEST", "event": {"type": "app_mention"}},
    ]
    for envelope in noise:
        assert post_event(stack, envelope).status_code == 200
    time.sleep(1.0)
    assert [m for m, _ in fake_slack.calls if m != "auth.test"] == [], "nothing was posted, pinned or updated"
