"""Everything a copy of Redis would hand out: every key and every value, of every type."""
from __future__ import annotations

from redis import Redis


def every_value(redis: Redis) -> list[bytes]:
    """Every key name and every value (strings, hash fields and values, list, set, sorted-set and
    stream entries), as Redis returns them."""
    values: list[bytes] = []
    for key in redis.scan_iter(count=500):
        kind = redis.type(key).decode()
        if kind == "string":
            values.append(redis.get(key) or b"")
        elif kind == "hash":
            values += [b for pair in redis.hgetall(key).items() for b in pair]
        elif kind == "list":
            values += redis.lrange(key, 0, -1)
        elif kind == "set":
            values += list(redis.smembers(key))
        elif kind == "zset":
            values += [m for m, _ in redis.zrange(key, 0, -1, withscores=True)]
        elif kind == "stream":
            values += [b for _, fields in redis.xrange(key) for pair in fields.items() for b in pair]
        else:
            raise AssertionError(f"{key!r} is a {kind}: read it here too")
        values.append(key)
    return values


def holding(redis: Redis, secret: str) -> list[bytes]:
    """The keys' names and values that contain `secret` (to show in a failure)."""
    return [v for v in every_value(redis) if secret.encode() in v]
