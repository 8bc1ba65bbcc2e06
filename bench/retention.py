"""Redis bytes a run keeps, at the end of a thread of follow-ups and after its retention.

    .venv/bin/python -m bench.retention [--follow-ups 10] [--days 90]

A question and `--follow-ups` follow-up runs in one thread, each a real research job on the real
queue (an RQ worker in this process) against the fake model and the fake web (tests/pages), in a
private redis-server. At the end it prints the bytes Redis holds for the thread (`MEMORY USAGE` of
every key, the deployment's own records apart), per run; then runs the maintenance round with a
clock `--days` and a day later (`Retention.round`) and prints them again. What is left apart is
counted apart: marks whose TTL ends within a day (events already handled, capacity marks: gone
by themselves long before the clock's `--days`) and the month's spend totals (kept by design).
Goals: at most 1 MB per run kept, 0 bytes of the thread after retention.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta

from redis import Redis
from rq import Queue

import jobs
from agent import AgentConfig, FetchConfig, SearchConfig, utcnow
from bot.cli.local_redis import LocalRedis
from bot.desk.retention import retention
from jobs import JobRuntime, Run, Runs, RunStore, enqueue, keys
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import ResearchPolicy
from tests.fakes.server import ServerThread
from tests.fakes.web import FakeWeb
from tests.paths import ROOT
from tests.helpers import BurstWorker

GOAL_BYTES_PER_RUN = 1_000_000
DEFAULT_FOLLOW_UPS = 10
QUESTION = "expense ratio VTI SCHB ITOT"
# Records one per deployment (the queue, the updates stream, RQ's registries): no run's.
DEPLOYMENT_PREFIXES = ("rq:",)


DAY_SECONDS = 86_400


def _deployment(key: str) -> bool:
    shared = {keys.UPDATES_STREAM, keys.CAPACITY_MODELS, keys.RETENTION_LEASE}
    return (
        key.startswith(DEPLOYMENT_PREFIXES)
        or key in shared
        or (key.startswith(keys.capacity("")[:-1]) and key.endswith(":state"))
    )


def held_bytes(redis: Redis) -> dict[str, tuple[int, list[str]]]:
    """Bytes (and keys) of every key but the deployment's own records, as the thread's, the month's
    totals, and marks that expire within a day."""
    kinds: dict[str, tuple[int, list[str]]] = {"thread": (0, []), "totals": (0, []), "expiring": (0, [])}
    for raw in redis.scan_iter(count=1000):
        key = raw.decode()
        if _deployment(key):
            continue
        ttl = int(redis.ttl(key))
        if key.startswith(keys.spend_month("T1", "")):
            kind = "totals"
        elif 0 < ttl <= DAY_SECONDS:
            kind = "expiring"
        else:
            kind = "thread"
        size, names = kinds[kind]
        kinds[kind] = (size + int(redis.memory_usage(key) or 0), [*names, key])
    return kinds


def thread(redis: Redis, follow_ups: int) -> list[str]:
    runs = Runs(RunStore(redis))
    worker = BurstWorker([Queue(keys.QUEUE, connection=redis)], connection=redis)
    state = runs.start(Run(question=QUESTION, team="T1", channel="C1", thread_ts="1.0", requester="U1"))
    runs.attach_messages(state.run.id, progress="1.1", report="1.2")
    ids = [state.run.id]
    enqueue(redis, state.run)
    worker.work(burst=True, logging_level="WARNING")
    for n in range(follow_ups):
        parent = runs.get(ids[-1])
        follow = runs.continue_from(
            parent, f"and what about fund {n + 1}?", requester="U1", author="<@U1>", event_id=f"E{n}"
        )
        assert follow is not None
        ids.append(follow.state.run.id)
        enqueue(redis, follow.state.run)
        worker.work(burst=True, logging_level="WARNING")
    return ids


def run(follow_ups: int, days: float) -> list[str]:
    model = FakeAnthropic(ResearchPolicy())
    web = FakeWeb.from_directory(ROOT / "tests" / "pages", prefix="/pages/")
    with ServerThread(model.app()) as model_server, ServerThread(web.app()) as web_server, LocalRedis() as local:
        redis = Redis.from_url(local.url)
        jobs.configure(
            JobRuntime(
                agent=AgentConfig(
                    search=SearchConfig(provider="searxng", searxng_url=web_server.url),
                    fetch=FetchConfig(allow=["127.0.0.1"]),
                ),
                anthropic_api_key="bench-key",
                anthropic_base_url=model_server.url,
                redis_url=local.url,
            )
        )
        ids = thread(redis, follow_ups)
        end = held_bytes(redis)
        gone = retention(redis).round(utcnow() + timedelta(days=days + 1), days)
        after = held_bytes(redis)
    kept = sum(size for size, _ in end.values())
    per_run = kept / len(ids)
    print(f"thread of {len(ids)} runs (a question and {follow_ups} follow-ups)")
    print(
        f"  at the end:       {kept:>10,} bytes in {sum(len(k) for _, k in end.values())} keys ({per_run:,.0f} per run)"
    )
    print(
        f"  after retention:  {after['thread'][0]:>10,} bytes of the thread ({len(gone.runs)} runs, {gone.keys} keys "
        f"deleted); the month's totals {after['totals'][0]:,} bytes; marks expiring within a day "
        f"{after['expiring'][0]:,} bytes in {len(after['expiring'][1])} keys"
    )
    failures = []
    if per_run > GOAL_BYTES_PER_RUN:
        failures.append(f"{per_run:,.0f} bytes per run kept, goal at most {GOAL_BYTES_PER_RUN:,}")
    if after["thread"][1]:
        failures.append(f"the thread's keys left after retention: {after['thread'][1]}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.retention", description=__doc__.split("\n\n")[0])
    parser.add_argument("--follow-ups", type=int, default=DEFAULT_FOLLOW_UPS)
    parser.add_argument("--days", type=float, default=90.0, help="DEEPTHREAD_RETENTION_DAYS (default %(default)s)")
    args = parser.parse_args(argv)
    failures = run(args.follow_ups, args.days)
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
