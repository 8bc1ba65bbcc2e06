"""Everything a copy of Redis would hand out: every key and every value, of every type."""
from __future__ import annotations

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
