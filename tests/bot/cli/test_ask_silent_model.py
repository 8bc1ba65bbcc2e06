"""`deepthread ask` against a model endpoint that accepts the connection and never answers: progress
on stderr within seconds naming what it waits on, a clear end naming the endpoint within a minute,
and Ctrl-C or SIGTERM ending it within seconds with the report where the command says it is."""
from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.fakes.silent import SilentServer
from tests.processes import DEEPTHREAD, ROOT, environment

# What the issue asks: a line saying what the run waits on within 15 s of its start, its end within 60 s.
PROGRESS_WITHIN_SECONDS = 15.0
END_WITHIN_SECONDS = 60.0
# A stop signal ends the command within this long.
STOP_WITHIN_SECONDS = 10.0
# Importing the whole stack takes seconds, more on a loaded machine: the clocks above start at the run's
# first line (the banner), not at the process's start.
STARTUP_SECONDS = 60.0


class Lines:
    """A process's stderr, line by line as it comes, each with the time it arrived."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.seen: list[tuple[float, str]] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        assert process.stderr is not None
        stream = process.stderr
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, predicate, timeout: float, what: str) -> tuple[float, str]:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        for at, line in self.seen:
            if predicate(line):
                return at, line
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no line {what} within {timeout:.0f} s; stderr so far:\n" + self.text())
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"stderr ended without a line {what}:\n" + self.text())
            self.seen.append((time.monotonic(), line))
            if predicate(line):
                return self.seen[-1]

    def text(self) -> str:
        return "\n".join(line for _, line in self.seen)


@contextmanager
def asking(silent: SilentServer, out: Path) -> Iterator[tuple[subprocess.Popen[str], Lines, float]]:
    """`deepthread ask` against the silent endpoint, with stderr a pipe (plain lines, not a live one);
    yields the process, its stderr, and when its run started (the banner)."""
    env = environment(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=silent.url, DEEPTHREAD_SEARCH="searxng",
                      SEARXNG_URL="http://127.0.0.1:9")
    process = subprocess.Popen(DEEPTHREAD + ["ask", "expense ratio of VTI", "--out", str(out)], env=env, cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = Lines(process)
        started, _ = lines.wait_for(lambda line: line.startswith("Run ") and str(out) in line, STARTUP_SECONDS,
                                    "announcing the run")
        yield process, lines, started
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def test_a_silent_model_shows_what_it_waits_on_then_ends_naming_the_endpoint(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    with SilentServer() as silent, asking(silent, out) as (process, lines, started):
        at, waiting = lines.wait_for(lambda line: "waiting for the model at" in line, PROGRESS_WITHIN_SECONDS,
                                     "saying the run waits on the model")
        assert at - started <= PROGRESS_WITHIN_SECONDS
        assert f"{silent.url}/v1/messages" in waiting and "nothing received" in waiting, waiting
        at, end = lines.wait_for(lambda line: line.startswith("Run ended early:"), END_WITHIN_SECONDS,
                                 "saying the run ended early")
        assert at - started <= END_WITHIN_SECONDS
        process.wait(10)
    assert process.returncode == 1
    assert f"the model endpoint {silent.url}/v1/messages sent nothing for 10 s" in end, end
    assert "ANTHROPIC_BASE_URL" in end and "DEEPTHREAD_MODEL_FIRST_BYTE_SECONDS" in end, "what to try"
    assert lines.text().splitlines()[-1] == end, "the failure is the last word"
    assert "Traceback" not in lines.text() and " INFO " not in lines.text(), lines.text()
    assert silent.request_lines and set(silent.request_lines) == {"POST /v1/messages HTTP/1.1"}
    assert "# expense ratio of VTI" in out.read_text()


@pytest.mark.parametrize(("signum", "said", "status"), [
    (signal.SIGINT, "Interrupted", 130),
    (signal.SIGTERM, "Stopped (SIGTERM)", 143),
])
def test_a_stop_signal_ends_a_waiting_run_within_seconds_leaving_the_report_it_names(
        tmp_path: Path, signum: signal.Signals, said: str, status: int) -> None:
    """Before any section was written (the model never answered), the file named is there all the same."""
    out = tmp_path / "report.md"
    with SilentServer() as silent, asking(silent, out) as (process, lines, _):
        lines.wait_for(lambda line: "waiting for the model at" in line, PROGRESS_WITHIN_SECONDS, "waiting")
        sent = time.monotonic()
        process.send_signal(signum)
        process.wait(STOP_WITHIN_SECONDS)
        assert time.monotonic() - sent <= STOP_WITHIN_SECONDS
        _, line = lines.wait_for(lambda line: "the report so far is in" in line, 5, "naming the report")
    assert process.returncode == status, lines.text()
    assert line == f"{said}: the report so far is in {out}"
    report = out.read_text()
    assert "# expense ratio of VTI" in report and f"_{said if signum == signal.SIGTERM else 'Interrupted (Ctrl-C)'}" \
        in report, report
    assert "Traceback" not in lines.text(), lines.text()
    assert not list(tmp_path.glob("*.partial")), "writes are atomic"
