"""The key audit (jobs/upkeep/key_audit.py, bot/desk/retention.py `key_audit`) against a real
redis-server: a real thread's runs, written through the real queue, leave nothing over, before and
after the retention round deletes them; a key no family names, a mark whose TTL was removed, a
run's record written after its run was forgotten, a thread's record with no run left and RQ's
record of a finished job kept for good are each reported with what to do; a deployment's
persistent records, a workspace's settings and an installation never are."""
from __future__ import annotations

from datetime import timedelta

from redis import Redis

from agent.events import utcnow
from bot import keys as bot_keys
from bot.desk.retention import BOT_CATALOGUE, BOT_EXPIRING, key_audit, retention
from jobs import Run, Runs, RunStore, keys
from jobs.upkeep.key_audit import JOBS_EXPIRING, LeftoverKind, audit_keys
from jobs.upkeep.retention import JOBS_CATALOGUE, Owner
from tests.jobs.test_retention import _finished_thread


def _kinds(redis: Redis) -> dict[tuple[LeftoverKind, str], int]:
    return {(o.kind, o.family): o.count for o in key_audit(redis).leftovers}


def test_a_real_threads_runs_leave_nothing_over_before_and_after_the_round(
        redis: Redis, redis_url: str, fake_model, fake_web) -> None:
    ids = _finished_thread(redis, redis_url, fake_model, fake_web, team="T1")

    audit = key_audit(redis)

    assert audit.problems == [], audit.problems
    assert audit.complete and audit.keys == audit.total == redis.dbsize()
    assert audit.by_owner[Owner.RUN] >= 10 and audit.by_owner[Owner.THREAD] >= 3, audit.by_owner
    assert audit.by_owner[Owner.MESSAGE] >= 2 and audit.by_owner["rq"] >= 2, audit.by_owner
    assert audit.by_owner["unowned"] == 0 and audit.used_memory > 0
    fact = audit.fact()
    assert fact.startswith(f"Redis keys: {audit.keys} (runs {audit.by_owner[Owner.RUN]}, "), fact
    assert "threads" in fact and fact.endswith(" MB"), fact

    gone = retention(redis).round(utcnow() + timedelta(days=91), days=90)
    assert sorted(gone.runs) == sorted(ids)
    assert key_audit(redis).problems == [], "what the round leaves (the ledger's totals, RQ's registries) is owned"


def test_a_key_no_module_owns_is_counted_by_its_shape(redis: Redis) -> None:
    for n in (123, 456, 789):
        redis.set(f"{keys.PREFIX}:mystery:{n}", "x")
    redis.set("another-app:thing:1", "x")  # not this deployment's: counted, never reported

    audit = key_audit(redis)

    [line] = audit.problems
    assert line.startswith(f"Redis holds 3 keys no module owns, like {keys.PREFIX}:mystery:"), line
    assert f"redis-cli --scan --pattern '{keys.PREFIX}:mystery:*' | xargs redis-cli DEL" in line
    assert audit.by_owner["unowned"] == 3 and audit.by_owner["other"] == 1


def test_a_mark_whose_ttl_was_removed_is_reported(redis: Redis) -> None:
    assert retention(redis).due_round(utcnow(), 90) is not None  # takes the round's lease, ten minutes
    redis.zadd(bot_keys.OAUTH_STATES, {"n1": 1})
    redis.expire(bot_keys.OAUTH_STATES, 300)
    assert key_audit(redis).problems == []

    redis.persist(keys.RETENTION_LEASE)

    [line] = key_audit(redis).problems
    assert line.startswith(
        f"Redis holds 1 RETENTION_LEASE mark that never expires (no TTL), e.g. {keys.RETENTION_LEASE}: "), line
    assert "redis-cli DEL" in line and "report a bug" in line


def test_a_lease_or_a_secret_without_its_ttl_is_reported_whoever_owns_it(redis: Redis) -> None:
    run = RunStore(redis).create(Run(question="q", team="T1", channel="C1", thread_ts="1.0")).run
    redis.set(keys.lock(run.id), "1:job", px=60_000)
    redis.set(bot_keys.session_lease("T1", "C1", "1.0"), "serve", px=60_000)
    assert key_audit(redis).problems == []

    redis.persist(keys.lock(run.id))
    redis.persist(bot_keys.session_lease("T1", "C1", "1.0"))

    assert _kinds(redis) == {(LeftoverKind.NO_TTL, "lock"): 1, (LeftoverKind.NO_TTL, "session_lease"): 1}


def test_a_deployments_records_a_workspaces_settings_and_an_installation_are_not_left_over(redis: Redis) -> None:
    redis.set(bot_keys.PUBLISHER_CURSOR, "0-1")
    redis.sadd(keys.CAPACITY_MODELS, "claude-sonnet-5-5")
    redis.hset(keys.capacity("us.anthropic.claude-sonnet-5-5-v1:0") + "limits", "requests", "50")
    redis.zadd(keys.HARD_STOPS, {"gone-run": 1.0})
    redis.xadd(keys.UPDATES_STREAM, {"run_id": "gone-run", "version": 1})
    redis.hset(keys.budgets("T1"), "workspace", "100")
    redis.hset(bot_keys.plan_first("T1"), "C1", "1")
    redis.set(bot_keys.installation("-", "T1"), "sealed")
    redis.sadd(bot_keys.INSTALLATIONS, bot_keys.installation("-", "T1"))

    audit = key_audit(redis)

    assert audit.problems == []
    assert audit.by_owner[Owner.DEPLOYMENT] == 5 and audit.by_owner[Owner.WORKSPACE] == 2, audit.by_owner
    assert audit.by_owner[Owner.INSTALLATION] == 2 and audit.by_owner["unowned"] == 0, audit.by_owner


def test_a_runs_record_written_after_its_run_was_forgotten_is_an_orphan(
        redis: Redis, redis_url: str, fake_model, fake_web) -> None:
    first, second = _finished_thread(redis, redis_url, fake_model, fake_web, team="T1")
    retention(redis).forget_run(first)
    redis.rpush(keys.notes(first), "a late note")  # a killed job's late write, without its TTL
    redis.set(keys.result(first, "r9"), "page", ex=3600)  # has a TTL: it goes by itself

    [line] = key_audit(redis).problems

    assert line.startswith(f"Redis holds 1 notes record of runs that no longer exist, with no TTL, e.g. "
                           f"{keys.notes(first)}: "), line
    assert f"redis-cli --scan --pattern '*{first}*'" in line and "report a bug" in line
    assert redis.exists(keys.run_state(second)), "the thread's other run is kept, and is not reported"

    redis.zadd(keys.FORGOTTEN, {first: utcnow().timestamp()})
    assert key_audit(redis).problems == [], "a run forgotten moments ago is deleted once more by the round"


def test_a_threads_record_with_no_run_left_names_the_forget_that_deletes_it(redis: Redis) -> None:
    store = RunStore(redis)
    run = store.create(Run(question="q", team="T1", channel="C1", thread_ts="1.0")).run
    redis.set(bot_keys.session("T1", "C1", "1.0"), "{}")  # no TTL: kept while the thread has runs
    redis.hset(bot_keys.spill("T1", "C1", "1.2"), "file", "F1")  # a report's file, no message record
    assert _kinds(redis) == {(LeftoverKind.RUN_ORPHAN, "spill"): 1}, "a message no run names is its run's orphan"
    Runs(store).attach_messages(run.id, progress="1.1", report="1.2")
    assert key_audit(redis).problems == []

    retention(redis).forget_run(run.id)
    redis.lrem(keys.thread_runs("T1", "C1", "1.0"), 0, run.id)

    [line] = key_audit(redis).problems
    assert line.startswith(f"Redis holds 1 session record of threads with no run left, with no TTL, e.g. "
                           f"{bot_keys.session('T1', 'C1', '1.0')}: "), line
    assert "`deepthread forget --team T1 --channel C1 --thread 1.0`" in line
    retention(redis).forget_thread("T1", "C1", "1.0", "forget")
    assert key_audit(redis).problems == [], "the forget it names deletes it"


def test_rqs_record_of_a_finished_job_kept_for_good_is_reported(
        redis: Redis, redis_url: str, fake_model, fake_web) -> None:
    first, _ = _finished_thread(redis, redis_url, fake_model, fake_web, team="T1")
    job = f"rq:job:{keys.job_id(first)}"
    assert redis.ttl(job) > 0, "RQ keeps a finished job's record for its result TTL"

    redis.persist(job)

    assert _kinds(redis) == {(LeftoverKind.RQ_JOB, "rq:job"): 1}


def test_the_audit_stops_after_its_limit_and_says_so(redis: Redis) -> None:
    redis.mset({f"{keys.PREFIX}:budgets:T{n}": "{}" for n in range(50)})

    audit = audit_keys(redis, limit=20, count=10)

    assert not audit.complete and 20 <= audit.keys < 50 and audit.total == 50
    assert audit.fact().startswith("Redis keys: 50, the first "), audit.fact()


def test_the_audit_reads_the_deployments_prefix(redis: Redis) -> None:
    keys.configure(prefix="staging")
    try:
        redis.set(keys.RETENTION_LEASE, "1")
        redis.set("deepthread:mystery:1", "x")  # the default deployment's: not this one's to judge
        audit = key_audit(redis)
    finally:
        keys.configure()
    assert audit.by_owner["other"] == 1
    assert [o.family for o in audit.leftovers] == ["RETENTION_LEASE"]


def test_every_family_said_to_expire_is_one_of_a_catalogue() -> None:
    families = {name for c in (JOBS_CATALOGUE, BOT_CATALOGUE) for name in c.rules}
    assert (JOBS_EXPIRING | BOT_EXPIRING) <= families
    assert JOBS_EXPIRING <= set(JOBS_CATALOGUE.rules), "jobs/ names only its own families"


def test_a_key_of_another_type_than_its_familys_does_not_stop_the_audit(redis: Redis) -> None:
    redis.set("rq:job:run-abc", "not a hash")
    redis.hset(keys.message_run("T1", "C1", "1.2"), "run", "abc")  # a message record as a hash
    redis.set(keys.thread_runs("T1", "C1", "1.0"), "not a list")

    audit = key_audit(redis)

    assert audit.keys == 3 and audit.by_owner["rq"] == 1
    assert {o.kind for o in audit.leftovers} == {LeftoverKind.RUN_ORPHAN, LeftoverKind.THREAD_ORPHAN}
