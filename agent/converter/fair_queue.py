"""Conversion slots shared fairly by run: one run's documents cannot starve another's.

A worker carrying many runs on one event loop converts a few documents at a time (each may use
its whole memory limit). Slots go round robin between the runs waiting, each run holding at most
`per_run` at once, so a run that queued ten slow PDFs takes one slot and another run's small file
starts at once. Each run also has a total conversion budget (wall seconds): once spent, its next
conversion is refused with what to do instead, so slow files cannot hold a slot for many minutes.

The run is the `ConversionAccount` in `RUN_OF_CONVERSION` (agent/run.py sets one per research,
inherited by its tools and task agents); it goes with the run, so nothing here outlives one.

The offload pool (agent/offload.py: web pages' extraction, charts) shares its processes the same way,
without a budget: a run that sent twenty big pages holds the pool's processes only until another
run's page is waiting, which takes the next one to come free.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from .. import defaults
from ..exceptions import ConversionBudgetSpent

__all__ = ["RUN_OF_CONVERSION", "ConversionAccount", "FairSlots", "slots"]


@dataclass
class ConversionAccount:
    """One run's share: its id (the round robin's key) and the wall seconds it has spent converting."""

    run: str = ""
    spent: float = 0.0


# Who converts; None outside a research (a bench, a test): one shared account without a budget.
RUN_OF_CONVERSION: contextvars.ContextVar[ConversionAccount | None] = contextvars.ContextVar(
    "run_of_conversion", default=None
)


class FairSlots:
    """`parallel` slots, at most `per_run` to one run, each run's time in them within `budget_seconds`
    (None: no budget, nothing counted)."""

    def __init__(
        self,
        parallel: int = defaults.CONVERT_PARALLEL,
        per_run: int = defaults.CONVERT_PARALLEL_PER_RUN,
        budget_seconds: float | None = defaults.RUN_CONVERT_SECONDS,
    ) -> None:
        self.parallel = parallel
        self.per_run = per_run
        self.budget_seconds = budget_seconds
        self._busy: dict[str, int] = {}
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        # When each run with work here was last given a slot: the one served longest ago goes next.
        self._served_at: dict[str, int] = {}
        self._grants = 0

    def _refuse_if_spent(self, account: ConversionAccount | None) -> None:
        if self.budget_seconds is not None and account is not None and account.spent >= self.budget_seconds:
            raise ConversionBudgetSpent(
                f"this research has already spent its {self.budget_seconds:.0f} s of document conversion, "
                "so no more files are converted in it"
            )

    @asynccontextmanager
    async def slot(self, account: ConversionAccount | None) -> AsyncIterator[None]:
        """A conversion slot for the account's run, in its turn; refused once its budget is spent."""
        run = await self.acquire(account)
        started = time.monotonic()
        try:
            self._refuse_if_spent(account)  # spent by its other files while this one waited
            yield
        finally:
            if account is not None and self.budget_seconds is not None:
                account.spent += time.monotonic() - started
            self.release(run)

    async def acquire(self, account: ConversionAccount | None) -> str:
        """Wait for a slot for the account's run, in its turn; returns what to `release` it with.
        For work that outlives its caller's wait (a pool's task runs on after a cancel): `slot` else."""
        run = account.run if account is not None else ""
        self._refuse_if_spent(account)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(run, deque()).append(waiter)
        self._grant()
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release(run)  # granted as we were cancelled: hand the slot on
            else:
                self._forget(run, waiter)
            raise
        return run

    def release(self, run: str) -> None:
        """Give back a slot `acquire` gave; the next run in turn takes it."""
        self._release(run)

    def _free(self, run: str) -> bool:
        return sum(self._busy.values()) < self.parallel and self._busy.get(run, 0) < self.per_run

    def _forget(self, run: str, waiter: asyncio.Future[None]) -> None:
        queue = self._waiting.get(run)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[run]
        self._drop_if_idle(run)

    def _drop_if_idle(self, run: str) -> None:
        if run not in self._busy and run not in self._waiting:
            self._served_at.pop(run, None)  # nothing of a run outlives its work here

    def _release(self, run: str) -> None:
        self._busy[run] -= 1
        if not self._busy[run]:
            del self._busy[run]
        self._grant()
        self._drop_if_idle(run)

    def _grant(self) -> None:
        """Each free slot to the run served longest ago (never served: first) that may take one."""
        granted = True
        while granted:
            granted = False
            for run in sorted(self._waiting, key=lambda r: self._served_at.get(r, -1)):
                if sum(self._busy.values()) >= self.parallel:
                    return
                if self._free(run):
                    granted = self._grant_one(run) or granted

    def _grant_one(self, run: str) -> bool:
        queue = self._waiting.pop(run)
        waiter = queue.popleft()
        while waiter.done() and queue:  # cancelled before its cleanup ran: not a taker
            waiter = queue.popleft()
        if queue:
            self._waiting[run] = queue
        if waiter.done():
            return False
        self._grants += 1
        self._served_at[run] = self._grants
        self._busy[run] = self._busy.get(run, 0) + 1
        waiter.set_result(None)
        return True


_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FairSlots] = weakref.WeakKeyDictionary()


def slots() -> FairSlots:
    """This event loop's slots (a loop is one process's set of runs)."""
    loop = asyncio.get_running_loop()
    if loop not in _slots:
        _slots[loop] = FairSlots()
    return _slots[loop]
