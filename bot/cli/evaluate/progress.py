"""A plain-text progress bar on stderr: one line whenever a question starts, is graded or ends."""

from __future__ import annotations

import time
from typing import TextIO

__all__ = ["ProgressBar"]

BAR_WIDTH = 20


class ProgressBar:
    def __init__(self, total: int, out: TextIO) -> None:
        self.total = total
        self.out = out
        self.done = 0
        self.running: dict[str, str] = {}  # question id → what it is doing
        self.started = time.monotonic()

    def _line(self, event: str) -> None:
        filled = BAR_WIDTH * self.done // self.total if self.total else BAR_WIDTH
        elapsed = (time.monotonic() - self.started) / 60
        now = ", ".join(f"{q} {what}" for q, what in self.running.items()) or "–"
        print(
            f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self.done}/{self.total} · {elapsed:.1f} min · "
            f"{event} · now: {now}",
            file=self.out,
            flush=True,
        )

    def start(self, question_id: str) -> None:
        self.running[question_id] = "researching"
        self._line(f"{question_id} started")

    def grading(self, question_id: str) -> None:
        self.running[question_id] = "grading"
        self._line(f"{question_id} researched")

    def finish(self, question_id: str, outcome: str) -> None:
        self.running.pop(question_id, None)
        self.done += 1
        self._line(f"{question_id} {outcome}")
