"""Checkpoints: a running loop's state after every turn, so a crashed run resumes where it was.

Each part of the loop says what it needs to carry across a crash (`snapshot()`) and takes it
back (`restore()`): the history, the context manager, the ledger, the tools' shared context
(result ids, link table, files and figures seen), each tool, the run control and the loop's
own notes. This module composes them into one record and back; it writes nothing private.

Written incrementally (only steps that changed, plus a small meta record), so a checkpoint
costs the same at turn 300 as at turn 3. Result texts are not copied: they are in the result
store already and are read back from there on resume. The Redis store is jobs.records.stores.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from .budget import Ledger
from .context.history import History
from .results import ResultStore

if TYPE_CHECKING:
    from .loop import ResearchLoop

__all__ = ["CheckpointMeta", "CheckpointSteps", "CheckpointStore", "Checkpointer", "MemoryCheckpointStore"]

CheckpointMeta = dict[str, Any]  # JSON: everything but the steps
CheckpointSteps = dict[int, dict[str, Any]]  # step index -> that step's snapshot (JSON)


class CheckpointStore(Protocol):
    async def save(self, meta: CheckpointMeta, steps: CheckpointSteps) -> None:
        """Store `meta` and the changed `steps`; drop the steps listed in meta["dropped"]."""
        ...

    async def load(self) -> tuple[CheckpointMeta, CheckpointSteps] | None: ...


class MemoryCheckpointStore:
    def __init__(self) -> None:
        self.meta: CheckpointMeta | None = None
        self.steps: CheckpointSteps = {}

    async def save(self, meta: CheckpointMeta, steps: CheckpointSteps) -> None:
        # Copied through JSON, as a real store would: later changes to the loop do not leak in.
        self.steps.update({index: json.loads(json.dumps(step)) for index, step in steps.items()})
        for index in meta.get("dropped", []):
            self.steps.pop(index, None)
        self.meta = json.loads(json.dumps(meta))

    async def load(self) -> tuple[CheckpointMeta, CheckpointSteps] | None:
        if self.meta is None:
            return None
        return self.meta, dict(self.steps)


class Checkpointer:
    """Saves a loop after every turn and restores one from the last save."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store
        self._saved_steps: set[int] = set()  # step indexes the store holds

    async def save(self, loop: ResearchLoop) -> None:
        history = loop.history
        kept = {step.index for step in history.steps}
        dropped = sorted(self._saved_steps - kept)  # summarised away by a compaction
        steps = {step.index: step.snapshot() for step in history.take_dirty()}
        self._saved_steps = (self._saved_steps | set(steps)) - set(dropped)
        meta: CheckpointMeta = {
            "history": history.snapshot(),
            "dropped": dropped,
            "saved_at": loop.clock(),
            "ledger": loop.ledger.snapshot(),
            "context": loop.context.snapshot(),
            "tools": {name: tool.snapshot() for name, tool in loop.tools.items()},
            "control": loop.control.snapshot(),
            **loop.ctx.snapshot(),
            **loop.snapshot(),
        }
        await self.store.save(meta, steps)

    async def load(self) -> tuple[CheckpointMeta, CheckpointSteps] | None:
        return await self.store.load()

    async def restore(
        self,
        loop: ResearchLoop,
        meta: CheckpointMeta,
        steps: CheckpointSteps,
        results: ResultStore,
        active_until: float | None,
    ) -> None:
        """Resume `loop` from a checkpoint; time spent since it (until the crash, `active_until`)
        is counted, not refunded."""
        saved = meta["history"]
        texts: dict[str, str | None] = {}
        for index in saved["steps"]:
            for record in steps[index]["results"]:
                stored = await results.get(record["result_id"])
                texts[record["result_id"]] = stored.text if stored is not None else None
        loop.context.restore(meta["context"], History.restore(saved, steps, texts))
        self._saved_steps = set(saved["steps"])
        ledger = Ledger.restore(meta["ledger"])
        if active_until is not None:
            ledger.close_after_crash(active_until, since=meta["saved_at"])
        loop.use_ledger(ledger)
        for name, state in meta["tools"].items():
            if name in loop.tools:
                loop.tools[name].restore(state)
        loop.ctx.restore(meta)
        loop.restore(meta)
        loop.control.restore(meta["control"])
