"""The offload pool (agent/offload.py) shared fairly by run: in a worker carrying many runs, one run that
sent many big pages to the pool no longer holds another run's page behind them (first come, first
served held one for 370 s): that page starts when the first process comes free. A real process pool;
each piece of work notes in a file when it started and ended in its process."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent import offload
from agent.converter.fair_queue import RUN_OF_CONVERSION, ConversionAccount

WORKERS = 2
SECONDS = 0.4  # each piece of the busy run's work: long enough that its queue is seen


def work(seconds: float, log: str, tag: str) -> str:
    """In a pool process: hold it `seconds`, noting when (the system's monotonic clock, as the parent's)."""
    with open(log, "a") as out:
        out.write(f"started {tag} {time.monotonic()}\n")
    time.sleep(seconds)
    with open(log, "a") as out:
        out.write(f"ended {tag} {time.monotonic()}\n")
    return tag


def noted(log: Path, what: str) -> dict[str, float]:
    """When each piece of work `what` (started, ended), by its tag."""
    lines = log.read_text().splitlines() if log.exists() else []
    return {tag: float(at) for kind, tag, at in (line.split() for line in lines) if kind == what}


async def until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, "the pool did not start the work"
        await asyncio.sleep(0.02)


@pytest.fixture
def pool() -> Iterator[None]:
    offload.use_processes(workers=WORKERS)
    yield
    offload.use_threads()


async def as_run(run: str, seconds: float, log: Path, tag: str) -> str:
    RUN_OF_CONVERSION.set(ConversionAccount(run))  # as agent/run.py does for each research
    return await offload.cpu(work, seconds, str(log), tag)


async def test_another_runs_page_starts_at_the_first_free_process_while_one_run_has_ten_queued(
        pool: None, tmp_path: Path) -> None:
    log = tmp_path / "log"
    busy = [asyncio.create_task(as_run("busy", SECONDS, log, f"busy-{i}")) for i in range(10)]
    await until(lambda: len(noted(log, "started")) == WORKERS)  # the busy run fills the pool, eight wait
    assert await as_run("other", 0.01, log, "other") == "other"
    await asyncio.gather(*busy)

    started = noted(log, "started")
    before = sorted(tag for tag, at in started.items() if tag != "other" and at < started["other"])
    assert len(before) <= WORKERS, f"the busy run's queued work went first: {before}"
    ended = noted(log, "ended")
    assert started["other"] >= min(ended.values()) - 0.05, "it took a process as one came free, not a third one"
    assert len(started) - 1 - len(before) >= 5, "the busy run still had most of its queue left behind it"

