"""Redis connections that ride out a Redis restart: one place, used by serve, workers and jobs."""

from __future__ import annotations

from redis import Redis
from redis.asyncio import BlockingConnectionPool
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import EqualJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

__all__ = ["connect", "connect_async", "text"]


def text(value: bytes | str) -> str:
    """A value read from Redis as text, whichever way the client was opened."""
    return value.decode() if isinstance(value, bytes) else value


# A Redis restart (a deploy, a crash with its append-only file reloaded) takes seconds. Every
# command of serve and the worker waits it out: reconnect, doubling the wait from the first to
# the largest, each wait jittered (half fixed, half random) so processes do not return in
# lockstep; 17 to 35 s in all before the error reaches the caller.
REDIS_RETRIES = 20
POOL_WAIT_SECONDS = 20.0
REDIS_FIRST_WAIT_SECONDS = 0.1
REDIS_MAX_WAIT_SECONDS = 2.0
# Refused or reset connections, and LOADING while the append-only file is read back (a subclass).
REDIS_RETRY_ON = (RedisConnectionError, RedisTimeoutError)


def connect(url: str) -> Redis:
    """A Redis client that reconnects with backoff when the server goes away and comes back."""
    backoff = EqualJitterBackoff(cap=REDIS_MAX_WAIT_SECONDS, base=REDIS_FIRST_WAIT_SECONDS)
    return Redis.from_url(url, retry=Retry(backoff, REDIS_RETRIES, supported_errors=REDIS_RETRY_ON))


def connect_async(url: str, *, max_connections: int | None = None) -> AsyncRedis:
    """The asyncio twin of `connect`. With `max_connections`, callers beyond it wait for a free
    connection (up to POOL_WAIT_SECONDS) instead of failing with "Too many connections": a burst
    of events must queue for Redis, not skip it."""
    backoff = EqualJitterBackoff(cap=REDIS_MAX_WAIT_SECONDS, base=REDIS_FIRST_WAIT_SECONDS)
    retry = AsyncRetry(backoff, REDIS_RETRIES, supported_errors=REDIS_RETRY_ON)
    if max_connections is None:
        return AsyncRedis.from_url(url, retry=retry)
    pool = BlockingConnectionPool.from_url(url, max_connections=max_connections, timeout=POOL_WAIT_SECONDS)
    return AsyncRedis(connection_pool=pool, retry=retry)
