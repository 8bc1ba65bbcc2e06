"""Redis connections for every process (serve, workers and their jobs, the CLI): the one place
that reads REDIS_URL and opens a client from it.

    redis://[user:password@]host:port/db            one Redis (rediss:// for TLS, unix:// a socket)
    redis+sentinel://[user:password@]h1:p1[,h2:p2…]/service[/db]
    rediss+sentinel://…                              the same, TLS to the sentinels and the primary

A sentinel URL becomes `Sentinel(...).master_for(service)`: the client asks the sentinels where the
primary is, and asks again when the primary changes (a failover), so a command that met the old
primary's death reconnects to the new one. `user:password` authenticate to the Redis servers; the
sentinels' own credentials, when they have any, are `?sentinel_username=…&sentinel_password=…`.

Every connection has socket timeouts and TCP keepalive, so a primary that died without closing its
sockets is noticed in seconds, not when the kernel gives up; and every command is retried across a
restart or a failover for RETRY_WINDOW_SECONDS (jittered, doubling waits) before the error reaches
the caller. A run's lease outlives that window (jobs/control/ownership.py), so an outage the commands ride
out never costs a run its owner.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import BaseModel, ConfigDict, SecretStr
from redis import Redis
from redis.asyncio import BlockingConnectionPool
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.client import Pipeline as AsyncPipeline
from redis.asyncio.retry import Retry as AsyncRetry
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.asyncio.sentinel import SentinelConnectionPool as AsyncSentinelPool
from redis.asyncio.sentinel import SentinelManagedConnection as AsyncSentinelManagedConnection
from redis.asyncio.sentinel import SentinelManagedSSLConnection as AsyncSentinelManagedSSLConnection
from redis.backoff import EqualJitterBackoff
from redis.client import Pipeline
from redis.commands.core import AsyncScript, Script
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelConnectionPool, SentinelManagedConnection, SentinelManagedSSLConnection
from redis.utils import SENTINEL

__all__ = [
    "RETRY_WINDOW_SECONDS",
    "RedisTarget",
    "RedisUrlError",
    "connect",
    "connect_async",
    "durably",
    "on_primary",
    "parse_redis_url",
    "redact",
    "text",
]

T = TypeVar("T")
log = logging.getLogger(__name__)


def text(value: bytes | str) -> str:
    """A value read from Redis as text, whichever way the client was opened."""
    return value.decode() if isinstance(value, bytes) else value


# A restart (a deploy, a crash with its append-only file reloaded) or a Sentinel failover (the
# sentinels agree the primary is down, then promote a replica: seconds with down-after-milliseconds
# of a few seconds) takes seconds. Every command waits it out, doubling the wait from the first to
# the largest, each jittered (half fixed, half random) so processes do not return in lockstep, for
# at most this long after its first failure.
RETRY_WINDOW_SECONDS = 30.0
REDIS_FIRST_WAIT_SECONDS = 0.1
REDIS_MAX_WAIT_SECONDS = 2.0
POOL_WAIT_SECONDS = 20.0
# A reply slower than this means the server is gone (a dead primary, a paused one): reconnect. Our
# longest blocking read is the publisher's 250 ms XREAD; RQ raises it for its own 15 s dequeue.
SOCKET_TIMEOUT_SECONDS = 5.0
CONNECT_TIMEOUT_SECONDS = 3.0
# Sentinels answer from memory; one that does not answer within this is skipped for the next.
SENTINEL_TIMEOUT_SECONDS = 1.0
# An idle pooled connection is PINGed before use after this long, so a stale one is replaced
# before a command is sent on it rather than after. Longer than a run's lease renewal (every 30 s):
# at 15 s every renewal of a run waiting on the model was a PING and a script, 2 of an idle run's ~12
# commands a minute. A dead peer is found by TCP keepalive within ~11 s regardless (KEEPALIVE).
HEALTH_CHECK_SECONDS = 60
# TCP keepalive: probe an idle connection after 5 s, every 2 s, give up after 3 misses (~11 s).
KEEPALIVE = {"TCP_KEEPIDLE": 5, "TCP_KEEPINTVL": 2, "TCP_KEEPCNT": 3}
# Refused or reset connections, LOADING while a restarted server reads its file, no primary known
# to the sentinels yet, and a demoted primary answering READONLY: all pass once Redis is back.
REDIS_RETRY_ON: tuple[type[Exception], ...] = (RedisConnectionError, RedisTimeoutError, socket.timeout)

SENTINEL_SCHEMES = {"redis+sentinel": False, "rediss+sentinel": True}
PLAIN_SCHEMES = ("redis", "rediss", "unix")
# Query options a sentinel URL accepts (plain URLs take redis-py's own).
SENTINEL_QUERY = ("sentinel_username", "sentinel_password", "ssl_cert_reqs", "ssl_ca_certs")
DEFAULT_SENTINEL_PORT = 26379
EXAMPLE = "redis+sentinel://host1:26379,host2:26379,host3:26379/mymaster/0"


class RedisUrlError(ValueError):
    """REDIS_URL cannot be used; the message says what to write instead."""


class RedisTarget(BaseModel):
    """Where REDIS_URL points: one server, or a primary found through sentinels."""

    model_config = ConfigDict(frozen=True)

    topology: Literal["single", "sentinel"]
    url: str = ""  # a plain URL, handed to redis-py as it is
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    username: str | None = None
    password: SecretStr | None = None
    sentinel_username: str | None = None
    sentinel_password: SecretStr | None = None
    tls: bool = False
    ssl_options: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        """One line for logs and `doctor`: the topology, never a password."""
        if self.topology == "single":
            return f"one Redis at {redact(self.url)}"
        hosts = ", ".join(f"{h}:{p}" for h, p in self.sentinels)
        tls = " over TLS" if self.tls else ""
        return (
            f"Sentinel service {self.service!r} (db {self.db}) through {len(self.sentinels)} sentinels ({hosts}){tls}"
        )


def redact(url: str) -> str:
    """The URL without its credentials: redis://…@host:6379/0."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest:
        return f"{scheme}://…@{rest.rsplit('@', 1)[1]}"
    return url


def parse_redis_url(url: str) -> RedisTarget:
    """Read REDIS_URL; RedisUrlError says what is wrong and what to write."""
    url = url.strip()
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme in PLAIN_SCHEMES:
        return RedisTarget(topology="single", url=url, tls=scheme == "rediss")
    if scheme not in SENTINEL_SCHEMES:
        raise RedisUrlError(
            f"REDIS_URL={redact(url)} is not a Redis URL: use redis://host:6379/0 (rediss:// for TLS), "
            f"or {EXAMPLE} for Sentinel"
        )
    parts = urlsplit(url)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":") if userinfo else ("", "", "")
    sentinels = tuple(_host_port(entry, url) for entry in hosts.split(",") if entry.strip())
    if not sentinels:
        raise RedisUrlError(f"REDIS_URL={redact(url)} names no sentinel: list them as host:port, e.g. {EXAMPLE}")
    path = [p for p in parts.path.split("/") if p]
    if not path:
        raise RedisUrlError(
            f"REDIS_URL={redact(url)} names no service: add the name the sentinels monitor, e.g. {EXAMPLE}"
        )
    if len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise RedisUrlError(
            f"REDIS_URL={redact(url)}: after the hosts come the service name and, optionally, the database "
            f"number (…/mymaster/0)"
        )
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    unknown = sorted(set(query) - set(SENTINEL_QUERY))
    if unknown:
        raise RedisUrlError(
            f"REDIS_URL={redact(url)}: unknown option {', '.join(unknown)}; a sentinel URL takes "
            + ", ".join(SENTINEL_QUERY)
        )
    return RedisTarget(
        topology="sentinel",
        sentinels=sentinels,
        service=unquote(path[0]),
        db=int(path[1]) if len(path) == 2 else 0,
        username=unquote(username) or None,
        password=SecretStr(unquote(password)) if password else None,
        sentinel_username=query.get("sentinel_username") or None,
        sentinel_password=SecretStr(query["sentinel_password"]) if query.get("sentinel_password") else None,
        tls=SENTINEL_SCHEMES[scheme],
        ssl_options=tuple((k, v) for k, v in sorted(query.items()) if k.startswith("ssl_")),
    )


def _host_port(entry: str, url: str) -> tuple[str, int]:
    entry = entry.strip()
    if entry.startswith("["):  # [::1]:26379
        host, _, rest = entry[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, _, port = entry.rpartition(":") if ":" in entry else (entry, "", "")
    if not host:
        raise RedisUrlError(f"REDIS_URL={redact(url)}: {entry!r} is not host:port")
    try:
        number = int(port) if port else DEFAULT_SENTINEL_PORT
    except ValueError:
        raise RedisUrlError(f"REDIS_URL={redact(url)}: the port in {entry!r} is not a number") from None
    if not 0 < number < 65536:
        raise RedisUrlError(f"REDIS_URL={redact(url)}: the port in {entry!r} is out of range")
    return host, number


# --- retrying for a window of time -------------------------------------------------------------


class _WindowRetry(Retry):
    """redis-py's Retry, bounded by time rather than by count: with socket timeouts, a count of
    attempts says nothing about how long a command may hang, and the run lease must outlast it."""

    def __init__(self, window: float) -> None:
        super().__init__(
            EqualJitterBackoff(cap=REDIS_MAX_WAIT_SECONDS, base=REDIS_FIRST_WAIT_SECONDS), -1, REDIS_RETRY_ON
        )
        self.window = window

    def call_with_retry(  # the same call, with a deadline
        self, do: Callable[[], T], fail: Callable[..., Any], is_retryable: Any = None, with_failure_count: bool = False
    ) -> T:
        self._backoff.reset()
        failures, deadline = 0, time.monotonic() + self.window
        while True:
            try:
                return do()
            except self._supported_errors as error:
                if is_retryable and not is_retryable(error):
                    raise
                failures += 1
                fail(error, failures) if with_failure_count else fail(error)
                wait = self._backoff.compute(failures)
                if time.monotonic() + wait > deadline:
                    raise
                time.sleep(wait)


class _AsyncWindowRetry(AsyncRetry):
    """The asyncio twin of _WindowRetry."""

    def __init__(self, window: float) -> None:
        super().__init__(
            EqualJitterBackoff(cap=REDIS_MAX_WAIT_SECONDS, base=REDIS_FIRST_WAIT_SECONDS),
            -1,
            REDIS_RETRY_ON,  # socket.timeout is what a dead peer raises
        )
        self.window = window

    async def call_with_retry(
        self,
        do: Callable[[], Awaitable[T]],
        fail: Callable[..., Any],
        is_retryable: Any = None,
        with_failure_count: bool = False,
    ) -> T:
        import asyncio

        self._backoff.reset()
        failures, deadline = 0, time.monotonic() + self.window
        while True:
            try:
                return await do()
            except self._supported_errors as error:
                if is_retryable and not is_retryable(error):
                    raise
                failures += 1
                await (fail(error, failures) if with_failure_count else fail(error))
                wait = self._backoff.compute(failures)
                if time.monotonic() + wait > deadline:
                    raise
                await asyncio.sleep(wait)


def _keepalive() -> dict[int, int]:
    return {getattr(socket, name): value for name, value in KEEPALIVE.items() if hasattr(socket, name)}


def _options(window: float, socket_timeout: float, *, asynchronous: bool) -> dict[str, Any]:
    return {
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "socket_keepalive": True,
        "socket_keepalive_options": _keepalive(),
        "health_check_interval": HEALTH_CHECK_SECONDS,
        "retry": _AsyncWindowRetry(window) if asynchronous else _WindowRetry(window),
    }


def _sentinel_kwargs(target: RedisTarget) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "socket_timeout": SENTINEL_TIMEOUT_SECONDS,
        "socket_connect_timeout": SENTINEL_TIMEOUT_SECONDS,
        "socket_keepalive": True,
        "socket_keepalive_options": _keepalive(),
    }
    if target.sentinel_username:
        kwargs["username"] = target.sentinel_username
    if target.sentinel_password:
        kwargs["password"] = target.sentinel_password.get_secret_value()
    if target.tls:
        kwargs.update(ssl=True, **dict(target.ssl_options))
    return kwargs


def _server_kwargs(target: RedisTarget) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"db": target.db}
    if target.username:
        kwargs["username"] = target.username
    if target.password:
        kwargs["password"] = target.password.get_secret_value()
    if target.tls:
        kwargs.update(ssl=True, **dict(target.ssl_options))
    return kwargs


# --- Sentinel-managed connections that ask where the primary is on every reconnect ----------------
# redis-py's managed connections look the primary up only when the pool hands out a new connection;
# a command retried on the same connection reconnects to the address it had, the dead primary, until
# the retries run out. Asking the sentinels in the socket connect itself covers every path.


# A primary configured with min-replicas-to-write (docs/operating.md) refuses writes with NOREPLICAS
# once its replica has left it, as when the sentinels promote that replica: the moment both would
# otherwise take writes, and the old one's be lost. For a client that is a primary on its way out, like
# READONLY from a demoted one: reconnect, ask the sentinels again, retry within the window.
NO_REPLICAS = "NOREPLICAS"
PRIMARY_WITHOUT_REPLICA = (
    "the Redis primary has no replica taking its writes (a failover under way, or its replica down): "
    "asking the sentinels for the primary again"
)


def _without_replica(error: ResponseError) -> bool:
    return str(error).startswith(NO_REPLICAS)


class _SentinelConnection(SentinelManagedConnection):
    def _connect(self) -> Any:
        if self.connection_pool.is_master:
            self.host, self.port = self.connection_pool.get_master_address()
        return super()._connect()

    def read_response(
        self,
        disable_decoding: Any = False,
        *,
        timeout: float | object = SENTINEL,
        disconnect_on_error: bool | None = True,
        push_request: bool | None = False,
    ) -> Any:
        # redis-py's sync Sentinel connection reads with disconnect_on_error=False, unlike every other
        # connection class: a read cut short by an exception (RQ's StopRequested raised by SIGTERM into a
        # worker's BLPOP, a job's timeout) went back to the pool with its reply still coming, and the next
        # command on it read that reply as its own (seen in bench.soak: a hand-back's enqueue failed with
        # "Wrong number of response items", and the dead BLPOP popped the job it had just pushed).
        try:
            return super().read_response(
                disable_decoding, timeout=timeout, disconnect_on_error=disconnect_on_error, push_request=push_request
            )
        except ResponseError as error:
            if not (self.connection_pool.is_master and _without_replica(error)):
                raise
            self.disconnect()
            raise RedisConnectionError(PRIMARY_WITHOUT_REPLICA) from error


class _SentinelSSLConnection(_SentinelConnection, SentinelManagedSSLConnection):
    pass


class _AsyncSentinelConnection(AsyncSentinelManagedConnection):
    async def _connect(self) -> None:
        if self.connection_pool.is_master:
            self.host, self.port = await self.connection_pool.get_master_address()
        await super()._connect()

    async def read_response(
        self,
        disable_decoding: bool = False,
        timeout: float | None = None,
        *,
        disconnect_on_error: float | None = True,  # redis-py's own annotation
        push_request: bool | None = False,
    ) -> Any:
        try:
            return await super().read_response(
                disable_decoding, timeout, disconnect_on_error=disconnect_on_error, push_request=push_request
            )
        except ResponseError as error:
            if not (self.connection_pool.is_master and _without_replica(error)):
                raise
            await self.disconnect()
            raise RedisConnectionError(PRIMARY_WITHOUT_REPLICA) from error


class _AsyncSentinelSSLConnection(_AsyncSentinelConnection, AsyncSentinelManagedSSLConnection):
    pass


# --- Lua scripts, sent whole ---------------------------------------------------------------------
# redis-py runs a registered script by its hash (EVALSHA), loading it where the server has not seen it.
# A command retried across a failover lands on a server whose script cache is empty, after the load:
# NOSCRIPT reached the caller (leases, spend, capacity are scripts). EVAL carries the script itself,
# a few hundred bytes, and the server caches its compilation all the same.


class _Script(Script):
    def __call__(self, keys: Any = None, args: Any = None, client: Any = None) -> Any:
        client = self.registered_client if client is None else client
        if isinstance(client, Pipeline):
            return super().__call__(keys, args, client)
        keys, args = list(keys or []), list(args or [])
        return client.eval(self.script, len(keys), *keys, *args)


class _AsyncScript(AsyncScript):
    async def __call__(self, keys: Any = None, args: Any = None, client: Any = None) -> Any:
        client = self.registered_client if client is None else client
        if isinstance(client, AsyncPipeline):
            return await super().__call__(keys, args, client)
        keys, args = list(keys or []), list(args or [])
        return await client.eval(self.script, len(keys), *keys, *args)


class _Redis(Redis):
    def register_script(self, script: Any) -> Script:
        return _Script(self, script)


class _AsyncRedis(AsyncRedis):
    def register_script(self, script: Any) -> AsyncScript:  # type: ignore[override]  # redis-py types it Script
        return _AsyncScript(self, script)


def connect(
    url: str, *, retry_window: float = RETRY_WINDOW_SECONDS, socket_timeout: float = SOCKET_TIMEOUT_SECONDS
) -> Redis:
    """A Redis client for REDIS_URL that rides out restarts and failovers (see the module docstring).
    `retry_window=0` fails at once (for `doctor`, which must answer quickly)."""
    target = parse_redis_url(url)
    options = _options(retry_window, socket_timeout, asynchronous=False)
    if target.topology == "single":
        return _Redis.from_url(target.url, **options)
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=_sentinel_kwargs(target))
    connection_class = _SentinelSSLConnection if target.tls else _SentinelConnection
    return sentinel.master_for(
        target.service, redis_class=_Redis, connection_class=connection_class, **options, **_server_kwargs(target)
    )


class _BlockingSentinelPool(AsyncSentinelPool, BlockingConnectionPool):
    """A Sentinel-managed pool whose callers wait for a free connection (see connect_async)."""


def connect_async(
    url: str,
    *,
    max_connections: int | None = None,
    retry_window: float = RETRY_WINDOW_SECONDS,
    socket_timeout: float = SOCKET_TIMEOUT_SECONDS,
) -> AsyncRedis:
    """The asyncio twin of `connect`. With `max_connections`, callers beyond it wait for a free
    connection (up to POOL_WAIT_SECONDS) instead of failing with "Too many connections": a burst
    of events must queue for Redis, not skip it."""
    target = parse_redis_url(url)
    options = _options(retry_window, socket_timeout, asynchronous=True)
    blocking: dict[str, Any] = (
        {"max_connections": max_connections, "timeout": POOL_WAIT_SECONDS} if max_connections is not None else {}
    )
    if target.topology == "single":
        if not blocking:
            return _AsyncRedis.from_url(target.url, **options)
        pool = BlockingConnectionPool.from_url(target.url, **blocking, **options)
        return _AsyncRedis(connection_pool=pool, retry=options["retry"])
    sentinel = AsyncSentinel(list(target.sentinels), sentinel_kwargs=_sentinel_kwargs(target))
    pool_class = _BlockingSentinelPool if blocking else AsyncSentinelPool
    return sentinel.master_for(
        target.service,
        redis_class=_AsyncRedis,
        connection_pool_class=pool_class,
        connection_class=_AsyncSentinelSSLConnection if target.tls else _AsyncSentinelConnection,
        **options,
        **blocking,
        **_server_kwargs(target),
    )


# --- writes that must survive a failover ---------------------------------------------------------
# A Sentinel failover promotes the replica before the old primary is told it is one: for that moment
# both accept writes, and what a client still connected to the old one writes is lost when it resyncs
# from the new (seen in bench.soak: a run created then was posted in Slack, and gone from Redis).


def ask_primary(redis: Redis, *command: Any) -> Any:
    """`command`'s answer from the primary the sentinels name now, on a new connection; None with one
    Redis (what it acknowledged is there) or when the sentinels or the primary do not answer."""
    pool = redis.connection_pool
    if not isinstance(pool, SentinelConnectionPool):
        return None
    connection = pool.connection_class(**pool.connection_kwargs)  # connects to the primary named now
    try:
        connection.send_command(*command)
        return connection.read_response()
    except (RedisError, OSError):  # the write stands as acknowledged
        return None
    finally:
        connection.disconnect()


def on_primary(redis: Redis, key: str) -> bool:
    """Whether `key` is on the primary the sentinels name now (one Redis: always)."""
    answer = ask_primary(redis, "EXISTS", key)
    return answer is None or bool(answer)


def reconnect_to_primary(redis: Redis) -> None:
    """Idle pooled connections reconnect to the primary named now (one in use elsewhere meets READONLY
    soon): after a write went to a primary being demoted."""
    redis.connection_pool.disconnect(inuse_connections=False)


def durably(redis: Redis, key: str, write: Callable[[], T], what: str) -> T:
    """`write()`, then once more on the new primary if `key` did not reach it: the write went to a
    primary being demoted. The write must be safe to repeat."""
    result = write()
    if on_primary(redis, key):
        return result
    log.warning(
        "%s was written to a Redis primary that a failover had just replaced; writing it again on the new primary", what
    )
    reconnect_to_primary(redis)
    return write()
