"""One request log for the lead and its task agents, numbered in dispatch order.

Each model client counts its own requests; with task agents logging into the same run,
those counts would collide. This wrapper numbers every record once, run-wide, and labels a
task agent's requests with its task (`task:2`, `task:2:extract`), so `deepthread inspect`
shows each child's full history beside the lead's.
"""

from __future__ import annotations

from typing import Any

from ..context.requestlog import RequestLog, RequestRecord


class NumberedLog:
    def __init__(self, inner: RequestLog) -> None:
        self._inner = inner
        self._count = 0

    async def record(self, record: RequestRecord, body: dict[str, Any]) -> None:
        self._count += 1
        record.n = self._count
        await self._inner.record(record, body)

    def labelled(self, label: str) -> RequestLog:
        return _Labelled(self, label)


class _Labelled:
    def __init__(self, log: NumberedLog, label: str) -> None:
        self._log = log
        self._label = label

    async def record(self, record: RequestRecord, body: dict[str, Any]) -> None:
        record.kind = self._label if record.kind == "turn" else f"{self._label}:{record.kind}"
        await self._log.record(record, body)
