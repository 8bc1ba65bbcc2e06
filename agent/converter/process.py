"""The parent's side of a conversion: one child process per document, limited by the OS, killed at
its wall deadline or when the caller stops waiting, its answer validated before it is believed.

`await convert(kind, data)` never blocks the event loop (the child is waited on asynchronously)
and never leaves anything running behind it: a tool whose deadline passes cancels the await,
and cancelling kills the child. A process converts a few documents at a time, shared round robin
between the runs waiting, one at a time per run, within each run's total conversion time
(fair_queue.py): however many files runs read at once, a few documents' memory is the most
conversions add to the worker, and one run's slow files do not delay another's.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

from pydantic import ValidationError

from ..exceptions import ConversionRefused
from .document import Answer, FileText
from .fair_queue import RUN_OF_CONVERSION, slots
from .limits import ConvertLimits

__all__ = ["CHILD", "ConversionStats", "convert", "last_stats"]

log = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("child.py")
# -I: isolated (no environment variable, no user site, not the working directory); -B: no bytecode.
CHILD_ARGS = ("-I", "-B")
# What is kept of a failed child's stderr for the log.
STDERR_TAIL_CHARS = 2_000


class ConversionStats:
    """The last conversion's figures (bench/files.py prints them): the child's peak memory, its exit."""

    peak_rss_bytes: int = 0
    returncode: int | None = None


last_stats = ConversionStats()


def _mb(n: int) -> str:
    return f"{n / 1_048_576:,.0f} MB"


async def convert(kind: str, data: bytes, *, extension: str = "", limits: ConvertLimits | None = None) -> FileText:
    """`data` converted as `kind` (pdf, docx, xlsx, pptx, csv, html, markdown, text) in a child
    process; ConversionRefused says what went wrong (the caller says what to do instead)."""
    limits = limits or ConvertLimits()
    header = limits.model_dump_json(round_trip=True)
    request = f'{{"kind": "{kind}", "extension": "{extension}", "limits": {header}}}\n'.encode()
    async with slots().slot(RUN_OF_CONVERSION.get()):
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *CHILD_ARGS,
            str(CHILD),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={},  # nothing of the worker's environment, its secrets least of all
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(request + data), limits.wall_seconds)
        except TimeoutError:
            raise ConversionRefused(
                f"converting it took longer than {limits.wall_seconds:.0f} s, so it was stopped"
            ) from None
        finally:
            if process.returncode is None:  # the deadline, or the caller stopped waiting: no child lives on
                process.kill()
                await process.wait()
    last_stats.returncode = process.returncode
    return _answer(process.returncode, out, err, limits)


def _answer(code: int | None, out: bytes, err: bytes, limits: ConvertLimits) -> FileText:
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        raise ConversionRefused(
            f"converting it used more than {limits.cpu_seconds} s of processing, so the system stopped it"
        )
    tail = err.decode("utf-8", "replace")[-STDERR_TAIL_CHARS:]
    if code != 0:
        if "MemoryError" in tail:
            raise ConversionRefused(
                f"converting it needed more than the {_mb(limits.memory_bytes)} of memory one document may take"
            )
        log.warning("the converter exited with %s: %s", code, tail)
        raise ConversionRefused(f"the converter stopped unexpectedly on it (exit {code})")
    try:
        answer = Answer.model_validate_json(out)
    except ValidationError:
        log.warning("the converter's answer could not be read: %r", out[:200])
        raise ConversionRefused("the converter's answer could not be read") from None
    last_stats.peak_rss_bytes = answer.peak_rss_bytes
    if answer.refused:
        raise ConversionRefused(answer.refused)
    return answer.file_text()
