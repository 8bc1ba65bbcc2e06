"""Event-loop lag during a long research run with heavy page extraction going on.

    .venv/bin/python -m bench.loop_lag [--turns 1000]

A 1,000-turn scripted run (bulk tools, context management on) runs twice in one process:
once while multi-megabyte HTML pages are extracted back to back in the background (the
production path: trafilatura off the loop, in a thread), once without. A probe task
sleeps 5 ms at a time and records how late it wakes: that lateness is what a heartbeat,
a stop check or a Slack ack would wait.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path

from anthropic import AsyncAnthropic

from agent import AgentConfig, Budget, ResearchTask, research
from agent.tools.extract import extract_text
from agent.tools.fetch import Fetched
from agent.tools.links import LinkTable
from tests.fakes.bulk import bulk_tools

from .fake_model import fake_model_process

PROBE_SECONDS = 0.005
SHARED_PAGE = Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures" / "pages" / "cnn.com.trump-health.html"


def big_page(megabytes: float = 3.0) -> bytes:
    """A real 1.5 MB page when ../shared is present (doubled), else a generated article."""
    if SHARED_PAGE.exists():
        html = SHARED_PAGE.read_bytes()
        return html + html[html.find(b"<body"):] if len(html) < megabytes * 1_000_000 else html
    paragraph = b"<p>Index funds charge fees measured in basis points; VTI charges 0.03% a year.</p>"
    return b"<html><body><article>" + paragraph * int(megabytes * 1_000_000 / len(paragraph)) + b"</article></body></html>"


async def probe(lags: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(PROBE_SECONDS)
        lags.append(max(0.0, time.perf_counter() - started - PROBE_SECONDS))


async def extract_forever(page: bytes, stop: asyncio.Event, counter: list[int]) -> None:
    fetched = Fetched(url="https://example.org/big", status=200, content_type="text/html", charset=None,
                      body=page, truncated=False)
    while not stop.is_set():
        await extract_text(fetched, LinkTable())
        counter[0] += 1


async def one_run(turns: int, heavy: bool) -> tuple[list[float], int, float]:
    lags: list[float] = []
    extracted = [0]
    stop = asyncio.Event()

    async def emit(_: object) -> None:
        return None

    # The fake model runs in its own process: its bookkeeping must not share our GIL or heap.
    with fake_model_process(turns) as model_url:
        prober = asyncio.create_task(probe(lags, stop))
        extractor = asyncio.create_task(extract_forever(big_page(), stop, extracted)) if heavy else None
        started = time.perf_counter()
        async with AsyncAnthropic(api_key="bench", base_url=model_url) as client:
            await research(ResearchTask(question="VTI vs ITOT", budget=Budget(max_requests=turns * 2)),
                           AgentConfig(context_tokens=100_000), anthropic=client, emit=emit, tools=bulk_tools())
        elapsed = time.perf_counter() - started
        stop.set()
        await asyncio.gather(prober, *([extractor] if extractor else []))
    return lags, extracted[0], elapsed


def figures(lags: list[float]) -> tuple[float, float, float]:
    ordered = sorted(lags)
    p99 = ordered[int(len(ordered) * 0.99) - 1] if ordered else 0.0
    return statistics.median(ordered) * 1000, p99 * 1000, ordered[-1] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    args = parser.parse_args()
    gc.freeze()  # as the worker does before a job (jobs/workers/executor.py)
    base_lags, _, base_seconds = asyncio.run(one_run(args.turns, heavy=False))
    heavy_lags, pages, heavy_seconds = asyncio.run(one_run(args.turns, heavy=True))
    b_med, b_p99, b_max = figures(base_lags)
    h_med, h_p99, h_max = figures(heavy_lags)
    source = "real CNN page" if SHARED_PAGE.exists() else "generated page (../shared absent)"
    print(f"\nloop lag — {args.turns} scripted turns; probe sleeps {PROBE_SECONDS * 1000:.0f} ms at a time\n")
    print(f"  {'':<34} {'median':>8} {'p99':>8} {'max':>8}")
    print(f"  {'no extraction':<34} {b_med:>6.2f}ms {b_p99:>6.2f}ms {b_max:>6.1f}ms   ({base_seconds:.1f} s)")
    print(f"  {f'extracting ~3 MB pages ({pages} done)':<34} {h_med:>6.2f}ms {h_p99:>6.2f}ms {h_max:>6.1f}ms   "
          f"({heavy_seconds:.1f} s, {source})")
    print(f"\n  p99 lag with extraction / without: {h_p99 / b_p99 if b_p99 else float('inf'):.2f}x\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
