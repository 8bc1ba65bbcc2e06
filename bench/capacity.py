"""How many concurrent runs one Redis carries: 1,000 runs' Redis traffic, the product's own
keys and scripts, no model.

    .venv/bin/python -m bench.capacity [--runs 1000] [--turns 3] [--turn-seconds 20]

Starts a private redis-server and plays N runs at once through the product's own classes, each
for `--turns` turns. What one turn of a real run sends is replayed in its real proportions: a
model turn's place from the shared limiter (jobs.budgets.capacity), the request logged (jobs.records.stores,
compressed), two page reads stored (compressed) with three sources each, progress and usage
applied to run state (jobs.records.store's Lua write), a checkpoint saved, the publisher reading the run
back three times (jobs.records.store.get; a publisher follows the updates stream too); and what the run
does while the turn takes `--turn-seconds` (20 s: the model's answer and the tools): its stop
flag read as a backstop every 5 minutes (a stop is notified: jobs/control/control_listener.py) and its lease
renewed every 30 s by the product's script, recording it alive once a minute (jobs.control.ownership).

The replay goes as fast as this client can (one Python process cannot play 1,000 real runs at
their real pace on a shared machine); Redis's cost is what is measured: its CPU for every
command received (used_cpu, all in), and so the commands a second and the share of one core
1,000 runs at their real pace need. Against the same Redis in the same run, plain GETs are the
baseline (CPU per command: the ratio is what compares across machines). It prints the memory
each kind of record takes per run (per turn, and for a whole run of `--turns-per-run` turns),
and the first bottleneck: which of Redis's CPU, its memory, or its connections runs out first,
and at how many concurrent runs. The verdict that does not depend on the machine's speed (every
run's records present and exact) fails the bench when wrong.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis import Redis
from redis.asyncio import BlockingConnectionPool
from redis.asyncio import Redis as AsyncRedis

from agent import Progress, Source, SourceAdded, UsageRecorded
from agent.capacity import Demand, ModelLimits
from agent.config import Caps
from agent.context.requestlog import RequestRecord
from agent.results import Locator, StoredResult
from bot.cli.local_redis import LocalRedis
from jobs import Run, RunStore, keys
from jobs.budgets.capacity import RedisModelLimiter
from jobs.control import ownership
from jobs.control.control import BACKSTOP_CHECK_SECONDS, RedisRunControl
from jobs.control.ownership import ALIVE_EVERY_SECONDS, LEASE_SECONDS
from jobs.records.stores import RedisCheckpointStore, RedisRequestLog, RedisResultStore

DEFAULT_RUNS = 1_000
DEFAULT_TURNS = 3
DEFAULT_TURN_SECONDS = 20.0  # a model turn and its tools, end to end, in a real run
DEFAULT_TURNS_PER_RUN = 80  # the standard profile's request budget
# A waiting run hears of a stop by notification (jobs/control/control_listener.py) and reads its stop key only
# as a backstop (jobs.control.control.BACKSTOP_CHECK_SECONDS); its lease is renewed every third of its
# lifetime and records it alive once a minute (jobs.control.ownership).
STOP_CHECK_SECONDS = BACKSTOP_CHECK_SECONDS
RENEW_SECONDS = LEASE_SECONDS / 3
# A turn's events reach Redis in about three bursts (the answer, the tool results, the next
# progress line); the publisher reads the run back once per burst (coalesced to 2 s at most).
PUBLISHER_READS_PER_TURN = 3
READS_PER_TURN = 2
SOURCES_PER_READ = 3
TEAMS = 20  # workspaces the runs belong to
# A Redis primary is one thread: keep it below this share of a core, for latency's sake.
CPU_HEADROOM = 0.7
# What a deployment might give its Redis, and how long the bulky records live (jobs.keys).
MEMORY_BUDGET_BYTES = 8 * 1024**3
MAX_CLIENTS = 10_000  # redis-server's default maxclients
CLIENTS_PER_RUN = 2  # a work-horse's sync and async connections
RUNS_PER_DAY_PER_CONCURRENT = 24 * 60 / 30  # a run lasts ~30 min: each concurrent slot is ~48 runs a day
PAGES = Path(__file__).resolve().parent.parent / "tests" / "pages"

# Record kinds by key shape (jobs/keys.py), for the memory table.
KINDS = (
    ("run state", (":state", ":sections", ":section-order", ":sources", ":source-order", ":steps")),
    ("page texts (results)", (":result:",)),
    ("request log", (":requests:", ":request-parts:")),
    ("checkpoint", (":checkpoint:",)),
    ("lock, heartbeat, control", (":lock", ":alive", ":stop", ":upgrades", ":notes", ":job", ":attempts")),
    ("model limiter", (":capacity:",)),
)


def page_text() -> str:
    """Realistic page text: the tests' saved pages with their tags stripped (compresses like a page)."""
    import re

    texts = [re.sub(r"<[^>]+>", " ", p.read_text(errors="replace")) for p in sorted(PAGES.glob("*.html"))]
    return " ".join(" ".join(t.split()) for t in texts)[:24_000]


@dataclass
class Tally:
    turns: int = 0
    events: int = 0
    polls: int = 0
    published: int = 0
    problems: list[str] = field(default_factory=list)


def kind_of(key: str) -> str:
    for name, marks in KINDS:
        if any(mark in key for mark in marks):
            return name
    return "other"


class SimulatedRun:
    """One run's Redis traffic, through the product's classes."""

    def __init__(self, n: int, sync: Redis, redis: AsyncRedis, store: RunStore, limiter: RedisModelLimiter,
                 text: str, turn_seconds: float, tally: Tally) -> None:
        self.team = f"T{n % TEAMS:03d}"
        self.state = store.create(Run(team=self.team, channel=f"C{n:05d}", thread_ts=f"{n}.0", question="q"))
        self.run_id = self.state.run.id
        self.store, self.redis, self.sync, self.limiter = store, redis, sync, limiter
        self.control = RedisRunControl(redis, self.run_id, Caps())
        self.results = RedisResultStore(redis, self.run_id)
        self.checkpoints = RedisCheckpointStore(redis, self.run_id)
        self.log = RedisRequestLog(redis, self.run_id)
        self.text, self.turn_seconds, self.tally = text, turn_seconds, tally
        self.turn = 0
        self.sources = 0
        self.lease = ownership.acquire(sync, self.run_id, f"bench-{n}")
        self.tenure_seconds = 0.0  # the run's simulated time: when its checks and renewals fall due
        self.checked_at = self.renewed_at = self.alive_at = 0.0

    async def live(self, turns: int) -> None:
        for _ in range(turns):
            await self._take_a_turn()
            for _ in range(PUBLISHER_READS_PER_TURN):
                await asyncio.to_thread(self.store.get, self.run_id)
                self.tally.published += 1
            # What the run does while its turn takes turn_seconds: a backstop stop check now and then,
            # and its lease renewals (the product's own script).
            self.tenure_seconds += self.turn_seconds
            while self.tenure_seconds - self.checked_at >= STOP_CHECK_SECONDS:
                self.checked_at += STOP_CHECK_SECONDS
                await self.control.stop_requested()
                self.tally.polls += 1
            while self.tenure_seconds - self.renewed_at >= RENEW_SECONDS:
                self.renewed_at += RENEW_SECONDS
                alive = self.renewed_at - self.alive_at >= ALIVE_EVERY_SECONDS
                self.alive_at = self.renewed_at if alive else self.alive_at
                assert self.lease is not None
                await ownership.renew(self.redis, self.lease, alive=alive)

    async def _take_a_turn(self) -> None:
        self.turn += 1
        demand = Demand(team=self.team, run=self.run_id, model="m", input_tokens=2_000, output_tokens=1_000)
        while (wait := await self.limiter.try_acquire(demand)) > 0:
            await asyncio.sleep(wait)
        body = {"model": "m", "system": "system prompt " * 200, "tools": [{"name": "web_search"}],
                "messages": [{"role": "user", "content": f"turn {t}: " + self.text[:2_000]} for t in range(self.turn)]}
        await self.log.record(RequestRecord(n=self.turn, kind="turn", model="m", input_tokens=2_000,
                                            output_tokens=400, seconds=12.0), body)
        for read in range(READS_PER_TURN):
            result_id = f"r_{self.turn:03d}{read}"
            await self.results.put(StoredResult(
                id=result_id, kind="read_page", arguments={"url": f"https://example.com/{self.turn}/{read}"},
                text=self.text, locator=Locator(what="page", start=0, end=len(self.text), total=len(self.text))))
            for _ in range(SOURCES_PER_READ):
                self.sources += 1
                self._apply(SourceAdded(source=Source(
                    marker=f"s{self.sources}", url=f"https://example.com/{self.turn}/{read}", title="A fund page",
                    passage=self.text[self.sources * 50 : self.sources * 50 + 240], kind="excerpt")))
        self._apply(Progress(phase="researching", activity=f"Reading page {self.turn} for the expense ratio"))
        self._apply(UsageRecorded(requests=self.turn, input_tokens=2_000 * self.turn, output_tokens=400 * self.turn,
                                  profile="standard", requests_left=80 - self.turn, minutes_left=60.0))
        await self.checkpoints.save({"notes": [], "turn": self.turn}, {self.turn: {"assistant": "x" * 600}})
        self.tally.turns += 1

    def _apply(self, event: Any) -> None:
        self.state = self.store.apply(self.state, event)
        self.tally.events += 1


def pool(url: str, size: int) -> BlockingConnectionPool:
    """Waits for a free connection (the default pool refuses past its size), patient with a
    loaded machine: the bench measures Redis's work, not how fast it accepts connections."""
    return BlockingConnectionPool.from_url(url, max_connections=size, timeout=120, socket_connect_timeout=60,
                                           socket_timeout=120)


async def publisher(url: str, done: asyncio.Event) -> None:
    """Follows the updates stream as serve's publisher does (its reads of runs are the runs' own)."""
    redis = AsyncRedis(connection_pool=pool(url, 1))
    last_id = "$"
    while not done.is_set():
        answer = await redis.xread({keys.UPDATES_STREAM: last_id}, block=250, count=500)
        for _stream, entries in answer or []:
            last_id = entries[-1][0]
    await redis.aclose()


def redis_cpu(sync: Redis) -> float:
    info = sync.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def commands(sync: Redis) -> int:
    return int(sync.info("stats")["total_commands_processed"])


def command_usec(sync: Redis) -> Counter[str]:
    """Redis's own time inside each command (INFO commandstats), scripts' calls under their names."""
    stats = sync.info("commandstats")
    return Counter({name.removeprefix("cmdstat_"): int(stat["usec"]) for name, stat in stats.items()})


async def baseline(url: str, count: int, concurrency: int) -> None:
    """The same number of plain GETs, from the same kind of client and concurrency."""
    redis = AsyncRedis(connection_pool=pool(url, concurrency))
    per_task = max(1, count // concurrency)

    async def one() -> None:
        for _ in range(per_task):
            await redis.get("deepthread:bench:nothing")

    await asyncio.gather(*(one() for _ in range(concurrency)))
    await redis.aclose()


def memory_by_kind(sync: Redis) -> Counter[str]:
    usage: Counter[str] = Counter()
    for key in sync.scan_iter(match="deepthread:*", count=1000):
        name = key.decode()
        usage[kind_of(name)] += int(sync.memory_usage(name, samples=0) or 0)
    return usage


async def simulate(url: str, runs: int, turns: int, turn_seconds: float) -> tuple[Tally, list[SimulatedRun]]:
    sync = Redis.from_url(url)
    # Waits for a free connection (the default pool refuses past its size): like a worker's clients.
    redis = AsyncRedis(connection_pool=pool(url, 64))
    store = RunStore(sync)
    limiter = RedisModelLimiter(redis, ModelLimits(requests=10**6, input_tokens=10**10, output_tokens=10**10))
    tally = Tally()
    text = page_text()
    simulated = [SimulatedRun(n, sync, redis, store, limiter, text, turn_seconds, tally) for n in range(runs)]
    done = asyncio.Event()
    following = asyncio.create_task(publisher(url, done))
    await asyncio.gather(*(run.live(turns) for run in simulated))
    done.set()
    await following
    await redis.aclose()
    return tally, simulated


def check(sync: Redis, simulated: list[SimulatedRun]) -> list[str]:
    """Exact, machine-independent: every run's state has every source it added and its last usage."""
    store = RunStore(sync)
    problems = []
    for run in simulated:
        state = store.get(run.run_id)
        if len(state.sources) != run.sources:
            problems.append(f"run {run.run_id}: {len(state.sources)} sources stored, {run.sources} added")
        if run.turn and state.usage.requests != run.turn:
            problems.append(f"run {run.run_id}: usage says {state.usage.requests} requests, {run.turn} made")
    return problems[:5]


def run(runs: int, turns: int, turn_seconds: float, turns_per_run: int,
        retention_days: float = keys.STORED_RESULT_TTL_SECONDS / 86_400) -> list[str]:
    with LocalRedis() as local:
        sync = Redis.from_url(local.url)
        cpu0, cmd0, t0, usec0 = redis_cpu(sync), commands(sync), time.monotonic(), command_usec(sync)
        tally, simulated = asyncio.run(simulate(local.url, runs, turns, turn_seconds))
        elapsed = time.monotonic() - t0
        cpu, cmds = redis_cpu(sync) - cpu0, commands(sync) - cmd0
        inside = command_usec(sync) - usec0
        cpu1, cmd1 = redis_cpu(sync), commands(sync)
        asyncio.run(baseline(local.url, cmds, 64))
        base_cpu, base_cmds = redis_cpu(sync) - cpu1, commands(sync) - cmd1
        memory = memory_by_kind(sync)
        info = sync.info("memory")
        problems = check(sync, simulated)
        sync.close()

    played = max(1, tally.turns)
    # At the real pace each turn takes turn_seconds: the commands (and Redis CPU) a run needs a second.
    per_run_second = cmds / (played * turn_seconds)
    ops_per_second = per_run_second * runs
    us_per_cmd = cpu / cmds * 1e6
    core_share = ops_per_second * us_per_cmd / 1e6
    base_us = base_cpu / max(1, base_cmds) * 1e6
    per_run_turn = {kind: bytes_ / played for kind, bytes_ in memory.items()}
    whole_run = {kind: per_turn * turns_per_run for kind, per_turn in per_run_turn.items()}
    run_bytes = sum(whole_run.values())
    cpu_runs = runs * CPU_HEADROOM / core_share if core_share else float("inf")
    in_flight_runs = MEMORY_BUDGET_BYTES / run_bytes if run_bytes else float("inf")
    client_runs = MAX_CLIENTS / CLIENTS_PER_RUN
    limits = sorted([("Redis CPU", cpu_runs), ("Redis memory, runs in flight", in_flight_runs),
                     ("Redis connections", client_runs)], key=lambda item: item[1])
    # Records outlive their run (DEEPTHREAD_BULKY_RETENTION_DAYS; run state 90 days): finished runs
    # the same memory keeps, per day of retention.
    finished_per_retention_day = MEMORY_BUDGET_BYTES / run_bytes / retention_days if run_bytes else float("inf")

    print(f"\ncapacity — {runs:,} concurrent runs against one redis-server, replayed in {elapsed:.0f} s "
          f"({tally.turns:,} turns, {tally.events:,} state events, {tally.polls:,} backstop stop checks, "
          f"{tally.published:,} publisher reads, {cmds:,} commands)")
    print(f"  at the real pace (a turn every {turn_seconds:.0f} s):")
    print(f"  Redis commands           {ops_per_second:>10,.0f} /s   ({per_run_second:.2f} per run per second)")
    print(f"  Redis CPU                {core_share:>10.1%} of one core   ({us_per_cmd:.1f} µs per command, all in; "
          f"plain GET baseline {base_us:.1f} µs: ×{us_per_cmd / base_us:.2f})")
    busiest = ", ".join(f"{name} {usec / max(1, sum(inside.values())):.0%}" for name, usec in inside.most_common(5))
    print(f"  time inside commands     {busiest}")
    print(f"  Redis memory used        {int(info['used_memory']) / 1e6:>10,.1f} MB")
    print(f"  memory per run, by kind of record ({turns_per_run} turns a run):")
    for kind, _ in [*KINDS, ("other", ())]:
        if kind in whole_run:
            print(f"    {kind:<28} {per_run_turn[kind]:>9,.0f} B a turn  {whole_run[kind] / 1e6:>8.2f} MB a run")
    print(f"    {'all':<28} {sum(per_run_turn.values()):>9,.0f} B a turn  {run_bytes / 1e6:>8.2f} MB a run")
    print("  concurrent runs one Redis carries, by what runs out:")
    for name, count in limits:
        print(f"    {name:<40} {count:>10,.0f}")
    print(f"  first bottleneck: {limits[0][0]} at ~{limits[0][1]:,.0f} concurrent runs "
          f"(CPU kept under {CPU_HEADROOM:.0%} of a core; {MEMORY_BUDGET_BYTES / 1024**3:.0f} GB for records)")
    print(f"  records kept after their run: {MEMORY_BUDGET_BYTES / 1024**3:.0f} GB hold "
          f"{finished_per_retention_day:,.0f} finished runs a day at {retention_days:g} days' retention "
          f"(~{finished_per_retention_day / RUNS_PER_DAY_PER_CONCURRENT:,.0f} runs kept busy around the clock)")
    median_sources = statistics.median(r.sources for r in simulated) if simulated else 0
    print(f"  runs checked: {len(simulated):,} (median {median_sources:.0f} sources each, every one stored)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.capacity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="concurrent runs (default %(default)s)")
    parser.add_argument("--turns", type=int, default=DEFAULT_TURNS, help="turns each run plays (default %(default)s)")
    parser.add_argument("--turn-seconds", type=float, default=DEFAULT_TURN_SECONDS,
                        help="seconds between a run's turns (default %(default)s)")
    parser.add_argument("--retention-days", type=float, default=keys.STORED_RESULT_TTL_SECONDS / 86_400,
                        help="how long finished runs' records are kept (default %(default)s)")
    parser.add_argument("--turns-per-run", type=int, default=DEFAULT_TURNS_PER_RUN,
                        help="turns in a whole run, for memory per run (default %(default)s)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.turns < 1 or args.turn_seconds <= 0 or args.turns_per_run < 1 or args.retention_days <= 0:
        parser.error("--runs, --turns, --turn-seconds, --turns-per-run and --retention-days must be positive")
    failures = run(args.runs, args.turns, args.turn_seconds, args.turns_per_run, args.retention_days)
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
