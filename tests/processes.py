"""Starting the real `deepthread` processes for end-to-end tests, and waiting on them."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx

from tests.fakes.server import free_port

SIGNING_SECRET = "test-signing-secret"
DEEPTHREAD = [sys.executable, "-m", "bot.cli"]
ROOT = Path(__file__).resolve().parent.parent
# Variables our code reads: cleared so a developer's shell cannot leak into a test.
OUR_VARIABLES = (
    "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "SLACK_API_URL", "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL", "DEEPTHREAD_MODEL", "DEEPTHREAD_SMALL_MODEL", "REDIS_URL", "DEEPTHREAD_SEARCH",
    "BRAVE_API_KEY", "TAVILY_API_KEY", "SEARXNG_URL", "DEEPTHREAD_FETCH_ALLOW", "PORT", "DEEPTHREAD_CONTEXT_TOKENS",
)

T = TypeVar("T")
# How long a process may take to start: it imports the whole stack, which takes seconds alone and
# several times that on a machine shared with other test runs. A failure still fails fast: the
# waits below raise at once when the process exits.
STARTUP_SECONDS = 60.0


def wait_for(condition: Callable[[], T], timeout: float = 20.0, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def environment(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OUR_VARIABLES}
    env.update(values)
    env["PYTHONPATH"] = str(ROOT)
    return env


@dataclass
class Stack:
    events_url: str
    env: dict[str, str]
    logs: Path


def stop_process(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """Terminate a child we started, then kill it if it lingers."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def running(args: list[str], env: dict[str, str], log: Path, grace: float = 10.0,
            new_session: bool = False) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(DEEPTHREAD + args, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                   start_new_session=new_session)
        try:
            yield process
        finally:
            stop_process(process, grace)


def wait_listening(port: int, serve: subprocess.Popen[bytes], log: Path, *, command: str = "serve",
                   timeout: float = STARTUP_SECONDS) -> str:
    """Wait until `deepthread serve` (or `up`) answers its health check; returns its base URL."""
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if serve.poll() is not None:
            raise AssertionError(f"deepthread {command} exited:\n" + log.read_text())
        try:
            return httpx.get(f"{base}/healthz", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(healthy, timeout, f"deepthread {command} to listen")
    return base


@contextmanager
def deepthread_stack(tmp: Path, *, redis_url: str, slack_url: str, model_url: str, web_url: str,
                     **extra: str) -> Iterator[Stack]:
    """`deepthread serve` (HTTP mode) and one `deepthread worker`, as separate processes."""
    port = free_port()
    env = environment(**extra,
        SLACK_BOT_TOKEN="xoxb-test-token", SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=f"{slack_url}/api/",
        ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=model_url, REDIS_URL=redis_url,
        DEEPTHREAD_SEARCH="searxng", SEARXNG_URL=web_url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1", PORT=str(port),
    )
    with running(["serve"], env, tmp / "serve.log") as serve, running(["worker"], env, tmp / "worker.log"):
        base = wait_listening(port, serve, tmp / "serve.log")
        yield Stack(events_url=f"{base}/slack/events", env=env, logs=tmp)


class RedisWithAOF:
    """A redis-server run as production runs it (append-only file, fsync every second) that a
    test can stop and start again on the same port and data directory: a Redis restart."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisWithAOF:
        import shutil

        from redis import Redis
        from redis.exceptions import RedisError

        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed: apt-get install redis-server"
        self.directory.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--appendonly", "yes", "--appendfsync", "everysec", "--save", ""],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = Redis(port=self.port)

        def answers() -> bool:
            try:
                return bool(client.ping())
            except RedisError:
                return False

        wait_for(answers, STARTUP_SECONDS, "redis-server to answer")
        return self

    def stop(self) -> None:
        """SIGTERM: Redis flushes its append-only file and exits, as in a deploy or a restart."""
        if self._process is not None:
            stop_process(self._process, grace=20)
            self._process = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None
