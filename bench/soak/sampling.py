"""What the soak watches while it runs: every live process's memory (its tree's PSS) every few
seconds, and its metrics endpoint every few more (the last scrape of each life is kept: a killed
process's figures end with its last scrape)."""
from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from .topology import Fleet, Life

MEMORY_EVERY_SECONDS = 5.0
METRICS_EVERY_SECONDS = 10.0
_BUCKET = re.compile(r'deepthread_event_loop_lag_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)')


@dataclass
class Sample:
    at: float  # monotonic
    kb: int
    active_runs: int


# What an operator would watch: each summed over its labels, per process, at every scrape.
WATCHED = (
    "deepthread_model_requests_total",
    "deepthread_model_rate_limited_total",
    "deepthread_slack_calls_total",
    "deepthread_slack_rate_limited_total",
    "deepthread_publisher_lag_seconds_sum",
    "deepthread_publisher_lag_seconds_count",
    "deepthread_locks_lost_total",
    "deepthread_runs_requeued_total",
    "deepthread_runs_resumed_total",
    "deepthread_model_capacity_wait_seconds_sum",
)


@dataclass
class Samples:
    memory: dict[int, list[Sample]] = field(default_factory=dict)  # id(life) -> samples
    metrics: dict[int, str] = field(default_factory=dict)  # id(life) -> its last /metrics text
    history: dict[int, list[tuple[float, dict[str, float]]]] = field(default_factory=dict)  # id(life) -> scrapes


def watched(text: str) -> dict[str, float]:
    """WATCHED's totals in one scrape (every label set summed)."""
    totals = dict.fromkeys(WATCHED, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in totals:
            try:
                totals[name] += float(line.rsplit(" ", 1)[1])
            except ValueError:
                pass
    return totals


def moved(samples: Samples, start: float, end: float) -> dict[str, float]:
    """How much each watched figure grew between `start` and `end`, summed over every process
    (a process's growth: its last scrape by `end` less its last scrape by `start`, or zero)."""
    grown = dict.fromkeys(WATCHED, 0.0)
    for scrapes in samples.history.values():
        before = [v for t, v in scrapes if t <= start]
        until = [v for t, v in scrapes if t <= end]
        if not until:
            continue
        base = before[-1] if before else dict.fromkeys(WATCHED, 0.0)
        for name in WATCHED:
            grown[name] += max(0.0, until[-1][name] - base[name])
    return grown


def lag_buckets(text: str) -> dict[float, float]:
    """deepthread_event_loop_lag_seconds' cumulative buckets (upper bound → count) in one scrape."""
    return {math.inf if le == "+Inf" else float(le): float(n) for le, n in _BUCKET.findall(text)}


def p99_of(buckets: dict[float, float]) -> float:
    """The p99 of a cumulative histogram: the upper bound of the bucket it falls in (NaN: no samples)."""
    ordered = sorted(buckets.items())
    total = ordered[-1][1] if ordered else 0.0
    for bound, count in ordered:
        if total and count >= 0.99 * total:
            return bound
    return math.nan


class Sampler:
    def __init__(self, fleet: Fleet, active_runs: Callable[[], int]) -> None:
        self.fleet = fleet
        self.active_runs = active_runs
        self.samples = Samples()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.scrape()  # the last figures of every process still running

    def scrape(self) -> None:
        for life in self.fleet.live():
            try:
                text = httpx.get(life.metrics_url, timeout=5).text
            except httpx.HTTPError:
                continue
            self.samples.metrics[id(life)] = text
            self.samples.history.setdefault(id(life), []).append((time.monotonic(), watched(text)))

    def _sample(self, life: Life, active: int) -> None:
        kb = life.memory_kb()
        if kb:
            self.samples.memory.setdefault(id(life), []).append(Sample(time.monotonic(), kb, active))

    def _loop(self) -> None:
        last_scrape = 0.0
        while not self._stop.wait(MEMORY_EVERY_SECONDS):
            active = self.active_runs()
            for life in self.fleet.live():
                self._sample(life, active)
            if time.monotonic() - last_scrape >= METRICS_EVERY_SECONDS:
                self.scrape()
                last_scrape = time.monotonic()
