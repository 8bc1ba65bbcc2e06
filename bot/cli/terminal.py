"""`deepthread ask`: one research in the terminal, live progress, the report as Markdown."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from agent import ModelWatch, assemble, to_markdown
from bot.catalogue import said_once
from bot.publishing.export import export_file, format_of
from jobs import JobRuntime, Run, RunState, RunStatus, run_inline

from .interrupts import interrupts
from .progress_line import ProgressLine


def report_markdown(state: RunState) -> str:
    report = assemble(state.summary, state.sections, state.sources)
    footer = f"{state.usage.requests} model requests · run {state.run.id}"
    if state.reason:
        footer = f"Note: {state.reason} · " + footer
    return to_markdown(state.run.question, report, footer)


def default_output(question: str) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", question.lower()).strip("-")[:50] or "report"
    return Path(f"deepthread-report-{slug}.md")


def out_problem(path: Path) -> str | None:
    """Why the report cannot be written to `path`, in one line (None: it can), checked before any work."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        return f"--out {path} is a folder: name a file in it, e.g. --out {path / 'report.md'}"
    if not folder.is_dir():
        return f"--out {path}: the folder {folder} does not exist; create it (mkdir -p {folder}) or name another"
    if not os.access(folder, os.W_OK):
        return f"--out {path}: the folder {folder} is not writable by you; name a file somewhere you may write"
    return None


class ReportFile:
    """The report on disk, rewritten as sections land (atomically: a reader or a Ctrl-C never
    sees half a file), so an interrupted run keeps everything it had written. `.pdf` and `.docx`
    (bot/publishing/export.py) are written when the run ends or is interrupted; anything else is Markdown."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._written = ""
        self.state: RunState | None = None
        self.format = format_of(path.suffix) if path.suffix.lower() in (".pdf", ".docx") else None

    def __call__(self, state: RunState) -> None:
        self.state = state
        if (state.sections or state.summary or state.status.finished) and (
            self.format is None or state.status.finished
        ):
            self.write(report_markdown(state))

    def write(self, text: str) -> None:
        if text == self._written:
            return
        partial = self.path.with_name(self.path.name + ".partial")
        if self.format is not None and self.state is not None:  # the same file `export pdf` uploads
            partial.write_bytes(export_file(self.state, self.format).content)
        else:
            partial.write_text(text, encoding="utf-8")
        os.replace(partial, self.path)
        self._written = text

    def interrupted(self, said: str = "Interrupted (Ctrl-C)") -> None:
        """A stop signal: say so in the file, keeping what was written (the question alone, when the run
        had written nothing yet: the file is always where the command says it is)."""
        if self.state is not None:
            self.write(report_markdown(self.state) + f"\n_{said} before the run finished._\n")


async def ask(
    question: str, runtime: JobRuntime, output: Path | None, profile: str = "standard", report: ReportFile | None = None
) -> int:
    run = Run(question=question, profile=profile)
    path = output or default_output(question)
    report = report or ReportFile(path)
    report.state = report.state or RunState(run=run)
    watch = ModelWatch()  # the model requests in flight: what the progress line says the run waits on
    progress = ProgressLine(sys.stderr, watch)
    print(f"Run {run.id}: the report is written to {path} as sections land", file=sys.stderr)

    def on_change(state: RunState) -> None:
        progress.update(state)
        report(state)

    with _logs_above(progress):
        async with progress.running():
            with interrupts() as stop:
                research = asyncio.create_task(run_inline(run, replace(runtime, model_watch=watch), on_change))
                finished = await stop.race(research)
    if not finished:
        report.interrupted(stop.said)
        label = "Interrupted" if stop.said.startswith("Interrupted") else stop.said
        print(f"\n{label}: the report so far is in {path}", file=sys.stderr, flush=True)
        if not research.done():  # its clean-up hangs: the report is on disk, so end without it
            sys.stdout.flush()
            os._exit(stop.exit_status)
        return stop.exit_status
    state = research.result()
    report.state = state
    report.write(report_markdown(state))
    print(f"Report written to {path} ({len(state.sections)} sections, {len(state.sources)} sources)")
    print(
        f"Its model requests: deepthread inspect {run.id}"
        if runtime.redis_url
        else "Set REDIS_URL to keep this run's model requests for deepthread inspect",
        file=sys.stderr,
    )
    if end_line(state):  # the last line: what failed and what to try
        print(end_line(state), file=sys.stderr)
    return 0 if state.status == RunStatus.completed else 1


def end_line(state: RunState) -> str:
    """How a finished run ended, in one line ("" for a plain success), each thing said once."""
    if state.status == RunStatus.failed:  # as the thread says it ("Ended early"); the reason says what failed
        return f"Run ended early: {state.reason}"
    if state.status == RunStatus.stopped:
        return f"Run {said_once('stopped', state.reason) or f'stopped: {state.reason}'}"
    return f"Note: {state.reason}" if state.reason else ""


@contextmanager
def _logs_above(progress: ProgressLine) -> Iterator[None]:
    """Log lines on stderr go above the live progress line while a run is shown."""
    moved = [
        handler
        for handler in logging.getLogger().handlers
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr
    ]
    for handler in moved:
        handler.setStream(progress.above())
    try:
        yield
    finally:
        for handler in moved:
            handler.setStream(sys.stderr)
