"""A checkpoint carries every part of the loop across a crash: what a resumed loop saves first
is exactly what the crashed one saved last."""
from __future__ import annotations

import copy
from typing import Any

from agent import SourceRegistry
from agent.backend import RunBackend
from agent.checkpoint import CheckpointMeta, CheckpointSteps, MemoryCheckpointStore
from agent.events import SourceAdded
from agent.results import MemoryResultStore
from tests.helpers import research_events


class RecordingCheckpoints(MemoryCheckpointStore):
    """The in-memory store, keeping a copy of every save (meta and the steps it wrote)."""

    def __init__(self) -> None:
        super().__init__()
        self.saves: list[tuple[CheckpointMeta, CheckpointSteps]] = []

    async def save(self, meta: CheckpointMeta, steps: CheckpointSteps) -> None:
        self.saves.append((copy.deepcopy(meta), copy.deepcopy(steps)))
        await super().save(meta, steps)


# A link in the question gets a link id: the link table has something to carry too.
QUESTION = "expense ratio VTI SCHB ITOT, see https://investor.vanguard.com/vti"


def without_time(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k != "saved_at"}


async def test_a_resumed_loop_saves_first_exactly_what_the_crashed_one_saved_last(fake_model, fake_web) -> None:
    checkpoints = RecordingCheckpoints()
    backend = RunBackend(results=MemoryResultStore(), checkpoints=checkpoints)
    events, outcome = await research_events(fake_model, fake_web, QUESTION, backend=backend)
    assert outcome.status == "completed", outcome.reason
    last, _ = checkpoints.saves[-1]
    assert last["history"]["steps"] and last["result_ids"] > 0 and last["links"]["urls"], (
        "the run got far enough for every part to have something to carry")

    first_save = len(checkpoints.saves)
    registry = SourceRegistry(e.source for e in events if isinstance(e, SourceAdded))  # from run state
    _, resumed = await research_events(fake_model, fake_web, QUESTION, backend=backend,
                                       registry=registry)
    assert resumed.status == "completed", resumed.reason
    meta, steps = checkpoints.saves[first_save]
    assert without_time(meta) == without_time(last), "history, ledger, context, tools, links, notes: all restored"
    assert steps == {}, "restored steps are not written again: checkpoints stay incremental after a resume"


async def test_steps_summarised_away_leave_the_checkpoint() -> None:
    store = MemoryCheckpointStore()
    step = {"index": 0, "assistant": [], "results": [], "extra": []}
    await store.save({"dropped": []}, {0: step, 1: {**step, "index": 1}})
    await store.save({"dropped": [0]}, {})
    loaded = await store.load()
    assert loaded is not None and list(loaded[1]) == [1]
