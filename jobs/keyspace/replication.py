"""Whether what the primary took has reached a replica: a deletion that must hold after a failover.

Redis replicates asynchronously: a primary acknowledges a DEL before its replica has it, and a
primary demoted in a failover (or one that dies) hands over to a replica that may still hold what
was deleted. A write that is lost that way is done again by its writer (`durably`, connection.py);
a deletion that is lost brings back what a person asked to be forgotten, with no one to notice.
So a forget waits, as WAIT would, until a replica of the primary the sentinels name has every write
that primary took, and does its deletions again if that primary changed meanwhile.

WAIT itself counts only the writes of the connection it is sent on; a forget's deletions go over
several pooled connections, so the replicas' acknowledged offsets are read instead (each replica
acknowledges every second).
"""

from __future__ import annotations

import time

from redis import Redis
from redis.exceptions import RedisError
from redis.sentinel import SentinelConnectionPool

from .connection import ask_primary, text

__all__ = ["REPLICA_POLL_SECONDS", "Primary", "primary_of", "replicated"]

# How often a waiting forget reads the primary's replication offsets (replicas acknowledge each second).
REPLICA_POLL_SECONDS = 0.2

Primary = tuple[str, int]


def primary_of(redis: Redis) -> Primary | None:
    """The primary the sentinels name now; None with one Redis, or when no sentinel answers."""
    pool = redis.connection_pool
    if not isinstance(pool, SentinelConnectionPool):
        return None
    try:
        host, port = pool.get_master_address()
    except (RedisError, OSError, TypeError, ValueError):
        return None
    return (str(host), int(port)) if host and port else None


def _offsets(raw: bytes | str) -> tuple[int, list[int]]:
    """The primary's replication offset and each replica's acknowledged offset, from INFO replication."""
    offset, replicas = -1, []
    for line in text(raw).splitlines():
        name, _, value = line.partition(":")
        if name == "master_repl_offset":
            offset = int(value)
        elif name.startswith("slave") and name[5:].isdigit():
            fields = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
            if fields.get("state") == "online" and fields.get("offset", "").isdigit():
                replicas.append(int(fields["offset"]))
    return offset, replicas


def replicated(redis: Redis, since: Primary | None, timeout: float) -> bool:
    """Whether every write so far is on a replica of the primary the sentinels name, and that primary
    is still `since` (the one named before the writes began: a new one may have lost them); waits up
    to `timeout`. True with one Redis: there is no replica to lose them to."""
    if not isinstance(redis.connection_pool, SentinelConnectionPool):
        return True
    deadline = time.monotonic() + timeout
    target: int | None = None
    while time.monotonic() < deadline:
        now = primary_of(redis)
        if now is not None and since is not None and now != since:
            return False  # a failover since the writes began: the new primary may never have had them
        raw = ask_primary(redis, "INFO", "replication")
        if now is not None and raw is not None:
            offset, replicas = _offsets(raw)
            target = offset if target is None else target
            if target >= 0 and any(acked >= target for acked in replicas):
                return True
        time.sleep(REPLICA_POLL_SECONDS)
    return False
