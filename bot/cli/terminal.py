"""`deepthread ask`: one research in the terminal, live progress, the report as Markdown."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TextIO

from agent import assemble, to_markdown
from bot.publishing.link_policy import markdown_file_body, shown
from jobs import JobRuntime, Run, RunState, RunStatus, run_inline


def report_markdown(state: RunState) -> str:
    """The report as a Markdown file: links only to the run's sources (bot/publishing/link_policy.py)."""
    state = shown(state)
    report = assemble(state.summary, state.sections, state.sources)
    footer = f"{state.usage.requests} model requests · run {state.run.id}"
    if state.reason:
        footer = f"Note: {state.reason} · " + footer
    return to_markdown(state.run.question, report, footer, body=markdown_file_body(state, report))


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


class ReportFile:
    """The report on disk, rewritten as sections land (atomically: a reader or a Ctrl-C never
    sees half a file), so an interrupted run keeps everything it had written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._written = ""
        self.state: RunState | None = None

    def __call__(self, state: RunState) -> None:
        self.state = state
        if state.sections or state.summary or state.status.finished:
            self.write(report_markdown(state))

    def write(self, text: str) -> None:
        if text == self._written:
            return
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, self.path)
        self._written = text

    def interrupted(self) -> None:
        """Ctrl-C: say so in the file, keeping what was written."""
        if self.state is not None:
            self.write(report_markdown(self.state) + "\n_Interrupted (Ctrl-C) before the run finished._\n")


async def ask(
    question: str, runtime: JobRuntime, output: Path | None, profile: str = "standard", report: ReportFile | None = None
) -> int:
    run = Run(question=question, profile=profile)
    path = output or default_output(question)
    report = report or ReportFile(path)
    progress = TerminalProgress(sys.stderr)
    print(f"Run {run.id}: the report is written to {path} as sections land", file=sys.stderr)

    def on_change(state: RunState) -> None:
        progress(state)
        report(state)

    state = await run_inline(run, runtime, on_change)
    report.write(report_markdown(state))
    if state.status != RunStatus.completed:
        print(f"Run ended early: {state.reason}", file=sys.stderr)
    print(f"Report written to {path} ({len(state.sections)} sections, {len(state.sources)} sources)")
    print(
        f"Its model requests: deepthread inspect {run.id}"
        if runtime.redis_url
        else "Set REDIS_URL to keep this run's model requests for deepthread inspect",
        file=sys.stderr,
    )
    return 0 if state.status == RunStatus.completed else 1
