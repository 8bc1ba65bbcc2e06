"""Run one research in this process with in-memory state (the terminal mode)."""
from __future__ import annotations

from collections.abc import Callable

from agent import RunEvent, research

from .executor import anthropic_client, task_for
from .models import Run, RunState
from .runtime import JobRuntime
from .state import apply_event


async def run_inline(run: Run, runtime: JobRuntime, on_change: Callable[[RunState], None]) -> RunState:
    holder = {"state": RunState(run=run)}

    async def emit(event: RunEvent) -> None:
        holder["state"] = apply_event(holder["state"], event)
        on_change(holder["state"])

    async with anthropic_client(runtime) as client:
        await research(task_for(holder["state"], runtime), runtime.agent, anthropic=client, emit=emit)
    return holder["state"]
