"""Reading what people write, off serve's event loop.

Every serve replica's loop carries every workspace's events and the publisher, so no work over a
person's text may hold it. A short text (a command, a short question) is read inline: the patterns
that read it are held to linear time (tests/test_linear_patterns.py), so a few hundred characters cost
microseconds. A longer one is read in a child process with a deadline: a reading that overruns (a
pattern that turned out slow, a text built against one) is killed with its child, the text is refused
with advice, and the next long text gets a fresh child. Python's `re` keeps the interpreter lock for a
whole match, so a thread would not free the loop; a process does.

The functions read are pure (text in, a small picklable answer out) and live in modules the child
can import: it is started with `spawn`, never forked from serve's threads.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

__all__ = ["IDLE_SECONDS", "INLINE_CHARS", "READ_SECONDS", "TextReader", "UnreadableText"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Up to this many characters a text is read on the loop: every pattern is linear, so this is
# microseconds of work, far less than a round trip to the child.
INLINE_CHARS = 500
# A reading of at most MAX_QUESTION_CHARS (4,000) with linear patterns takes well under a millisecond;
# one that takes seconds is a pattern gone wrong, not a slow machine.
READ_SECONDS = 2.0


# The child (~50 MB: the bot's modules it reads with) is stopped after this long without a long text.
IDLE_SECONDS = 120.0
# A spawned child imports the reading's modules once; a loaded 2-core machine may take seconds.
START_SECONDS = 60.0


def _ready(reading: Callable[..., object]) -> bool:
    """Run in the child: unpickling `reading` imported its module, so the child is ready."""
    return callable(reading)


class UnreadableText(Exception):
    """A text could not be read within the deadline: it is refused, nothing is started or stored."""

    def __str__(self) -> str:
        return (
            "I could not read that message in time (something in it is built to slow me down), so I did "
            "nothing with it. Please write it again in plain words, and share long material as a file."
        )


class TextReader:
    """One child process that reads long texts, one at a time; killed and replaced when a read overruns."""

    def __init__(
        self, deadline: float = READ_SECONDS, inline_chars: int = INLINE_CHARS, idle_seconds: float = IDLE_SECONDS
    ) -> None:
        self.deadline = deadline
        self.inline_chars = inline_chars
        self._pool: ProcessPoolExecutor | None = None
        self.idle_seconds = idle_seconds
        self._lock: asyncio.Lock | None = None
        self._idle: asyncio.TimerHandle | None = None
        self.children_started = 0  # for tests and the log: a child per overrun or idle spell, not per text

    async def read(self, reading: Callable[..., T], text: str, *args: object) -> T:
        """`reading(text, *args)`, inline when `text` is short, else in the child within the deadline."""
        if len(text) <= self.inline_chars:
            return reading(text, *args)
        if self._lock is None:  # made on the loop that uses it
            self._lock = asyncio.Lock()
        async with self._lock:  # the child reads one text at a time; the rest wait their turn
            if self._idle is not None:
                self._idle.cancel()
            pool = self._pool or await self._start(reading)
            try:
                answer = await asyncio.wait_for(asyncio.wrap_future(pool.submit(reading, text, *args)), self.deadline)
            except TimeoutError:
                log.warning(
                    "a %d-character text took over %.1f s to read: refused, reader restarted", len(text), self.deadline
                )
                self._kill(pool)
                raise UnreadableText() from None
            except BrokenProcessPool:  # the child died (killed from outside, out of memory)
                log.warning("the text reader's child died while reading a %d-character text", len(text))
                self._kill(pool)
                raise UnreadableText() from None
            self._idle = asyncio.get_running_loop().call_later(self.idle_seconds, self._stop_idle, pool)
            return answer

    def _stop_idle(self, pool: ProcessPoolExecutor) -> None:
        """No long text for a while: the child's memory is given back; the next long text starts one."""
        if self._pool is pool and not (self._lock and self._lock.locked()):
            self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)

    async def _start(self, reading: Callable[..., object]) -> ProcessPoolExecutor:
        """A child with `reading`'s module imported: its start-up (an interpreter, the imports) is not
        counted against the deadline, which is for the reading alone."""
        pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        self.children_started += 1
        try:
            await asyncio.wait_for(asyncio.wrap_future(pool.submit(_ready, reading)), START_SECONDS)
        except (TimeoutError, BrokenProcessPool):
            self._kill(pool)
            raise UnreadableText() from None
        self._pool = pool
        return pool

    def _kill(self, pool: ProcessPoolExecutor) -> None:
        # The executor cannot cancel a running call (3.11 has no terminate_workers): kill its child.
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        if self._pool is pool:
            self._pool = None

    def close(self) -> None:
        """At shutdown: the child ends with serve (a reading in progress is dropped)."""
        if self._idle is not None:
            self._idle.cancel()
        if self._pool is not None:
            self._kill(self._pool)
