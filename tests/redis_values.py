"""Everything a copy of Redis would hand out: every key and every value, of every type."""
from __future__ import annotations

import base64
import binascii
import zlib

from redis import Redis


def values_of(redis: Redis, key: bytes | str, *, streams: bool = True) -> list[bytes]:
    """One key's values (strings, hash fields and values, list, set, sorted-set and, unless
    `streams` is off, stream entries); nothing for a key gone meanwhile."""
    kind = redis.type(key).decode()
    if kind == "string":
        return [redis.get(key) or b""]
    if kind == "hash":
        return [b for pair in redis.hgetall(key).items() for b in pair]
    if kind == "list":
        return list(redis.lrange(key, 0, -1))
    if kind == "set":
        return list(redis.smembers(key))
    if kind == "zset":
        return [m for m, _ in redis.zrange(key, 0, -1, withscores=True)]
    if kind == "stream":
        return [b for _, fields in redis.xrange(key) for pair in fields.items() for b in pair] if streams else []
    if kind == "none":
        return []
    raise AssertionError(f"{key!r} is a {kind}: read it here too")


def every_value(redis: Redis) -> list[bytes]:
    """Every key name and every value, as Redis returns them."""
    values: list[bytes] = []
    for key in redis.scan_iter(count=500):
        values += values_of(redis, key)
        values.append(key)
    return values


def holding(redis: Redis, secret: str) -> list[bytes]:
    """The keys' names and values that contain `secret` (to show in a failure)."""
    return [v for v in every_value(redis) if secret.encode() in v]


def _unpacked(value: bytes) -> list[bytes]:
    """A value as stored and, where RQ packed it, unpacked: a job's arguments are a zlib-compressed
    pickle (strings stay readable inside), a result's return value a base64 pickle."""
    found = [value]
    for unpack in (zlib.decompress, lambda v: zlib.decompress(base64.b64decode(v, validate=True)),
                   lambda v: base64.b64decode(v, validate=True)):
        try:
            found.append(unpack(value))
        except (zlib.error, binascii.Error, ValueError):
            pass
    return found


def records_naming(redis: Redis, needles: list[str]) -> list[str]:
    """Every record that names one of `needles`: key names, every value of every type (stream entries
    included), RQ's job hashes and results with their packed arguments and return values opened, and
    every job id in RQ's queue and registries (queued, scheduled, started, finished, failed, deferred,
    canceled) with its job's arguments and description. Each as `key: needle` (or `registry: job id`)."""
    from rq import Queue
    from rq.exceptions import DeserializationError, NoSuchJobError
    from rq.job import Job
    from rq.registry import (
        CanceledJobRegistry,
        DeferredJobRegistry,
        FailedJobRegistry,
        FinishedJobRegistry,
        ScheduledJobRegistry,
        StartedJobRegistry,
    )

    from jobs import keys

    wanted = [n for n in needles if n]
    found: list[str] = []
    for raw in redis.scan_iter(count=500):
        key = raw.decode()
        values = [key.encode(), *(u for v in values_of(redis, raw) for u in _unpacked(v or b""))]
        found += [f"{key}: {n}" for n in wanted if any(n.encode() in v for v in values)]
    queue = Queue(keys.QUEUE, connection=redis)
    kinds = (ScheduledJobRegistry, StartedJobRegistry, FinishedJobRegistry, FailedJobRegistry, DeferredJobRegistry,
             CanceledJobRegistry)
    listed = {"queued": queue.get_job_ids()} | {kind.__name__: kind(queue=queue).get_job_ids(cleanup=False)
                                               for kind in kinds}
    for where, job_ids in listed.items():
        for job_id in job_ids:
            words = [job_id]
            try:
                job = Job.fetch(job_id, connection=redis)
                words += [str(a) for a in job.args] + [job.description or ""]
            except (NoSuchJobError, DeserializationError):
                pass
            found += [f"{where}: {job_id} ({n})" for n in wanted if any(n in w for w in words)]
    return found
