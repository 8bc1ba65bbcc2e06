"""Who sees what `usage` shows, end to end (real serve in Socket Mode, real Redis, the fake Slack
answering conversations.info, conversations.members and users.info with team ids): runs asked in
a private channel and in a direct message never show their question, their conversation's id or a
link to it to anyone outside that conversation; the workspace view is an admin's, in private;
lists name people without notifying them; commands answer only where questions are taken."""
from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from redis import Redis

from agent import Usage
from jobs import Run, RunState, RunStatus
from jobs.budgets.spend import Spend
from tests.e2e.stack import socket_mode_stack
from tests.fakes.slack import TEAM_ID, FakeSlack, app_mention_event, message_event
from tests.fakes.slack_commands import command_response, send_slash_command
from tests.processes import Stack, wait_for

PUBLIC, SECRET_ROOM, OTHER = "C0TEST", "G0SECRET", "C0OTHER"
ANA, BEN, ADMIN, INSIDER, GUEST = "U0ANA", "U0BEN", "U0ADMIN", "U0INSIDER", "U0GUEST"
BEN_DM = "D0BEN"
PRIVATE_WORDS = ("merger", "salary", SECRET_ROOM, BEN_DM)


def _record(redis: Redis, slack: FakeSlack, run_id: str, channel: str, user: str, question: str, cost: float) -> None:
    """A finished run's spend, its thread's first message in Slack (so it has a permalink)."""
    thread_ts = slack.add_user_message(channel, f"<@UBOT> {question}", user)
    state = RunState(run=Run(id=run_id, team=TEAM_ID, channel=channel, thread_ts=thread_ts,
                             requester=user, question=question),
                     status=RunStatus.completed, usage=Usage(requests=3, cost_usd=cost),
                     finished_at=datetime.now(UTC))
    assert Spend(redis).record(state) is not None


@pytest.fixture
def stack_env() -> dict[str, str]:
    return {}


@pytest.fixture
def stack(tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web,
          stack_env: dict[str, str]) -> Iterator[Stack]:
    fake_slack.add_user(ANA, name="ana")
    fake_slack.add_user(BEN, name="ben")
    fake_slack.add_user(ADMIN, name="alex", admin=True)
    fake_slack.add_user(INSIDER, name="ines", admin=True)
    fake_slack.add_user(GUEST, name="gus", admin=True, owner=True, team_id="T0PARTNER")  # admin of another org
    fake_slack.add_conversation(PUBLIC, name="general")
    fake_slack.add_conversation(SECRET_ROOM, name="deals", members=[BEN, INSIDER, "UBOT"])
    fake_slack.add_conversation(BEN_DM, members=[BEN, "UBOT"])
    redis = Redis.from_url(redis_url)
    _record(redis, fake_slack, "run000000001", PUBLIC, ANA, "expense ratio of VTI in our public channel", 0.10)
    _record(redis, fake_slack, "run000000002", SECRET_ROOM, BEN, "should we tell the board about the merger with Acme", 0.50)
    _record(redis, fake_slack, "run000000003", BEN_DM, BEN, "what salary should I ask for", 0.30)
    _record(redis, fake_slack, "run000000004", OTHER, ANA, "tracking error of ITOT", 0.05)
    with socket_mode_stack(tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url, web_url=fake_web.url,
                           **stack_env) as s:
        yield s


def _deliver(slack: FakeSlack, envelope: dict) -> str:
    ts = slack.seed_event(envelope)
    envelope_id = slack.send_socket_event(envelope)
    wait_for(lambda: envelope_id in slack.socket_acks, 5, "the ack")
    return ts


def _reply(slack: FakeSlack, channel: str, ts: str) -> str:
    return wait_for(lambda: [m for m in slack.thread(channel, ts) if m.ts != ts], 15, "the reply")[0].text


def _slash(slack: FakeSlack, text: str, user: str, channel: str) -> str:
    envelope_id = send_slash_command(slack, text, user=user, channel=channel)
    return wait_for(lambda: command_response(slack, envelope_id), 10, "the slash command's answer")["text"]


def _dm(slack: FakeSlack, text: str, user: str, channel: str) -> str:
    envelope = message_event(text, channel=channel, user=user, channel_type="im")
    return _reply(slack, channel, _deliver(slack, envelope))


def _nothing_private(text: str) -> None:
    for word in PRIVATE_WORDS:
        assert word not in text, (word, text)
    assert "archives/G0SECRET" not in text and "archives/D0BEN" not in text
    assert not re.search(r"<@U\w+>", text), "a usage list notifies no one"


def test_usage_shows_private_runs_only_to_those_in_the_conversation(stack: Stack, fake_slack: FakeSlack) -> None:
    # A non-admin in a public channel: that channel's runs only.
    in_channel = _reply(fake_slack, PUBLIC, _deliver(fake_slack, app_mention_event("usage", channel=PUBLIC, user=ANA)))
    _nothing_private(in_channel)
    assert "in <#C0TEST>:* $0.10 across 1 run" in in_channel and "expense ratio of VTI" in in_channel
    assert "tracking error" not in in_channel, "another channel's runs are not this channel's"
    assert "By person:* ana $0.10" in in_channel

    # The slash command, from a non-admin: the same channel view, privately.
    slash = _slash(fake_slack, "usage", ANA, PUBLIC)
    _nothing_private(slash)
    assert "in <#C0TEST>:* $0.10" in slash

    # An admin in a DM: the workspace view, private conversations as totals only.
    admin_dm = _dm(fake_slack, "usage", ADMIN, "D0ADMIN")
    _nothing_private(admin_dm)
    assert "$0.95 across 4 runs" in admin_dm
    assert "a private channel $0.50" in admin_dm and "a direct message $0.30" in admin_dm
    assert "a question in a private channel · ben" in admin_dm and "a question in a direct message · ben" in admin_dm
    assert "<#C0TEST> $0.10" in admin_dm and "“expense ratio of VTI in our public channel”" in admin_dm
    assert "archives/C0TEST" in admin_dm, "a public run is linked to its thread"

    # An admin who is in the private channel sees its question and link; still not Ben's DM.
    insider = _slash(fake_slack, "usage", INSIDER, PUBLIC)
    assert "merger" in insider and "<#G0SECRET>" in insider and "archives/G0SECRET" in insider
    assert "salary" not in insider and "D0BEN" not in insider

    # Ben, in his own DM, sees his own DM's questions there.
    own = _dm(fake_slack, "usage", BEN, BEN_DM)
    assert "salary" in own and "merger" not in own


def test_a_slack_connect_admin_of_another_org_is_an_ordinary_user_here(stack: Stack, fake_slack: FakeSlack,
                                                                       redis_url: str) -> None:
    guest_view = _slash(fake_slack, "usage", GUEST, PUBLIC)
    _nothing_private(guest_view)
    assert "across 4 runs" not in guest_view, "no workspace view for another organization's admin"
    refused = _slash(fake_slack, "budget workspace off", GUEST, PUBLIC)
    assert refused.startswith("Only workspace admins can set budgets") and "nothing changed" in refused
    assert _slash(fake_slack, "budget workspace off", ADMIN, PUBLIC) == "Budget lifted: the workspace has no monthly cap now."


@pytest.mark.parametrize("stack_env", [{"DEEPTHREAD_CHANNELS": "C0OTHER"}])
def test_commands_answer_only_where_questions_are_taken(stack: Stack, fake_slack: FakeSlack) -> None:
    refused = _reply(fake_slack, PUBLIC, _deliver(fake_slack, app_mention_event("usage", channel=PUBLIC, user=ADMIN)))
    assert refused.startswith("I am not enabled in this channel") and "$" not in refused
    slash = _slash(fake_slack, "usage", ADMIN, PUBLIC)
    assert slash.startswith("I am not enabled in this channel") and "$" not in slash
    assert "in <#C0OTHER>:* $0.05" in _reply(fake_slack, OTHER, _deliver(
        fake_slack, app_mention_event("usage", channel=OTHER, user=ANA)))
