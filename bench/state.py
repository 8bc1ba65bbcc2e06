"""What one run-state event costs at the start of a long run and at its end.

    .venv/bin/python -m bench.state [--sources N] [--window W]

Applies the event stream of a research run that gathers N sources (default 2,000: a source,
progress and usage every step, a section every 200 sources, a revision every 400, then the
end) to run state in a private redis-server, twice: through `jobs.RunStore` (incremental:
each event writes only what it changed) and through the whole-rewrite store this replaced
(every event re-serializes and rewrites the whole run), the baseline in the same run.
For the first and the last W events (interleaved, so both see the same machine load) it
prints the median time per event, the bytes the server received per event (redis INFO
total_net_input_bytes), and the end/start ratios.
Incremental storage passes when both of its ratios are at most 1.2.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from redis import Redis

from agent import (
    Finished,
    Progress,
    RunEvent,
    SectionRevised,
    SectionWritten,
    Source,
    SourceAdded,
    UsageRecorded,
)
from bot.cli.local_redis import LocalRedis
from jobs import Run, RunState, RunStore, keys
from jobs.records.state import apply_event

DEFAULT_SOURCES = 2_000
DEFAULT_WINDOW = 300
SECTION_EVERY = 200  # sources between two sections
REVISION_EVERY = 400  # sources between two revisions
PASSAGE_WORDS = 40  # a search snippet's length, roughly
# The pass mark: the last events may cost at most this much more than the first.
MAX_END_START_RATIO = 1.2
RUN_TTL_SECONDS = 90 * 24 * 3600


def event_stream(sources: int) -> Iterator[RunEvent]:
    """A long run's events, in the order the worker emits them."""
    for n in range(1, sources + 1):
        yield Progress(phase="researching", activity=f"Reading page {n} for the 2024 expense ratio")
        yield SourceAdded(source=Source(marker=f"s{n}", url=f"https://example.com/funds/{n}", title=f"Fund page {n}",
                                        passage=" ".join(["expense ratio 0.03% as of 2024"] * (PASSAGE_WORDS // 6)),
                                        kind="snippet"))
        yield UsageRecorded(requests=n, input_tokens=1_000 * n, output_tokens=100 * n, profile="standard",
                            requests_left=10_000 - n, minutes_left=60.0)
        if n % SECTION_EVERY == 0:
            cites = " ".join(f"[s{m}]" for m in range(n - 5, n + 1))
            yield SectionWritten(section_id=f"sec{n // SECTION_EVERY}", title=f"Part {n // SECTION_EVERY}",
                                 body=f"Fees and tracking as of 2024 {cites}. " * 5)
        if n % REVISION_EVERY == 0:
            yield SectionRevised(section_id=f"sec{n // SECTION_EVERY}", body=f"Corrected figures [s{n}]. " * 5,
                                 reason="a newer fact sheet")
    yield Finished(status="completed", summary="All three charge 0.03% [s1].", reason="")


class WholeRewriteStore:
    """The baseline: run state as one JSON value, rewritten whole on every event (before issue 11)."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    def create(self, run: Run) -> RunState:
        state = RunState(run=run)
        self.redis.set(keys.run(run.id), state.model_dump_json(), ex=RUN_TTL_SECONDS)
        return state

    def apply(self, state: RunState, event: RunEvent) -> RunState:
        state = apply_event(state, event)
        pipe = self.redis.pipeline()
        pipe.set(keys.run(state.run.id), state.model_dump_json(), ex=RUN_TTL_SECONDS)
        if state.status.finished:
            pipe.srem(keys.ACTIVE_RUNS, state.run.id)
        pipe.xadd(keys.UPDATES_STREAM, {"run_id": state.run.id, "version": state.version},
                  maxlen=keys.UPDATES_MAXLEN, approximate=True)
        pipe.execute()
        return state


@dataclass
class Window:
    seconds: list[float]
    bytes_in: int

    @property
    def median_us(self) -> float:
        return statistics.median(self.seconds) * 1e6

    @property
    def bytes_per_event(self) -> float:
        return self.bytes_in / len(self.seconds)


@dataclass
class Figures:
    start: Window
    end: Window
    total_bytes: int
    total_seconds: float

    def time_ratio(self) -> float:
        return self.end.median_us / self.start.median_us

    def bytes_ratio(self) -> float:
        return self.end.bytes_per_event / self.start.bytes_per_event


def bytes_received(redis: Redis) -> int:
    return int(redis.info("stats")["total_net_input_bytes"])


def measure(redis: Redis, create: Callable[[Run], RunState], apply: Callable[[RunState, RunEvent], RunState],
            events: list[RunEvent], window: int) -> Figures:
    """Apply the whole stream to one run; then time its last `window` events interleaved with
    the first `window` applied to a fresh run, so both windows see the same machine load."""
    def new_run() -> RunState:
        return create(Run(question="fees and tracking error of VTI, ITOT and SCHB", channel="C0BENCH",
                          thread_ts="1.0"))

    overhead = -bytes_received(redis) + bytes_received(redis)  # what one INFO command adds to the count
    start, end = Window([], 0), Window([], 0)

    def timed(state: RunState, event: RunEvent, into: Window) -> RunState:
        before = bytes_received(redis)
        t0 = time.perf_counter()
        state = apply(state, event)
        into.seconds.append(time.perf_counter() - t0)
        into.bytes_in += bytes_received(redis) - before - overhead
        return state

    long_run = new_run()
    total_before = bytes_received(redis)
    began = time.perf_counter()
    for event in events[:-window]:
        long_run = apply(long_run, event)
    building = time.perf_counter() - began
    built_bytes = bytes_received(redis) - total_before - overhead
    fresh = new_run()
    for k, (first, last) in enumerate(zip(events[:window], events[-window:], strict=True)):
        if k % 2:  # alternate which goes first, so neither window always follows the other
            long_run = timed(long_run, last, end)
            fresh = timed(fresh, first, start)
        else:
            fresh = timed(fresh, first, start)
            long_run = timed(long_run, last, end)
    return Figures(start=start, end=end, total_bytes=built_bytes + end.bytes_in,
                   total_seconds=building + sum(end.seconds))


def row(name: str, figures: Figures) -> list[str]:
    return [
        (f"  {name:<26} time  {figures.start.median_us:>9.0f} µs {figures.end.median_us:>11.0f} µs "
         f"{figures.time_ratio():>9.2f}x"),
        (f"  {'':<26} bytes {figures.start.bytes_per_event:>9,.0f}    {figures.end.bytes_per_event:>11,.0f}    "
         f"{figures.bytes_ratio():>9.2f}x"),
    ]


def measure_both(sources: int, window: int, *, baseline: bool = True) -> tuple[Figures, Figures | None]:
    """(incremental, whole rewrite) for a run of `sources`, in a private redis-server (the
    baseline left out, None, when only the incremental store's verdict is wanted)."""
    events = list(event_stream(sources))
    if len(events) < 2 * window:
        raise SystemExit(f"--window {window} is too large for {len(events)} events: use at most {len(events) // 2}")
    with LocalRedis() as local:
        redis = Redis.from_url(local.url)
        store = RunStore(redis)
        ours = measure(redis, store.create, store.apply, events, window)
        whole = WholeRewriteStore(redis)
        rewrite = measure(redis, whole.create, whole.apply, events, window) if baseline else None
        redis.close()
    return ours, rewrite


def byte_failures(ours: Figures) -> list[str]:
    """The verdict that does not depend on timing (CI runs it, tests/bench/test_verdicts.py)."""
    if ours.bytes_ratio() > MAX_END_START_RATIO:
        return [f"incremental bytes per event grew {ours.bytes_ratio():.2f}x (at most {MAX_END_START_RATIO})"]
    return []


def run(sources: int, window: int) -> list[str]:
    events = sum(1 for _ in event_stream(sources))
    ours, baseline = measure_both(sources, window)
    assert baseline is not None
    print(f"\nrun state — the event stream of a {sources:,}-source run ({events:,} events), "
          f"median per event over the first and the last {window}")
    print(f"  {'':<26}       {'start':>12} {'end':>14} {'end/start':>10}")
    for line in row("incremental (RunStore)", ours) + row("whole rewrite (baseline)", baseline):
        print(line)
    print(f"  whole run: incremental {ours.total_bytes / 1e6:,.1f} MB in {ours.total_seconds:.1f} s; "
          f"whole rewrite {baseline.total_bytes / 1e6:,.1f} MB in {baseline.total_seconds:.1f} s "
          f"({baseline.total_bytes / ours.total_bytes:,.0f}x the bytes)")
    print(f"  at the end, one event: whole rewrite / incremental = "
          f"{baseline.end.median_us / ours.end.median_us:,.0f}x the time, "
          f"{baseline.end.bytes_per_event / ours.end.bytes_per_event:,.0f}x the bytes")
    failures = []
    if ours.time_ratio() > MAX_END_START_RATIO:
        failures.append(f"incremental time per event grew {ours.time_ratio():.2f}x (at most {MAX_END_START_RATIO})")
    return failures + byte_failures(ours)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=int, default=DEFAULT_SOURCES, help="sources the run gathers (default %(default)s)")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                        help="events measured at the start and at the end (default %(default)s)")
    args = parser.parse_args(argv)
    if args.sources < 1 or args.window < 1:
        parser.error("--sources and --window must be at least 1")
    failures = run(args.sources, args.window)
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
