"""Who may raise what a run costs, end to end (real serve in HTTP mode and a worker, the fake Slack's
users.info reporting each person's team): "go deeper" (reply or button), re-check schedules and
stopping belong to the requester and this workspace's admins; a Slack Connect guest who is an admin
of their own organization is an ordinary user here; notes stay open to the thread. Direct messages
can be switched off (DEEPTHREAD_DMS) and count against a person's monthly budget."""
from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from redis import Redis

from jobs import RunStore
from jobs.keyspace.keys import upgrades
from tests.e2e.stack import CHANNEL, main_requests, post_event, start, stack_environment, serve_only
from tests.fakes.policies import SteadyPolicy
from tests.fakes.slack import FakeSlack, message_event, reaction_added_event, sign
from tests.fakes.slack_events import FORM, block_action_form
from tests.processes import SIGNING_SECRET, Stack, wait_for
from tests.fakes.slack_records import TEAM_ID

ANA, BEN, ADMIN, GUEST = "U0ANA", "U0BEN", "U0ADMIN", "U0GUEST"


def _people(slack: FakeSlack) -> None:
    slack.add_user(ADMIN, name="alex", admin=True)
    slack.add_user(GUEST, name="gus", admin=True, owner=True, team_id="T0PARTNER")  # Slack Connect: admin elsewhere


def _ephemeral_to(slack: FakeSlack, user: str, after: int = 0) -> str:
    return wait_for(lambda: [e for e in slack.ephemerals(CHANNEL) if e.user == user][after:], 10,
                    f"the private answer to {user}")[0].text


def _say(stack: Stack, slack: FakeSlack, thread: str, text: str, user: str) -> None:
    reply = message_event(text, channel=CHANNEL, thread_ts=thread, user=user)
    slack.seed_event(reply)
    assert post_event(stack, reply).status_code == 200


def test_only_the_requester_or_an_admin_raises_the_cost_of_a_run(stack: Stack, fake_slack: FakeSlack, fake_model,
                                                                  redis_url: str) -> None:
    _people(fake_slack)
    fake_model.delay = 0.2
    fake_model.policy = SteadyPolicy(turns=40)
    thread, progress, report_ts = start(stack, fake_slack)
    wait_for(lambda: len(main_requests(fake_model)) >= 2, 15, "a turn or two")
    redis = Redis.from_url(redis_url)
    [run_id] = RunStore(redis).thread_run_ids(TEAM_ID, CHANNEL, thread)

    _say(stack, fake_slack, thread, "go deeper", BEN)
    assert _ephemeral_to(fake_slack, BEN) == (
        "Only <@U0ANA> (who asked) or a workspace admin can give this run the deep budget. "
        "You can still reply in the thread with what to look into.")
    _say(stack, fake_slack, thread, "go deeper", GUEST)
    assert "Only <@U0ANA> (who asked)" in _ephemeral_to(fake_slack, GUEST)
    body = block_action_form("go_deeper", user=BEN, channel=CHANNEL, message_ts=progress)
    pressed = httpx.post(stack.events_url, content=body, headers={**sign(SIGNING_SECRET, body), "Content-Type": FORM})
    assert pressed.status_code == 200
    assert "deep budget" in _ephemeral_to(fake_slack, BEN, after=1)
    _say(stack, fake_slack, thread, "recheck daily", BEN)
    assert "can schedule re-checks of this report" in _ephemeral_to(fake_slack, BEN, after=2)
    reaction = reaction_added_event("octagonal_sign", user=GUEST, item_channel=CHANNEL, item_ts=progress)
    assert post_event(stack, reaction).status_code == 200
    assert "can stop this run" in _ephemeral_to(fake_slack, GUEST, after=1)
    time.sleep(0.5)
    assert not redis.exists(upgrades(run_id)), "nobody else's go deeper was recorded"

    # A note stays open to the thread; the requester and an admin may raise the budget.
    _say(stack, fake_slack, thread, "Only sources after 2020", BEN)
    wait_for(lambda: any("Only sources after 2020" in json.dumps(r["messages"][-1]) for r in main_requests(fake_model)),
             15, "the note in a request")
    _say(stack, fake_slack, thread, "go deeper", ADMIN)
    wait_for(lambda: any(m.text.startswith(("Going deeper", "This run has ended")) for m in fake_slack.thread(CHANNEL, thread)),
             15, "the upgrade")
    _say(stack, fake_slack, thread, "recheck daily", ANA)
    wait_for(lambda: any(m.text.startswith("Re-check scheduled") for m in fake_slack.thread(CHANNEL, thread)), 15,
             "the requester's schedule")


def _dm(stack: Stack, slack: FakeSlack, text: str, user: str) -> str:
    channel = f"D{user[1:]}"
    envelope = message_event(text, channel=channel, user=user, channel_type="im")
    ts = slack.seed_event(envelope)
    assert post_event(stack, envelope).status_code == 200
    return wait_for(lambda: [m for m in slack.thread(channel, ts) if m.ts != ts], 15, f"the reply to {text!r}")[0].text


@pytest.mark.parametrize("setting", ["off"])
def test_dms_off_takes_no_question_there_and_still_answers_commands(tmp_path: Path, redis_url: str, setting: str,
                                                                   fake_slack: FakeSlack, fake_model, fake_web) -> None:
    env = {**stack_environment(redis_url, fake_slack, fake_model, fake_web), "DEEPTHREAD_DMS": setting}
    with serve_only(env, tmp_path / "serve.log") as (_, stack):
        refused = _dm(stack, fake_slack, "what is the expense ratio of VTI?", ANA)
        assert refused.startswith("I do not take questions in direct messages here")
        assert "Spend in" in _dm(stack, fake_slack, "usage", ANA)
    assert not RunStore(Redis.from_url(redis_url)).active_ids(), "no run started"
    assert not [m for m, _ in fake_slack.calls if m == "pins.add"], "no run started"


def test_a_person_s_budget_caps_their_direct_messages(tmp_path: Path, redis_url: str, fake_slack: FakeSlack,
                                                      fake_model, fake_web) -> None:
    _people(fake_slack)
    env = {**stack_environment(redis_url, fake_slack, fake_model, fake_web), "DEEPTHREAD_PERSON_BUDGET_USD": "0"}
    with serve_only(env, tmp_path / "serve.log") as (_, stack):
        refused = _dm(stack, fake_slack, "what is the expense ratio of VTI?", ANA)
        assert refused.startswith("Your questions in direct messages have used your monthly budget: $0.00 of $0.00")
        assert "budget @person $X/month" in refused
        assert _dm(stack, fake_slack, "budget <@U0ANA> $5/month", BEN).startswith("Only workspace admins")
        set_ = _dm(stack, fake_slack, "budget <@U0ANA|ana> $5/month", ADMIN)
        assert set_.startswith("Budget set: u0ana's questions in direct messages may spend $5.00 a month"), set_
        assert "<@U0ANA>" not in set_, "named, not pinged"
        started = _dm(stack, fake_slack, "what is the expense ratio of VTI?", ANA)
        assert "used your monthly budget" not in started
    # A channel's questions are not a person's: the person's budget never touches them.
    assert Redis.from_url(redis_url).hget("deepthread:budgets:T0TEST", "person:U0ANA") == b"5000000"
