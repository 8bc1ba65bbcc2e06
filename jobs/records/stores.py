"""The engine's storage protocols, kept in Redis for a worker's run.

The engine (agent/) defines what it stores and keeps it in memory for the terminal mode and
tests; these are the Redis versions a worker hands to `research()`: tool results (read back
by `fetch_result` and on resume), checkpoints (a crashed run resumes from them) and the
request log (`deepthread inspect`). Keys and lifetimes are in jobs/keyspace/keys.py.

A job's results and checkpoints are written under its lease (`tenure`, jobs/control/ownership.py): each
write is a script that lands only while the run's lock holds that lease, so a job that lost the
run cannot overwrite the checkpoint its successor resumes from. A refused write tells the tenure
(which stops the job) and raises LeaseLost. A saved checkpoint is progress: the run's count of
crash recoveries starts again (jobs/upkeep/recovery.py).

The bulky ones, tool results (page texts) and the request log's records and parts, are stored
compressed (zlib, marked by a prefix, so a value written before compression still reads) and
kept for the operator's retention (DEEPTHREAD_BULKY_RETENTION_DAYS). Every logged model request
is also counted for the metrics endpoint (jobs/process/metrics.py).
"""

from __future__ import annotations

import asyncio
import json
import zlib
from typing import Any, cast

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.typing import EncodableT, FieldT

from agent.checkpoint import CheckpointMeta, CheckpointSteps
from agent.context.requestlog import ContentAddressedLog, RequestRecord, request_body
from agent.pricing import cost_usd
from agent.results import StoredResult

from ..control.ownership import Tenure
from ..keyspace import keys
from ..keyspace.connection import text
from ..process.metrics import metrics

__all__ = [
    "RedisCheckpointStore",
    "RedisFileRefusals",
    "RedisRequestLog",
    "RedisResultStore",
    "RedisSeenUrls",
    "compress",
    "decompress",
    "load_request_body",
    "load_request_records",
    "refused_fetches",
]

STEP_FIELD = "step:"  # a checkpoint hash field per history step: step:{index}
META_FIELD = "meta"
# Compressed values start with this; JSON never does, so older plain values still read.
COMPRESSED = b"z1:"
# zlib's middle level: page text shrinks ~3-4x, at well under a millisecond for a page.
COMPRESSION_LEVEL = 6


# Text at least this long is compressed in a thread: zlib lets go of the interpreter's lock while it
# works, and pages' worth of request parts compressed on a loop fifty runs share held it for tens of ms.
OFF_LOOP_CHARS = 16_384


def compress(value: str) -> bytes:
    return COMPRESSED + zlib.compress(value.encode(), COMPRESSION_LEVEL)


async def compress_all(values: dict[str, str]) -> dict[str, bytes]:
    """`compress` of each value, off the event loop once they are long enough to matter."""
    if sum(len(value) for value in values.values()) < OFF_LOOP_CHARS:
        return {key: compress(value) for key, value in values.items()}
    return await asyncio.to_thread(lambda: {key: compress(value) for key, value in values.items()})


def decompress(raw: bytes | str) -> str:
    data = raw.encode() if isinstance(raw, str) else raw
    if data.startswith(COMPRESSED):
        return zlib.decompress(data[len(COMPRESSED) :]).decode()
    return data.decode()


# Lua: the fence check every job write makes (KEYS[1] the run's lock, ARGV[1] the fence or '').
_FENCED = "if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
_PUT_RESULT = (
    _FENCED
    + """
-- KEYS: lock, result. ARGV: fence, json, ttl s.
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
return 1
"""
)
_SAVE_CHECKPOINT = (
    _FENCED
    + """
-- KEYS: lock, checkpoint, attempts. ARGV: fence, ttl s, n, n field/json pairs, then dropped fields.
local n = tonumber(ARGV[3])
for i = 0, n - 1 do redis.call('HSET', KEYS[2], ARGV[4 + 2 * i], ARGV[5 + 2 * i]) end
for i = 4 + 2 * n, #ARGV do redis.call('HDEL', KEYS[2], ARGV[i]) end
redis.call('EXPIRE', KEYS[2], ARGV[2])
redis.call('DEL', KEYS[3])  -- progress: crash recoveries are counted afresh from here
return 1
"""
)
_CLEAR_CHECKPOINT = _FENCED + "redis.call('DEL', KEYS[2])\nreturn 1\n"


def _fence(tenure: Tenure | None) -> str:
    return tenure.fence if tenure is not None else ""


class RedisResultStore:
    def __init__(
        self,
        redis: AsyncRedis,
        run_id: str,
        tenure: Tenure | None = None,
        ttl_seconds: int = keys.STORED_RESULT_TTL_SECONDS,
    ) -> None:
        self._ttl = ttl_seconds
        self._redis = redis
        self._run_id = run_id
        self._tenure = tenure
        self._put = redis.register_script(_PUT_RESULT)

    async def put(self, result: StoredResult) -> None:
        key = keys.result(self._run_id, result.id)
        value = (await compress_all({key: result.model_dump_json()}))[key]
        written = await self._put(keys=[keys.lock(self._run_id), key], args=[_fence(self._tenure), value, self._ttl])
        if not written and self._tenure is not None:
            raise self._tenure.refused()

    async def get(self, result_id: str) -> StoredResult | None:
        raw = await self._redis.get(keys.result(self._run_id, result_id))
        return StoredResult.model_validate_json(decompress(raw)) if raw else None


class RedisFileRefusals:
    """Why a file version could not be read, for every run of the workspace (the agent's
    FileRefusals protocol)."""

    def __init__(self, redis: AsyncRedis, team: str | None = None) -> None:
        self._redis = redis
        self._team = team

    async def get(self, key: str) -> str | None:
        raw = await self._redis.get(keys.file_refusal(self._team, key))
        return text(raw) if raw else None

    async def put(self, key: str, reason: str) -> None:
        await self._redis.set(keys.file_refusal(self._team, key), reason, ex=keys.FILE_REFUSAL_TTL_SECONDS)


class RedisSeenUrls:
    """The thread's seen URLs (the agent's SeenUrlStore protocol) and the run's refused fetches."""

    def __init__(
        self, redis: AsyncRedis, run_id: str, channel: str | None, thread_ts: str | None, *, team: str | None = None
    ) -> None:
        self._redis = redis
        # A run outside a thread (the terminal) keeps its own set.
        self._key = (
            keys.seen_urls(team, channel, thread_ts) if channel and thread_ts else keys.seen_urls(team, "run", run_id)
        )
        self._refused = keys.refused_fetches(run_id)

    async def load(self) -> set[str]:
        return {text(u) for u in await self._redis.smembers(self._key)}

    async def add(self, urls: list[str]) -> None:
        pipe = self._redis.pipeline(transaction=False)
        pipe.sadd(self._key, *urls)
        pipe.expire(self._key, keys.SEEN_URLS_TTL_SECONDS)
        await pipe.execute()

    async def refused(self, url: str) -> None:
        pipe = self._redis.pipeline(transaction=False)
        pipe.rpush(self._refused, url)
        pipe.expire(self._refused, keys.STORED_RESULT_TTL_SECONDS)
        await pipe.execute()


def refused_fetches(redis: Redis, run_id: str) -> list[str]:
    """The URLs read_page refused in this run (for `deepthread inspect`)."""
    return [text(u) for u in cast(list[bytes], redis.lrange(keys.refused_fetches(run_id), 0, -1))]


class RedisCheckpointStore:
    """One hash per run: the changed steps and the meta record are written together, in one script."""

    def __init__(self, redis: AsyncRedis, run_id: str, tenure: Tenure | None = None) -> None:
        self._redis = redis
        self._run_id = run_id
        self._key = keys.checkpoint(run_id)
        self._tenure = tenure
        self._save = redis.register_script(_SAVE_CHECKPOINT)
        self._clear = redis.register_script(_CLEAR_CHECKPOINT)

    def _keys(self) -> list[str]:
        return [keys.lock(self._run_id), self._key, keys.attempts(self._run_id)]

    async def save(self, meta: CheckpointMeta, steps: CheckpointSteps) -> None:
        fields: dict[str, str] = {f"{STEP_FIELD}{i}": json.dumps(step) for i, step in steps.items()}
        fields[META_FIELD] = json.dumps(meta)
        # Steps summarised away are no longer needed.
        gone = [f"{STEP_FIELD}{i}" for i in meta.get("dropped", [])]
        args: list[EncodableT] = [_fence(self._tenure), keys.CHECKPOINT_TTL_SECONDS, len(fields)]
        for name, value in fields.items():
            args += [name, value]
        args += gone
        if not await self._save(keys=self._keys(), args=args) and self._tenure is not None:
            raise self._tenure.refused()

    async def load(self) -> tuple[CheckpointMeta, CheckpointSteps] | None:
        raw = await self._redis.hgetall(self._key)
        named = {text(k): v for k, v in raw.items()}
        if META_FIELD not in named:
            return None
        steps = {int(k[len(STEP_FIELD) :]): json.loads(v) for k, v in named.items() if k.startswith(STEP_FIELD)}
        return json.loads(named[META_FIELD]), steps

    async def clear(self) -> None:
        if not await self._clear(keys=self._keys(), args=[_fence(self._tenure)]) and self._tenure is not None:
            raise self._tenure.refused()


# The request's own record among the parts compressed with it (a content key is 20 hex digits, never this).
RECORD_FIELD = "record"


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
        compressed = await compress_all({**new, RECORD_FIELD: record.model_dump_json()})
        entry = compressed.pop(RECORD_FIELD)
        pipe = self._redis.pipeline()
        if compressed:
            mapping = cast(dict[FieldT, EncodableT], compressed)
            pipe.hset(self._parts_key, mapping=mapping)
        pipe.rpush(self._records, entry)
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
