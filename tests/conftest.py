"""Shared fixtures: a real redis-server, and the fake Slack / Anthropic / web servers."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import ResearchPolicy
from tests.fakes.scopes import manifest_bot_scopes
from tests.fakes.server import ServerThread, free_port
from tests.fakes.slack import FakeSlack
from tests.fakes.web import FakeWeb
from tests.paths import PAGES
from tests.processes import RedisWithAOF, Stack, deepthread_stack

# Generated tests explore anew on every developer run (that is how they find bugs); in CI they
# replay the same examples, so a submission's result does not depend on the draw. A bug found
# locally is pinned with @example and so runs in CI too.
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile("ci" if os.environ.get("CI") else "default")



@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed: run .ci/run, or apt-get install redis-server")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="deepthread-test-redis-")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    client = Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except Exception:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail("redis-server did not start")
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}"
    process.terminate()
    process.wait(10)
    shutil.rmtree(workdir, ignore_errors=True)


_next_db = iter(range(1, 16))


@pytest.fixture
def redis_url(redis_server: str) -> Iterator[str]:
    """A flushed database of the session's redis-server for one test."""
    url = f"{redis_server}/{next(_next_db, 15)}"
    client = Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()


@pytest.fixture
def redis(redis_url: str) -> Redis:
    return Redis.from_url(redis_url)


@pytest.fixture
def fake_model() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic(ResearchPolicy())
    with ServerThread(fake.app()) as server:
        fake.url = server.url  # type: ignore[attr-defined]
        yield fake


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    fake = FakeSlack()
    with ServerThread(fake.app()) as server:
        fake.url = server.url  # type: ignore[attr-defined]
        yield fake
    # Every test's Slack traffic passes the scope check: the manifest covers every method called
    # (a test that takes scopes away on purpose checks its refusals itself).
    if fake.scopes == manifest_bot_scopes():
        assert not fake.scope_refusals, f"Slack calls refused for a scope missing from manifest.yml: {fake.scope_refusals}"


@pytest.fixture
def fake_web() -> Iterator[FakeWeb]:
    web = FakeWeb.from_directory(PAGES, prefix="/pages/")
    with ServerThread(web.app()) as server:
        web.url = server.url  # type: ignore[attr-defined]
        yield web


@pytest.fixture
def redis_aof(tmp_path: Path) -> Iterator[RedisWithAOF]:
    """A redis-server of the test's own, with an append-only file, that the test may restart."""
    server = RedisWithAOF(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture
def stack(tmp_path: Path, redis_url: str, fake_slack, fake_model, fake_web) -> Iterator[Stack]:
    """`deepthread serve` (HTTP mode) and one worker against the fakes."""
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url,
                          model_url=fake_model.url, web_url=fake_web.url) as s:
        yield s


@pytest.fixture
async def async_redis(redis_url: str) -> AsyncIterator[AsyncRedis]:
    """An asyncio client of the test's database (the publisher's and the limiter's kind)."""
    connection = AsyncRedis.from_url(redis_url)
    yield connection
    await connection.aclose()


@pytest.fixture
def sealing_key() -> Iterator[str]:
    """This process seals action tokens with a fresh key (as serve and the workers do from their
    settings, jobs/records/sealing.py); back to sealing nothing afterwards."""
    from cryptography.fernet import Fernet

    from jobs.records import sealing as sealing_module

    key = Fernet.generate_key().decode()
    sealing_module.configure(key)
    yield key
    sealing_module.configure(None)
