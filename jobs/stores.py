"""The engine's storage protocols, kept in Redis for a worker's run.

The engine (agent/) defines what it stores and keeps it in memory for the terminal mode and
tests; these are the Redis versions a worker hands to `research()`: tool results (read back
by `fetch_result` and on resume), checkpoints (a crashed run resumes from them) and the
request log (`deepthread inspect`). Keys and lifetimes are in jobs/keys.py.

The bulky ones, tool results (page texts) and the request log's records and parts, are stored
compressed (zlib, marked by a prefix, so a value written before compression still reads) and
kept for the operator's retention (DEEPTHREAD_BULKY_RETENTION_DAYS). Every logged model request
is also counted for the metrics endpoint (jobs/metrics.py).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.typing import EncodableT, FieldT

from agent.checkpoint import CheckpointMeta, CheckpointSteps
from agent.context.requestlog import ContentAddressedLog, RequestRecord, request_body
from agent.pricing import cost_usd
from agent.results import StoredResult

from . import keys
from .connection import text
from .metrics import metrics

__all__ = [
    "RedisCheckpointStore",
    "RedisRequestLog",
    "RedisResultStore",
    "compress",
    "decompress",
    "load_request_body",
    "load_request_records",
]

STEP_FIELD = "step:"  # a checkpoint hash field per history step: step:{index}
META_FIELD = "meta"
# Compressed values start with this; JSON never does, so older plain values still read.
COMPRESSED = b"z1:"
# zlib's middle level: page text shrinks ~3-4x, at well under a millisecond for a page.
COMPRESSION_LEVEL = 6


def compress(value: str) -> bytes:
    return COMPRESSED + zlib.compress(value.encode(), COMPRESSION_LEVEL)


def decompress(raw: bytes | str) -> str:
    data = raw.encode() if isinstance(raw, str) else raw
    if data.startswith(COMPRESSED):
        return zlib.decompress(data[len(COMPRESSED) :]).decode()
    return data.decode()


class RedisResultStore:
    def __init__(self, redis: AsyncRedis, run_id: str, ttl_seconds: int = keys.STORED_RESULT_TTL_SECONDS) -> None:
        self._ttl = ttl_seconds
        self._redis = redis
        self._run_id = run_id

    async def put(self, result: StoredResult) -> None:
        key = keys.result(self._run_id, result.id)
        await self._redis.set(key, compress(result.model_dump_json()), ex=self._ttl)

    async def get(self, result_id: str) -> StoredResult | None:
        raw = await self._redis.get(keys.result(self._run_id, result_id))
        return StoredResult.model_validate_json(decompress(raw)) if raw else None


class RedisCheckpointStore:
    """One hash per run: the changed steps and the meta record are written together."""

    def __init__(self, redis: AsyncRedis, run_id: str) -> None:
        self._redis = redis
        self._key = keys.checkpoint(run_id)

    async def save(self, meta: CheckpointMeta, steps: CheckpointSteps) -> None:
        fields: dict[FieldT, EncodableT] = {f"{STEP_FIELD}{i}": json.dumps(step) for i, step in steps.items()}
        fields[META_FIELD] = json.dumps(meta)
        pipe = self._redis.pipeline()
        pipe.hset(self._key, mapping=fields)
        # Steps summarised away are no longer needed.
        gone = [f"{STEP_FIELD}{i}" for i in meta.get("dropped", [])]
        if gone:
            pipe.hdel(self._key, *gone)
        pipe.expire(self._key, keys.CHECKPOINT_TTL_SECONDS)
        await pipe.execute()

    async def load(self) -> tuple[CheckpointMeta, CheckpointSteps] | None:
        raw = await self._redis.hgetall(self._key)
        named = {text(k): v for k, v in raw.items()}
        if META_FIELD not in named:
            return None
        steps = {int(k[len(STEP_FIELD) :]): json.loads(v) for k, v in named.items() if k.startswith(STEP_FIELD)}
        return json.loads(named[META_FIELD]), steps

    async def clear(self) -> None:
        await self._redis.delete(self._key)


class RedisRequestLog(ContentAddressedLog):
    def __init__(self, redis: AsyncRedis, run_id: str, ttl_seconds: int = keys.REQUEST_LOG_TTL_SECONDS) -> None:
        super().__init__()
        self._ttl = ttl_seconds
        self._redis = redis
        self._records = keys.requests(run_id)
        self._parts_key = keys.request_parts(run_id)

    async def record(self, record: RequestRecord, body: dict[str, Any]) -> None:
        count_request(record)
        record.parts, new = self._parts(body)
        pipe = self._redis.pipeline()
        if new:
            mapping: dict[FieldT, EncodableT] = {key: compress(value) for key, value in new.items()}
            pipe.hset(self._parts_key, mapping=mapping)
        pipe.rpush(self._records, compress(record.model_dump_json()))
        pipe.expire(self._records, self._ttl)
        pipe.expire(self._parts_key, self._ttl)
        await pipe.execute()


def count_request(record: RequestRecord) -> None:
    """One model request in the metrics: its outcome, latency, tokens by type and cost."""
    m = metrics()
    m.model_requests.labels(model=record.model, kind=record.kind, outcome="error" if record.error else "ok").inc()
    if record.seconds is not None:
        m.model_seconds.labels(model=record.model).observe(record.seconds)
    for kind, tokens in (
        ("input", record.input_tokens),
        ("cache_read", record.cache_read_tokens),
        ("cache_creation", record.cache_creation_tokens),
        ("output", record.output_tokens),
    ):
        if tokens:
            m.model_tokens.labels(model=record.model, type=kind).inc(tokens)
    if not record.error:
        m.model_cost.labels(model=record.model).inc(cost_usd(record.model, record.usage()))


def load_request_records(redis: Redis, run_id: str) -> list[RequestRecord]:
    """Read a run's request log (sync client: this is for the CLI)."""
    return [RequestRecord.model_validate_json(decompress(raw)) for raw in redis.lrange(keys.requests(run_id), 0, -1)]


def load_request_body(redis: Redis, run_id: str, record: RequestRecord) -> dict[str, Any]:
    """The request as it was sent, put back together from its stored parts."""
    values = redis.hmget(keys.request_parts(run_id), record.parts)
    parts = {key: decompress(raw) for key, raw in zip(record.parts, values, strict=True) if raw}
    return request_body(record, parts)
