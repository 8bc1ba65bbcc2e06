"""Hostile files through the converter, each against an ordinary file of the same kind and size.

`python -m bench.files` generates every hostile file of tests/fakes/hostile_files.py (a zip bomb in a
DOCX and in an XLSX, a sheet written in its last column, PDF pages sharing one content stream, a CSV
of empty rows, a CSV 100,000 columns wide, lying zip headers, malformed XML) and an ordinary file of
the same size, converts each pair through `agent.converter.convert` (one child process per file,
under the OS limits), and prints, per pair: the time, the child's peak resident memory, and what came
back (read, with its note, or refused, with why), then the ratio hostile ÷ ordinary. The bench's own
resident memory is printed before and after: a conversion adds nothing to the worker's process.
Figures, not a pass/fail; the limits they show are held by tests/agent/converter/test_converter.py.
"""
from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass

from agent.converter import ConversionRefused, convert, last_stats
from tests.fakes.hostile_files import HOSTILE, Hostile

MB = 1024 * 1024


@dataclass
class Measured:
    seconds: float
    peak_bytes: int
    outcome: str


def _rss() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


async def _measure(kind: str, data: bytes) -> Measured:
    last_stats.peak_rss_bytes = 0
    started = time.perf_counter()
    try:
        text = await convert(kind, data)
        outcome = f"read {len(text.text):,} chars" + (f" ({text.note})" if text.note else "")
    except ConversionRefused as exc:
        outcome = f"refused: {exc}"
    return Measured(time.perf_counter() - started, last_stats.peak_rss_bytes, outcome)


def _row(name: str, size: int, m: Measured) -> str:
    peak = f"{m.peak_bytes / MB:7.0f} MB" if m.peak_bytes else "  killed  "
    return f"{name:<24} {size / 1024:>9,.0f} KB {m.seconds:7.2f} s {peak}  {m.outcome[:110]}"


async def main(only: str | None) -> None:
    specs: list[Hostile] = [s for s in HOSTILE if only is None or only in s.name]
    print(f"bench process RSS before: {_rss() / MB:.0f} MB")
    print(f"{'file':<24} {'size':>12} {'time':>9} {'child peak':>10}  outcome")
    ratios = []
    for spec in specs:
        kind = spec.name.rsplit(".", 1)[1]
        hostile = spec.build()
        ordinary = spec.ordinary(len(hostile))
        h = await _measure(kind, hostile)
        o = await _measure(kind, ordinary)
        print(_row(f"{spec.name} (hostile)", len(hostile), h))
        print(_row(f"{spec.name} (ordinary)", len(ordinary), o))
        ratios.append((spec.name, h.seconds / o.seconds, (h.peak_bytes or 0) / max(o.peak_bytes, 1)))
    print()
    print(f"{'file':<24} {'time ×':>8} {'peak ×':>8}   (hostile ÷ ordinary)")
    for name, seconds, peak in ratios:
        print(f"{name:<24} {seconds:8.2f} {peak:8.2f}")
    print(f"bench process RSS after: {_rss() / MB:.0f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="only the hostile files whose name contains this")
    asyncio.run(main(parser.parse_args().only))
