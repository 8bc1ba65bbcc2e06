"""Retention (jobs/upkeep/retention.py, bot/desk/retention.py): every key family of jobs/keys.py and
bot/keys.py has a rule (read from the modules, so a family added later without one fails here);
the round deletes a run's every record `days` after it finished, with a clock the test holds (the
round's `now`), leaves a thread whose run is active, and keeps the spend ledger's totals only; a
thread's, channel's or workspace's forget deletes that and nothing of another workspace's."""
from __future__ import annotations

import types
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis import Redis
from rq import Queue

import jobs
from agent.events import utcnow
from bot import keys as bot_keys
from bot.desk.retention import BOT_CATALOGUE, retention
from jobs import JobRuntime, Run, Runs, RunStatus, RunStore, enqueue, keys
from jobs.budgets.spend import Spend
from jobs.process.metrics import metrics
from jobs.upkeep.retention import JOBS_CATALOGUE, Catalogue, Owner, Subject
from tests.helpers import BurstWorker, keys_holding, web_config

QUESTION = "expense ratio VTI SCHB ITOT"
CATALOGUES = [JOBS_CATALOGUE, BOT_CATALOGUE]


@pytest.mark.parametrize("catalogue", CATALOGUES, ids=lambda c: c.module.__name__)
def test_every_key_family_of_the_catalogue_has_a_retention_rule(catalogue: Catalogue) -> None:
    families = catalogue.families()
    assert len(families) > 20, "the catalogue is read from the module"
    missing = sorted(set(families) - set(catalogue.rules))
    assert not missing, f"key families without a retention rule (add one in {catalogue.module.__name__}'s catalogue): {missing}"
    stale = sorted(set(catalogue.rules) - set(families))
    assert not stale, f"rules for key families that no longer exist: {stale}"


def test_a_key_family_added_to_a_module_is_in_its_catalogue() -> None:
    module = types.ModuleType("deepthread_keys_probe")
    exec("def verdicts(run_id):\n    return 'x:' + run_id\nSHARED = 'y'\n", module.__dict__)
    catalogue = Catalogue(module=module, rules={}, shared=lambda: ["SHARED"])
    assert catalogue.families() == ["SHARED", "verdicts"]


def _work(redis: Redis) -> None:
    BurstWorker([Queue(keys.QUEUE, connection=redis)], connection=redis).work(burst=True)


def _finished_thread(redis: Redis, redis_url: str, fake_model, fake_web, team: str, channel: str = "C1",
                     thread_ts: str = "1.0") -> list[str]:
    """A thread of two finished runs (a question and its follow-up) through the real queue, with the
    bot's records of them (posts, rendering, the report's files, the thread's session)."""
    jobs.configure(JobRuntime(agent=web_config(fake_web.url), anthropic_api_key="test-key",
                              anthropic_base_url=fake_model.url, redis_url=redis_url))
    runs = Runs(RunStore(redis))
    first = runs.start(Run(question=QUESTION, team=team, channel=channel, thread_ts=thread_ts, requester="U1"))
    runs.attach_messages(first.run.id, progress=f"{thread_ts}1", report=f"{thread_ts}2")
    enqueue(redis, first.run)
    _work(redis)
    parent = runs.get(first.run.id)
    follow = runs.continue_from(parent, "and their tracking error?", requester="U1", author="<@U1>", event_id="E2")
    assert follow is not None
    enqueue(redis, follow.state.run)
    _work(redis)
    ids = [first.run.id, follow.state.run.id]
    for run_id in ids:
        assert runs.get(run_id).status == RunStatus.completed
        redis.hset(bot_keys.posts(run_id), mapping={"progress": "1", "report": "2"})
        redis.set(bot_keys.rendered(run_id), QUESTION)
    redis.hset(bot_keys.spill(team, channel, f"{thread_ts}2"), "file", "F1")
    redis.hset(bot_keys.canvas(team, channel, f"{thread_ts}2"), "id", "F2")
    redis.set(bot_keys.session(team, channel, thread_ts), QUESTION)
    redis.set(bot_keys.told_files(team, channel, thread_ts), "F3")
    redis.set(keys.recheck_schedule(team, channel, thread_ts), "{}")
    return ids


def _deleted(reason: str, record: str) -> float:
    return metrics().deletions.labels(reason=reason, record=record)._value.get()


def test_the_round_deletes_a_runs_every_record_after_the_set_days_and_keeps_totals_only(
        redis: Redis, redis_url: str, fake_model, fake_web) -> None:
    ids = _finished_thread(redis, redis_url, fake_model, fake_web, team="T1")
    month_before = Spend(redis).month("T1")
    assert month_before.total.runs == 2 and month_before.top_runs
    assert keys_holding(redis, QUESTION), "the question is stored while the runs are kept"
    before = _deleted("retention", "run")
    now = utcnow()

    kept = retention(redis).round(now + timedelta(days=29), days=30)
    assert not kept.runs and all(redis.exists(keys.run_state(i)) for i in ids), "younger than the set days: kept"

    gone = retention(redis).round(now + timedelta(days=31), days=30)

    assert sorted(gone.runs) == sorted(ids) and gone.threads == 1
    for run_id in ids:
        assert not keys_holding(redis, run_id), f"every record naming run {run_id} is gone"
        assert not redis.keys(f"rq:job:run-{run_id}*"), "RQ's record of its job too"
    assert not keys_holding(redis, QUESTION), "nothing keeps the question: not the spend ledger, not the thread"
    assert not redis.keys(f"{keys.PREFIX}:*T1:C1:1.0*"), "the thread's own records are gone"
    month = Spend(redis).month("T1")
    assert month.total == month_before.total and not month.top_runs, "the ledger keeps its totals, not its runs"
    assert _deleted("retention", "run") - before == 2 and _deleted("retention", "key") > 0, "counted in the metrics"


def test_the_round_leaves_a_thread_whose_run_is_active(redis: Redis, redis_url: str, fake_model, fake_web) -> None:
    ids = _finished_thread(redis, redis_url, fake_model, fake_web, team="T1")
    runs = Runs(RunStore(redis))
    active = runs.continue_from(runs.get(ids[-1]), "one more thing", requester="U1", author="<@U1>", event_id="E3")
    assert active is not None and not active.state.status.finished

    gone = retention(redis).round(utcnow() + timedelta(days=31), days=30)

    assert not gone.runs and all(redis.exists(keys.run_state(i)) for i in [*ids, active.state.run.id])
    assert set(ids) <= set(gone.kept_active)


def test_forgetting_a_thread_stops_its_active_run_and_deletes_the_rest_again_later(
        redis: Redis, redis_url: str, fake_model, fake_web) -> None:
    ids = _finished_thread(redis, redis_url, fake_model, fake_web, team="T1")
    runs = Runs(RunStore(redis))
    active = runs.continue_from(runs.get(ids[-1]), "one more thing", requester="U1", author="<@U1>", event_id="E3")
    assert active is not None
    gone = retention(redis).forget_thread("T1", "C1", "1.0", "forget")
    assert gone.stopped == [active.state.run.id] and len(gone.runs) == 3
    assert not keys_holding(redis, QUESTION)
    redis.set(keys.result(active.state.run.id, "late"), "written by the killed job after the forget")
    retention(redis).round(utcnow() + timedelta(minutes=5), days=30)
    assert not keys_holding(redis, active.state.run.id), "what the stopped run wrote late goes in the next round"


ids_ = st.from_regex(r"[A-Z][A-Z0-9]{2,6}", fullmatch=True)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(team=ids_, other=ids_, channel=ids_, other_channel=ids_, ts=st.sampled_from(["1.0", "2.5", "17.000100"]),
       scope=st.sampled_from(["thread", "channel", "team"]))
def test_a_forget_deletes_its_own_and_nothing_of_another_thread_channel_or_workspace(
        redis: Redis, team: str, other: str, channel: str, other_channel: str, ts: str, scope: str) -> None:
    """Records of every owner, written by the catalogues' own key functions, for the forgotten
    thread and for its neighbours (another thread of the channel, another channel, the same
    channel id in another workspace)."""
    redis.flushdb()
    if other == team or other_channel == channel:
        return
    written: dict[tuple[str, str, str], list[tuple[str, Owner]]] = {}
    for where in [(team, channel, ts), (team, channel, "99.9"), (team, other_channel, ts), (other, channel, ts)]:
        t, c, th = where
        store = RunStore(redis)
        state = store.create(Run(question=f"q {where}", team=t, channel=c, thread_ts=th))
        store.set_messages(state.run.id, progress=th + "1", report=th + "2")
        store.finish(state.run.id, RunStatus.completed, "")
        redis.set(keys.result(state.run.id, "r1"), "page text")
        made = [(keys.run_state(state.run.id), Owner.RUN), (keys.result(state.run.id, "r1"), Owner.RUN)]
        for catalogue in CATALOGUES:
            for name, rule in catalogue.rules.items():
                if rule.owner in (Owner.THREAD, Owner.MESSAGE, Owner.WORKSPACE) and not name.startswith("legacy"):
                    key = catalogue.key(name, Subject(team=t, channel=c, thread_ts=th, ts=th + "2"))
                    assert key is not None
                    key = key.replace("*", "x")
                    if not redis.exists(key):
                        redis.set(key, "1")
                    made.append((key, rule.owner))
        written[where] = made
    forget = retention(redis)
    if scope == "thread":
        forget.forget_thread(team, channel, ts, "forget")
        gone = [(team, channel, ts)]
    elif scope == "channel":
        forget.forget_channel(team, channel, "channel_deleted")
        gone = [(team, channel, ts), (team, channel, "99.9")]
    else:
        forget.forget_team(team, "uninstalled")
        gone = [w for w in written if w[0] == team]
    for where, made in written.items():
        left = [k for k, owner in made if redis.exists(k) and (owner != Owner.WORKSPACE or scope == "team")]
        if where in gone:
            assert not left, f"{scope} forget of {gone}: left {left}"
        else:
            assert all(redis.exists(k) for k, _ in made), f"{scope} forget of {gone} reached {where}"
