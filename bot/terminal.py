"""`deepthread ask`: one research in the terminal, live progress, the report as Markdown."""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TextIO

from agent import assemble, to_markdown
from jobs import JobRuntime, Run, RunState, RunStatus, run_inline


def report_markdown(state: RunState) -> str:
    report = assemble(state.summary, state.sections, state.sources)
    footer = f"{state.usage.requests} model requests · run {state.run.id}"
    if state.reason:
        footer = f"Note: {state.reason} · " + footer
    return to_markdown(state.run.question, report, footer)


def default_output(question: str) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", question.lower()).strip("-")[:50] or "report"
    return Path(f"deepthread-report-{slug}.md")


class TerminalProgress:
    """Prints a line whenever what the run is doing changes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._last = ""

    def __call__(self, state: RunState) -> None:
        line = f"[{state.phase}] {state.activity}" if state.activity else f"[{state.phase}]"
        line += f"  · {state.usage.requests} requests · {len(state.sources)} sources · {len(state.sections)} sections"
        if state.activity and line != self._last:
            print(line, file=self.out, flush=True)
            self._last = line


async def ask(question: str, runtime: JobRuntime, output: Path | None, profile: str = "standard") -> int:
    run = Run(question=question, profile=profile)
    state = await run_inline(run, runtime, TerminalProgress(sys.stderr))
    path = output or default_output(question)
    path.write_text(report_markdown(state), encoding="utf-8")
    if state.status != RunStatus.completed:
        print(f"Run ended early: {state.reason}", file=sys.stderr)
    print(f"Report written to {path} ({len(state.sections)} sections, {len(state.sources)} sources)")
    return 0 if state.status == RunStatus.completed else 1
