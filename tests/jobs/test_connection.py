"""REDIS_URL and the connections made from it (jobs/keyspace/connection.py): sentinel URLs parsed into their
parts, bad ones refused with what to write instead, and real clients that carry on across a Sentinel
failover (a real primary, replica and three sentinels on loopback) or give up on a server that stopped
answering."""
from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.exceptions import TimeoutError as RedisTimeoutError

from jobs.keyspace.connection import RedisUrlError, connect, connect_async, parse_redis_url, redact
from tests.processes import SentinelTopology


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[SentinelTopology]:
    # The killed primary never comes back here: its survivor alone must take the writes.
    topology = SentinelTopology(tmp_path / "sentinel", min_replicas_to_write=0).start()
    yield topology
    topology.stop()


# --- parsing ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "sentinels", "service", "db", "tls"),
    [
        ("redis+sentinel://10.0.0.1:26379/mymaster", (("10.0.0.1", 26379),), "mymaster", 0, False),
        ("redis+sentinel://a:1,b:2,c:3/mymaster/4", (("a", 1), ("b", 2), ("c", 3)), "mymaster", 4, False),
        ("rediss+sentinel://s1.internal/cache/2", (("s1.internal", 26379),), "cache", 2, True),
        ("redis+sentinel://[::1]:26380/mymaster/", ((("::1", 26380)),), "mymaster", 0, False),
    ],
)
def test_a_sentinel_url_names_its_sentinels_service_database_and_tls(url, sentinels, service, db, tls) -> None:
    target = parse_redis_url(url)
    assert (target.topology, target.sentinels, target.service, target.db, target.tls) == (
        "sentinel", sentinels, service, db, tls)


def test_credentials_go_to_the_servers_and_the_sentinels_own_ones_are_options() -> None:
    target = parse_redis_url("redis+sentinel://app:s%40cret@h1:26379,h2:26379/mymaster/1"
                             "?sentinel_password=watch&sentinel_username=ops")
    assert target.username == "app" and target.password is not None
    assert target.password.get_secret_value() == "s@cret"
    assert target.sentinel_username == "ops" and target.sentinel_password is not None
    assert "s@cret" not in target.describe() and "watch" not in target.describe()
    assert "s@cret" not in repr(target)


@pytest.mark.parametrize("url", ["redis://localhost:6379/0", "rediss://user:pw@host:6380/1", "unix:///tmp/r.sock"])
def test_plain_urls_are_handed_to_redis_py_as_they_are(url: str) -> None:
    target = parse_redis_url(url)
    assert target.topology == "single" and target.url == url
    assert target.tls == url.startswith("rediss")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://localhost:6379", "is not a Redis URL: use redis://host:6379/0"),
        ("localhost:6379", "is not a Redis URL"),
        ("redis+sentinel:///mymaster", "names no sentinel: list them as host:port"),
        ("redis+sentinel://h1:26379", "names no service: add the name the sentinels monitor"),
        ("redis+sentinel://h1:26379/", "names no service"),
        ("redis+sentinel://h1:port/mymaster", "the port in 'h1:port' is not a number"),
        ("redis+sentinel://h1:70000/mymaster", "out of range"),
        ("redis+sentinel://h1:26379/mymaster/zero", "the service name and, optionally, the database number"),
        ("redis+sentinel://h1:26379/a/1/b", "the service name and, optionally, the database number"),
        ("redis+sentinel://h1:26379/mymaster?timeout=3", "unknown option timeout; a sentinel URL takes sentinel_username"),
    ],
)
def test_a_bad_redis_url_is_refused_with_what_to_write_instead(url: str, says: str) -> None:
    with pytest.raises(RedisUrlError) as refused:
        parse_redis_url(url)
    assert says in str(refused.value)
    assert str(refused.value).startswith("REDIS_URL=")


def test_a_refused_url_never_shows_its_password() -> None:
    with pytest.raises(RedisUrlError) as refused:
        parse_redis_url("redis+sentinel://app:hunter2@h1:26379")
    assert "hunter2" not in str(refused.value)
    assert redact("rediss://u:hunter2@host:6380/0") == "rediss://…@host:6380/0"


hosts = st.lists(
    st.tuples(st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z0-9-]{1,10}){0,2}", fullmatch=True),
              st.integers(1, 65535)),
    min_size=1, max_size=5)


@given(hosts=hosts, service=st.from_regex(r"[A-Za-z0-9_-]{1,30}", fullmatch=True), db=st.integers(0, 15),
       user=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12),
       password=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12), tls=st.booleans())
def test_every_sentinel_url_written_by_the_rules_reads_back_the_same(hosts, service, db, user, password,
                                                                      tls) -> None:
    from urllib.parse import quote

    url = (f"{'rediss' if tls else 'redis'}+sentinel://{quote(user, safe='')}:{quote(password, safe='')}@"
           + ",".join(f"{h}:{p}" for h, p in hosts) + f"/{service}/{db}")
    target = parse_redis_url(url)
    assert target.sentinels == tuple(hosts) and target.service == service and target.db == db
    assert target.username == user and target.password is not None and target.password.get_secret_value() == password
    assert target.tls == tls
    assert redact(url).split("://", 1)[1].startswith("…@"), "the credentials are left out of what is shown"


# --- real connections -------------------------------------------------------------------------------


def test_commands_carry_on_across_a_sentinel_failover(sentinels: SentinelTopology) -> None:
    redis = connect(sentinels.url)
    redis.set("before", "1")
    # Replication is asynchronous: a write the replica has not had yet is lost with the primary.
    assert redis.wait(1, 10_000) == 1
    old = sentinels.kill_primary()
    assert redis.set("during", "2") is True, "the command waited for the new primary"
    assert sentinels.wait_for_failover(old) != old
    assert redis.get("before") == b"1" and redis.get("during") == b"2"


def test_async_commands_and_a_blocking_pool_carry_on_across_a_failover(sentinels: SentinelTopology) -> None:
    async def scenario() -> list[bytes | None]:
        # The limiter's kind of client: callers past the pool's size wait for a connection.
        redis = connect_async(sentinels.url, max_connections=3)
        try:
            await asyncio.gather(*(redis.set(f"k{i}", i) for i in range(20)))
            assert await redis.wait(1, 10_000) == 1  # on the replica too (replication is asynchronous)
            sentinels.kill_primary()
            await asyncio.gather(*(redis.set(f"after{i}", i) for i in range(20)))
            return [await redis.get("k7"), await redis.get("after19")]
        finally:
            await redis.aclose()

    assert asyncio.run(scenario()) == [b"7", b"19"]


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never answers: a paused or wedged Redis."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(2)
    for conn in held:
        conn.close()
    listener.close()


def test_a_server_that_stops_answering_is_given_up_on_not_waited_for_forever(silent_server: int) -> None:
    redis = connect(f"redis://127.0.0.1:{silent_server}/0", retry_window=0, socket_timeout=0.05)
    with pytest.raises(RedisTimeoutError):
        redis.get("anything")

    async def scenario() -> None:
        client = connect_async(f"redis://127.0.0.1:{silent_server}/0", retry_window=0, socket_timeout=0.05)
        try:
            await client.get("anything")
        finally:
            await client.aclose()

    with pytest.raises(RedisTimeoutError):
        asyncio.run(scenario())
