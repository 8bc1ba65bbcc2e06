"""The event handlers still running, so that a shutdown can let them finish (bot/cli/processes.py).

Bolt acks an event and then runs its listener in a task of its own; nothing keeps a handle on it.
A global middleware marks the dispatch of each request (a context variable), and the event loop's
task factory keeps every task created while that mark is set: the listener's task, and the tasks it
creates in turn (they inherit the mark with the context). Bolt's `next()` only records that it was
called (the chain goes on after the middleware returns), so the mark is left set for the rest of the
dispatch: each request is dispatched in a task of its own (aiohttp's per request, slack_sdk's per
Socket Mode message), whose context ends with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from typing import Any

__all__ = ["InFlight"]

log = logging.getLogger(__name__)

_dispatching: ContextVar[bool] = ContextVar("deepthread_dispatching", default=False)


class InFlight:
    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Keep the tasks created while an event is dispatched (see the module docstring)."""
        previous = loop.get_task_factory()

        def factory(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any) -> Any:
            task: Any = previous(loop, coro, **kwargs) if previous else asyncio.Task(coro, loop=loop, **kwargs)
            if _dispatching.get():
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            return task

        loop.set_task_factory(factory)  # type: ignore[arg-type]  # typeshed's factory type omits **kwargs

    async def middleware(self, next: Callable[[], Awaitable[None]]) -> None:  # `next`: Bolt passes it by name
        _dispatching.set(True)  # for the rest of this request's task (see the module docstring)
        await next()

    async def drain(self, seconds: float) -> int:
        """Wait up to `seconds` for the handlers still running; cancel the rest. Returns how many were cut short."""
        pending = {t for t in self.tasks if not t.done()}
        if not pending:
            return 0
        log.info("shutting down: waiting for %d event handler(s) to finish", len(pending))
        _, late = await asyncio.wait(pending, timeout=seconds)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        return len(late)
