"""A refusal is told in every thread it refuses, end to end (real serve in Socket Mode and a worker,
real Redis, the fake Slack): for each kind of refusal (a channel, a workspace or a person over its
monthly budget, a channel the bot is not enabled in, a direct message where DMs are off), questions
in two threads, a question inside a thread that is not the bot's, a reply in the thread of a question
already refused, and a reply (or a mention) in a thread whose research has ended each get the refusal
in their own thread, once, and nothing starts; so does the requester's Approve on a plan awaiting it."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from redis import Redis

from agent.planning import Plan
from jobs import Run, Runs, RunStatus, RunStore
from tests.e2e.stack import socket_mode_stack
from tests.fakes.slack import TEAM_ID, FakeSlack, app_mention_event, message_event
from tests.fakes.slack_events import block_action
from tests.processes import Stack, wait_for

CHANNEL, ENABLED = "C0TEST", "C0OTHER"
ANA, BEN = "U0ANA", "U0BEN"
ANA_DM = "D0ANA"


@dataclass(frozen=True)
class Kind:
    name: str
    env: dict[str, str]
    says: str  # the start of the refusal's words
    where: tuple[str, ...]  # "channel": questions by mention in CHANNEL; "dm": direct messages


KINDS = [
    Kind(
        "channel over budget",
        {"DEEPTHREAD_CHANNEL_BUDGET_USD": "0"},
        "This channel has used its monthly budget",
        ("channel",),
    ),
    Kind(
        "workspace over budget",
        {"DEEPTHREAD_WORKSPACE_BUDGET_USD": "0"},
        "This workspace has used its monthly budget",
        ("channel", "dm"),
    ),
    Kind(
        "person over their DM budget",
        {"DEEPTHREAD_PERSON_BUDGET_USD": "0"},
        "Your questions in direct messages have used your monthly budget",
        ("dm",),
    ),
    Kind("channel not enabled", {"DEEPTHREAD_CHANNELS": ENABLED}, "I am not enabled in this channel", ("channel",)),
    Kind("DMs off", {"DEEPTHREAD_DMS": "off"}, "I do not take questions in direct messages here", ("dm",)),
]


@pytest.fixture(params=KINDS, ids=lambda kind: kind.name)
def kind(request: pytest.FixtureRequest) -> Kind:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def stack(tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web, kind: Kind) -> Iterator[Stack]:
    with socket_mode_stack(
        tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url, web_url=fake_web.url, **kind.env
    ) as s:
        yield s


def deliver(slack: FakeSlack, envelope: dict) -> str:
    """Deliver an event whose message Slack holds; returns the message's ts."""
    ts = slack.seed_event(envelope)
    envelope_id = slack.send_socket_event(envelope)
    wait_for(lambda: envelope_id in slack.socket_acks, 5, "the ack")
    return ts


def bot_replies(slack: FakeSlack, channel: str, thread_ts: str) -> list:
    """What the bot posted in a thread (a plan's progress message here is seeded, not posted)."""
    return [m for m in slack.thread(channel, thread_ts) if m.ts != thread_ts and m.bot_id]


def ended_run(redis: Redis, slack: FakeSlack, channel: str) -> str:
    """A thread whose research ended before the refusal applied (allowed then): its ts."""
    thread_ts = slack.add_user_message(channel, "<@UBOT> expense ratio of VTI", ANA)
    store = RunStore(redis)
    state = store.create(
        Run(team=TEAM_ID, channel=channel, thread_ts=thread_ts, requester=ANA, question="expense ratio of VTI")
    )
    store.finish(state.run.id, RunStatus.completed, "done")
    return thread_ts


def planned_run(redis: Redis, slack: FakeSlack, channel: str) -> tuple[str, str, str]:
    """A plan first question whose plan awaits approval (drafted before the refusal applied):
    (its thread, its progress message, its run id)."""
    thread_ts = slack.add_user_message(channel, "<@UBOT> plan first: expense ratio of VTI", ANA)
    progress = slack.add_user_message(channel, "Plan: …", "UBOT", thread_ts=thread_ts)
    report = slack.add_user_message(channel, "Report: …", "UBOT", thread_ts=thread_ts)
    store = RunStore(redis)
    state = store.create(
        Run(
            team=TEAM_ID,
            channel=channel,
            thread_ts=thread_ts,
            requester=ANA,
            question="expense ratio of VTI",
            plan_first=True,
        )
    )
    plan = Plan(key_questions=["What does VTI cost a year?"], expected_requests=4, expected_minutes=2)
    store.propose_plan(state.run.id, plan, datetime.now(UTC) + timedelta(hours=1))
    Runs(store).attach_messages(state.run.id, progress=progress, report=report)
    return thread_ts, progress, state.run.id


def approve(slack: FakeSlack, channel: str, progress: str) -> None:
    """The requester presses Approve on the plan (Socket Mode's `interactive` envelope)."""
    frame = {
        "envelope_id": str(uuid.uuid4()),
        "type": "interactive",
        "accepts_response_payload": False,
        "payload": block_action("approve_plan", user=ANA, channel=channel, message_ts=progress),
    }
    slack.send_socket_frame(frame)
    wait_for(lambda: frame["envelope_id"] in slack.socket_acks, 5, "the ack")


def asked_in(slack: FakeSlack, redis: Redis, where: str) -> list[tuple[str, str]]:
    """Every way of asking in `where`, delivered; (channel, thread) of each, in order."""
    asked: list[tuple[str, str]] = []
    if where == "channel":
        for user in (ANA, BEN):  # two questions, two threads
            asked.append(
                (CHANNEL, deliver(slack, app_mention_event("expense ratio of VTI", channel=CHANNEL, user=user)))
            )
        chat = slack.add_user_message(CHANNEL, "who knows the fees of SCHB?", BEN)  # a thread not the bot's
        deliver(slack, app_mention_event("fees of SCHB", channel=CHANNEL, user=ANA, thread_ts=chat))
        asked.append((CHANNEL, chat))
        ended = ended_run(redis, slack, CHANNEL)
        deliver(slack, message_event("now compare SCHB too", channel=CHANNEL, user=BEN, thread_ts=ended))
        deliver(slack, app_mention_event("and ITOT?", channel=CHANNEL, user=ANA, thread_ts=ended))
        asked += [(CHANNEL, ended), (CHANNEL, ended)]
        planned, progress, _ = planned_run(redis, slack, CHANNEL)
        approve(slack, CHANNEL, progress)
        asked.append((CHANNEL, planned))
        return asked
    for question in ("expense ratio of VTI", "tracking error of ITOT"):  # two direct messages, two threads
        asked.append((ANA_DM, deliver(slack, message_event(question, channel=ANA_DM, user=ANA, channel_type="im"))))
    first = asked[0][1]  # a reply in the thread of the first, refused, message
    deliver(slack, message_event("please, it is short", channel=ANA_DM, user=ANA, channel_type="im", thread_ts=first))
    asked.append((ANA_DM, first))
    ended = ended_run(redis, slack, ANA_DM)
    deliver(slack, message_event("now compare SCHB too", channel=ANA_DM, user=ANA, channel_type="im", thread_ts=ended))
    asked.append((ANA_DM, ended))
    planned, progress, _ = planned_run(redis, slack, ANA_DM)
    approve(slack, ANA_DM, progress)
    asked.append((ANA_DM, planned))
    return asked


def test_a_refusal_is_told_in_every_thread_it_refuses(
    stack: Stack, fake_slack: FakeSlack, redis_url: str, kind: Kind
) -> None:
    redis = Redis.from_url(redis_url)
    asked = [pair for where in kind.where for pair in asked_in(fake_slack, redis, where)]
    expected: dict[tuple[str, str], int] = {}
    for pair in asked:
        expected[pair] = expected.get(pair, 0) + 1
    for (channel, thread_ts), count in expected.items():
        told = wait_for(
            lambda c=channel, t=thread_ts, n=count: (
                len(bot_replies(fake_slack, c, t)) >= n and bot_replies(fake_slack, c, t)
            ),
            15,
            f"{count} refusal(s) in thread {thread_ts} of {channel}",
        )
        assert all(m.text.startswith(kind.says) for m in told), [m.text for m in told]
    time.sleep(1.0)  # nothing more comes: each refusal once, and no run started anywhere
    for (channel, thread_ts), count in expected.items():
        assert len(bot_replies(fake_slack, channel, thread_ts)) == count, (channel, thread_ts)
    store = RunStore(redis)
    for channel, thread_ts in expected:  # no thread got a run: each has at most the one it had before
        assert len(store.thread_run_ids(TEAM_ID, channel, thread_ts)) <= 1, (channel, thread_ts)
    awaiting = [store.get(run_id) for run_id in store.active_ids()]
    # Only the plans are left, still awaiting approval.
    assert all(state.status == RunStatus.planned and not state.approved_by for state in awaiting), [
        (state.status, state.approved_by) for state in awaiting
    ]
    assert not fake_slack.pins(CHANNEL) and not fake_slack.pins(ANA_DM)
