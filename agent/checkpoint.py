"""Checkpoints: a running loop's state after every turn, so a crashed run resumes where it was.

Written incrementally (only steps that changed, plus a small meta record), so a checkpoint
costs the same at turn 300 as at turn 3. Result texts are not copied: they are in the
result store already and are read back from there on resume.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from .context.history import History, ResultRecord, Step
from .results import ResultStore

CHECKPOINT_TTL_SECONDS = 7 * 24 * 3600


class CheckpointStore(Protocol):
    async def save(self, meta: dict[str, Any], steps: dict[int, dict[str, Any]]) -> None: ...

    async def load(self) -> tuple[dict[str, Any], dict[int, dict[str, Any]]] | None: ...


class MemoryCheckpointStore:
    def __init__(self) -> None:
        self.meta: dict[str, Any] | None = None
        self.steps: dict[int, dict[str, Any]] = {}

    async def save(self, meta: dict[str, Any], steps: dict[int, dict[str, Any]]) -> None:
        self.steps.update(json.loads(json.dumps(steps)))
        self.meta = json.loads(json.dumps(meta))

    async def load(self) -> tuple[dict[str, Any], dict[int, dict[str, Any]]] | None:
        if self.meta is None:
            return None
        return self.meta, {int(k): v for k, v in self.steps.items()}


class RedisCheckpointStore:
    def __init__(self, redis: Redis, run_id: str) -> None:
        self._redis = redis
        self._key = f"deepthread:checkpoint:{run_id}"

    async def save(self, meta: dict[str, Any], steps: dict[int, dict[str, Any]]) -> None:
        fields: dict[FieldT, EncodableT] = {f"step:{i}": json.dumps(step) for i, step in steps.items()}
        fields["meta"] = json.dumps(meta)
        pipe = self._redis.pipeline()
        pipe.hset(self._key, mapping=fields)
        # Steps summarised away are no longer needed.
        gone = [f"step:{i}" for i in meta.get("dropped", [])]
        if gone:
            pipe.hdel(self._key, *gone)
        pipe.expire(self._key, CHECKPOINT_TTL_SECONDS)
        await pipe.execute()

    async def load(self) -> tuple[dict[str, Any], dict[int, dict[str, Any]]] | None:
        raw = await self._redis.hgetall(self._key)
        if not raw or b"meta" not in raw:
            return None
        named = {(k.decode() if isinstance(k, bytes) else k): v for k, v in raw.items()}
        steps = {int(k.split(":", 1)[1]): json.loads(v) for k, v in named.items() if k.startswith("step:")}
        return json.loads(raw[b"meta"]), steps

    async def clear(self) -> None:
        await self._redis.delete(self._key)


def step_record(step: Step) -> dict[str, Any]:
    return {
        "index": step.index,
        "assistant": step.assistant,
        "extra": step.extra,
        "results": [
            {
                "tool_use_id": r.tool_use_id,
                "result_id": r.result_id,
                "tool": r.tool,
                "arguments": r.arguments,
                "is_error": r.is_error,
                "step": r.step,
                "stub": r.stub,
            }
            for r in step.results
        ],
    }


def history_meta(history: History) -> dict[str, Any]:
    return {
        "opening": history.opening,
        "opening_extra": history.opening_extra,
        "pinned": history.pinned,
        "summaries": history.summaries,
        "next_index": history.next_step,
        "steps": [step.index for step in history.steps],
        "latest": {tool: record.result_id for tool, record in history.latest_by_tool().items()},
    }


async def rebuild_history(meta: dict[str, Any], steps: dict[int, dict[str, Any]], results: ResultStore) -> History:
    history = History(meta["opening"])
    history.opening_extra = list(meta["opening_extra"])
    history.pinned = meta["pinned"]
    history.summaries = list(meta["summaries"])
    by_id: dict[str, ResultRecord] = {}
    for index in meta["steps"]:
        data = steps[index]
        records = []
        for r in data["results"]:
            stored = await results.get(r["result_id"])
            text = stored.text if stored else "(this result was lost with its store; call the tool again)"
            record = ResultRecord(
                tool_use_id=r["tool_use_id"],
                result_id=r["result_id"],
                tool=r["tool"],
                arguments=r["arguments"],
                text=f"[{r['result_id']}]\n{text}",
                is_error=r["is_error"],
                step=r["step"],
                stub=r["stub"],
            )
            records.append(record)
            by_id[record.result_id] = record
        history.steps.append(
            Step(index=data["index"], assistant=data["assistant"], results=records, extra=list(data["extra"]))
        )
    history._next_index = meta["next_index"]
    history._steps_chars = sum(step.chars() for step in history.steps)
    history._latest = {tool: by_id[rid] for tool, rid in meta["latest"].items() if rid in by_id}
    return history
