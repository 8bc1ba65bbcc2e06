"""A 40-section report as a file: how long each format takes and how big it is.

    .venv/bin/python -m bench.export [--sections 40] [--repeat 3]

The report is made from the text of real saved web pages (tests/pages, and ../shared/fixtures/pages
when it is there, in 15 languages): 40 sections of 250-350 words with Markdown emphasis, lists and
footnotes, a summary, 120 sources with passages. Each format is written through the real
`export_file` (the document, then Markdown, ReportLab or python-docx) `--repeat` times in this process
after a first, cold, write (ReportLab's and python-docx's import and font loading, timed apart);
printed: the cold write, the median warm write, the size, and each against the Markdown file (the
baseline). Each file is opened again (pypdf, python-docx) to check it holds the title and every source URL.
Goal: under 2 s and under 2 MB for every format (exit 1 when missed). The time judged is the CPU time
of this one process (a write is single-threaded): on a shared, loaded machine the wall time also
counts the waits for a core, and is printed beside it.
"""

from __future__ import annotations

import argparse
import io
import random
import re
import statistics
import sys
import time
from datetime import UTC, datetime

from agent import Section, Source
from bench.library import page_words
from bot.publishing.export import export_file
from jobs import Run, RunState, RunStatus

GOAL_SECONDS = 2.0
GOAL_BYTES = 2_000_000
SOURCES = 120


def report(sections: int, seed: int = 5) -> RunState:
    rng = random.Random(seed)
    pages = page_words()

    def span(size: int) -> str:
        words = rng.choice(pages)
        start = rng.randrange(0, max(1, len(words) - size))
        return " ".join(words[start : start + size])

    sources = {
        f"s{i}": Source(
            marker=f"s{i}",
            url=f"https://source{i}.example.org/reports/{i}/fact-sheet?year=2026",
            title=span(7),
            passage=span(30),
        )
        for i in range(1, SOURCES + 1)
    }
    body = []
    for n in range(sections):
        cite = " ".join(f"[s{rng.randint(1, SOURCES)}]" for _ in range(3))
        text = (
            f"{span(120)} **{span(4)}** {span(60)} {cite}\n\n- {span(20)} [s{rng.randint(1, SOURCES)}]\n"
            f"- *{span(12)}*\n\n{span(rng.randint(80, 160))} [s{rng.randint(1, SOURCES)}]"
        )
        body.append(Section(section_id=f"sec{n + 1}", title=span(5), body=text))
    run = Run(team="T0BENCH", channel="C0BENCH", thread_ts="1.1", requester="U0ANA", question=span(14))
    return RunState(
        run=run,
        status=RunStatus.completed,
        sections=body,
        sources=sources,
        summary=f"{span(80)} [s1] [s2]",
        finished_at=datetime(2026, 11, 12, tzinfo=UTC),
    )


def check(fmt: str, content: bytes, state: RunState) -> list[str]:
    """The title and every cited source's URL are in the file, read back as a reader's tool reads it."""
    if fmt == "pdf":
        from pypdf import PdfReader

        text = "".join(page.extract_text() for page in PdfReader(io.BytesIO(content)).pages)
    elif fmt == "docx":
        from docx import Document

        document = Document(io.BytesIO(content))
        text = "\n".join(p.text for p in document.paragraphs)
    else:
        text = content.decode()
    flat = "".join(text.split())
    cited = {m for s in state.sections for m in re.findall(r"\[(s\d+)\]", s.body)} | {"s1", "s2"}
    missing = [state.sources[m].url for m in cited if state.sources[m].url not in flat]
    problems = [f"{fmt}: {len(missing)} cited source URLs missing"] if missing else []
    if "".join(state.run.question.split()) not in flat:
        problems.append(f"{fmt}: the title is missing")
    return problems


def run(sections: int, repeat: int) -> list[str]:
    state = report(sections)
    print(f"a report of {len(state.sections)} sections, {len(state.sources)} sources")
    failures: list[str] = []
    results = {}
    for fmt in ("md", "pdf", "docx"):
        started, cpu = time.perf_counter(), time.process_time()
        first = export_file(state, fmt)  # type: ignore[arg-type]
        cold, cold_cpu = time.perf_counter() - started, time.process_time() - cpu
        warm, warm_cpu = [], []
        for _ in range(repeat):
            started, cpu = time.perf_counter(), time.process_time()
            export_file(state, fmt)  # type: ignore[arg-type]
            warm.append(time.perf_counter() - started)
            warm_cpu.append(time.process_time() - cpu)
        results[fmt] = (cold, statistics.median(warm), len(first.content), cold_cpu, statistics.median(warm_cpu))
        failures += check(fmt, first.content, state)
    base_seconds, base_bytes = results["md"][4], results["md"][2]
    for fmt, (cold, warm, size, cold_cpu, warm_cpu) in results.items():
        print(
            f"{fmt:>4}: first {cold:.2f} s wall, {cold_cpu:.2f} s CPU (imports and fonts), then {warm:.2f} s wall, "
            f"{warm_cpu:.2f} s CPU · {size / 1024:,.0f} KiB · {warm_cpu / max(base_seconds, 1e-6):.0f}× the Markdown "
            f"file's CPU time, {size / base_bytes:.1f}× its size"
        )
        if max(cold_cpu, warm_cpu) > GOAL_SECONDS:
            failures.append(f"{fmt}: {max(cold_cpu, warm_cpu):.2f} s of CPU, goal under {GOAL_SECONDS:.0f} s")
        if size > GOAL_BYTES:
            failures.append(f"{fmt}: {size:,} bytes, goal under {GOAL_BYTES:,}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    failures = run(args.sections, args.repeat)
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
