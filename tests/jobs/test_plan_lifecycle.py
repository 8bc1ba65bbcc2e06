"""Plan first's lifecycle in jobs/ against a real Redis: queued → planned → running → ended, never
back; approval only while the plan awaits it (once); an unapproved plan expires with a note; and the
run's action token kept apart from its record, for a short time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import SecretStr
from redis import Redis

from agent import Progress
from agent.events import utcnow
from agent.planning import Plan
from jobs import Run, RunStatus, RunStore, keys
from jobs.lifecycle.planning import approve, expire_due
from jobs.records.run_fields import Write

PLAN = Plan(key_questions=["What does VTI charge?"], outline=["Fees"], expected_requests=5, expected_minutes=3)


def planned(redis: Redis, *, expires_in: float = 3600) -> str:
    store = RunStore(redis)
    state = store.create(Run(channel="C1", thread_ts="1.0", question="q", plan_first=True))
    store.propose_plan(state.run.id, PLAN, utcnow() + timedelta(seconds=expires_in))
    redis.zadd(keys.PLANS_DUE, {state.run.id: (utcnow() + timedelta(seconds=expires_in)).timestamp()})
    return state.run.id


def test_the_lifecycle_moves_only_forward_through_planned(redis: Redis) -> None:
    store = RunStore(redis)
    run_id = planned(redis)
    state = store.get(run_id)
    assert state.status == RunStatus.planned and state.plan == PLAN
    store.write(run_id, Write(status=RunStatus.queued))  # a late writer cannot move it back
    assert store.get(run_id).status == RunStatus.planned
    assert approve(redis, run_id, "U1") is not None
    state = store.apply(store.get(run_id), Progress(phase="researching", activity="Searching"))
    assert state.status == RunStatus.running
    store.propose_plan(run_id, PLAN, utcnow())  # a stale redraft cannot pull it back to planned
    assert (store.get(run_id).status, store.get(run_id).phase) == (RunStatus.running, "researching")


def test_a_plan_is_approved_once_and_only_while_it_awaits_approval(redis: Redis) -> None:
    run_id = planned(redis)
    assert approve(redis, run_id, "U1").approved_by == "U1"  # type: ignore[union-attr]
    assert approve(redis, run_id, "U2") is None, "a second approval changes nothing"
    assert RunStore(redis).get(run_id).approved_by == "U1"
    assert redis.zscore(keys.PLANS_DUE, run_id) is None, "an approved plan no longer expires"


def test_an_unapproved_plan_expires_with_a_note_and_cannot_be_approved_after(redis: Redis) -> None:
    due, later = planned(redis, expires_in=-1), planned(redis, expires_in=3600)
    assert expire_due(redis) == [due]
    state = RunStore(redis).get(due)
    assert state.status == RunStatus.stopped and "the plan was not approved" in state.reason
    assert "nothing was researched" in state.reason
    assert approve(redis, due, "U1") is None
    assert RunStore(redis).get(later).status == RunStatus.planned, "a plan still in time stays"


def test_the_action_token_lives_apart_from_the_run_record_and_briefly(redis: Redis, sealing_key: str) -> None:
    store = RunStore(redis)
    state = store.create(Run(channel="C1", thread_ts="1.0", question="q", action_token=SecretStr("123.456.abcdef")))
    assert b"123.456.abcdef" not in redis.hget(keys.run_state(state.run.id), "run")
    assert store.get(state.run.id).run.action_token.get_secret_value() == "123.456.abcdef"  # type: ignore[union-attr]
    assert 0 < redis.ttl(keys.action_token(state.run.id)) <= keys.ACTION_TOKEN_TTL_SECONDS
    redis.delete(keys.action_token(state.run.id))  # expired
    assert store.get(state.run.id).run.action_token is None


@pytest.mark.parametrize(
    ("text", "question"),
    [
        ("plan first: compare VTI and SCHB", "compare VTI and SCHB"),
        ("Plan first — compare VTI and SCHB", "compare VTI and SCHB"),
        ("PLAN FIRST, compare VTI", "compare VTI"),
        ("plan first compare VTI", None),  # no separator: an ordinary question that happens to start so
        ("compare VTI; plan first: no", None),
        ("plan first:", None),
    ],
)
def test_the_plan_first_prefix(text: str, question: str | None) -> None:
    from bot.desk.plan_first import plan_first_question

    assert plan_first_question(text) == question
