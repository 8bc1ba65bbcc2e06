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
    "SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET", "SLACK_STATE_SECRET", "SLACK_REDIRECT_URI", "DEEPTHREAD_TOKEN_KEY",
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
    # The scripted policies write placeholder claims ("Claim a of finding 3 holds [s1]") that no source
    # supports, and the claim check would send them back: off unless a test turns it on
    # (tests/e2e/test_claim_check.py runs it as deployed, on).
    env["DEEPTHREAD_CLAIM_CHECK"] = "off"
    env.update(values)
    env["PYTHONPATH"] = str(ROOT)
    return env


@dataclass
class Stack:
    events_url: str
    env: dict[str, str]
    logs: Path


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (a worker's work-horse)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def kill_tree(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process and its children at once, like a lost machine (RQ puts the work-horse in
    a process group of its own, so a group kill would miss it)."""
    import signal

    for pid in [process.pid, *children(process.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait(10)


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

    def pause(self) -> None:
        """SIGSTOP: the server holds its connections but answers nothing (a stalled VM, a long
        fork or swap storm); its clock keeps going, so keys expire meanwhile."""
        import signal

        assert self._process is not None
        self._process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        import signal

        assert self._process is not None
        self._process.send_signal(signal.SIGCONT)


def _redis_answers(port: int) -> bool:
    from redis import Redis
    from redis.exceptions import RedisError

    try:
        return bool(Redis(port=port, socket_timeout=1, socket_connect_timeout=1).ping())
    except RedisError:
        return False


class SentinelTopology:
    """What a team runs past one machine, on loopback: a Redis primary, a replica of it and three
    sentinels (the same `redis-server` binary in sentinel mode, quorum 2) watching service
    `mymaster`. `kill_primary()` SIGKILLs the primary; `wait_for_failover()` returns once the
    sentinels have promoted the replica. `url` is what REDIS_URL says for it.

    The data servers refuse writes while no replica copies them (min-replicas-to-write 1), as
    docs/operating.md asks of a deployment. A test that kills the primary and never brings a server
    back passes `min_replicas_to_write=0`: its one survivor could take no write."""

    SERVICE = "mymaster"
    # The sentinels call the primary down after 1 s without an answer; a failover ends within ~5 s.
    DOWN_AFTER_MS = 1000
    FAILOVER_TIMEOUT_MS = 5000

    MIN_REPLICAS_MAX_LAG = 10

    def __init__(self, directory: Path, *, db: int = 0, min_replicas_to_write: int = 1,
                 down_after_ms: int = DOWN_AFTER_MS) -> None:
        self.directory = directory
        self.min_replicas_to_write = min_replicas_to_write
        self.down_after_ms = down_after_ms
        self.primary_port, self.replica_port = free_port(), free_port()
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.url = "redis+sentinel://" + ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports) + \
            f"/{self.SERVICE}/{db}"
        self._servers: dict[int, subprocess.Popen[bytes]] = {}

    def _start(self, port: int, *args: str) -> None:
        import shutil

        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed: apt-get install redis-server"
        workdir = self.directory / str(port)
        workdir.mkdir(parents=True, exist_ok=True)
        log = (workdir / "redis.log").open("wb")
        self._servers[port] = subprocess.Popen([binary, *args], stdout=log, stderr=subprocess.STDOUT, cwd=workdir)

    def _data_server_options(self) -> list[str]:
        # A replica syncs at once (Redis waits 5 s by default to batch replicas into one transfer):
        # until it has, the primary takes no writes, and a failover then would promote an empty one.
        return ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0",
                "--min-replicas-to-write", str(self.min_replicas_to_write),
                "--min-replicas-max-lag", str(self.MIN_REPLICAS_MAX_LAG)]

    def start(self) -> SentinelTopology:
        base = self._data_server_options()
        self._start(self.primary_port, "--port", str(self.primary_port), *base)
        self._start(self.replica_port, "--port", str(self.replica_port), *base,
                    "--replicaof", "127.0.0.1", str(self.primary_port))
        wait_for(lambda: _redis_answers(self.primary_port) and _redis_answers(self.replica_port), STARTUP_SECONDS,
                 "the primary and its replica to answer")
        for port in self.sentinel_ports:
            conf = self.directory / f"sentinel-{port}.conf"  # sentinels rewrite their file: one each
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.directory}\n"
                f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.primary_port} 2\n"
                f"sentinel down-after-milliseconds {self.SERVICE} {self.down_after_ms}\n"
                f"sentinel failover-timeout {self.SERVICE} {self.FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {self.SERVICE} 1\n")
            self._start(port, str(conf), "--sentinel")
        wait_for(self._ready, 30, "the sentinels to see the primary, its replica and each other")
        return self

    def _ready(self) -> bool:
        from redis import Redis
        from redis.exceptions import RedisError

        try:
            for port in self.sentinel_ports:
                master = Redis(port=port, socket_timeout=1).sentinel_master(self.SERVICE)
                if master["num-other-sentinels"] < 2 or master["num-slaves"] < 1:
                    return False
            link = Redis(port=self.replica_port, socket_timeout=1).info("replication")
            primary = Redis(port=self.primary_port, socket_timeout=1).info("replication")
            return link.get("master_link_status") == "up" and (
                int(primary.get("min_slaves_good_slaves", 1)) >= self.min_replicas_to_write)
        except RedisError:
            return False

    def primary(self) -> tuple[str, int]:
        """The primary as the sentinels name it now."""
        from redis import Redis

        host, port = Redis(port=self.sentinel_ports[0], socket_timeout=1).sentinel_get_master_addr_by_name(
            self.SERVICE)
        return (host.decode() if isinstance(host, bytes) else host), int(port)

    def kill_primary(self) -> int:
        """SIGKILL the current primary, as a lost machine; returns its port."""
        port = self.primary()[1]
        process = self._servers.pop(port)
        process.kill()
        process.wait(10)
        return port

    def wait_for_failover(self, old_port: int, timeout: float = 30) -> int:
        """Wait until the sentinels name a new primary that answers as one; returns its port."""
        from redis import Redis
        from redis.exceptions import RedisError

        def promoted() -> int | None:
            try:
                port = self.primary()[1]
                if port != old_port and Redis(port=port, socket_timeout=1).info("replication")["role"] == "master":
                    return port
            except RedisError:
                pass
            return None

        return wait_for(promoted, timeout, "the sentinels to promote the replica")

    def failover(self) -> int:
        """Ask the sentinels for a failover (SENTINEL FAILOVER, as an operator moves the primary off a
        machine it will restart); returns the old primary's port once a new one answers."""
        from redis import Redis

        old = self.primary()[1]
        Redis(port=self.sentinel_ports[0], socket_timeout=5).execute_command("SENTINEL", "FAILOVER", self.SERVICE)
        self.wait_for_failover(old)
        return old

    def revive(self, port: int) -> None:
        """Start a killed server again on its port as a replica of today's primary (the machine came
        back); the sentinels count it as a replica once it has synced."""
        host, primary = self.primary()
        self._start(port, "--port", str(port), *self._data_server_options(), "--replicaof", host, str(primary))
        wait_for(lambda: _redis_answers(port), STARTUP_SECONDS, f"the revived redis-server on {port} to answer")

    def ports(self) -> list[int]:
        """The data servers running now (primary and replicas)."""
        return sorted(p for p in self._servers if p not in self.sentinel_ports)

    def pids(self) -> dict[int, int]:
        """Port → pid of every server running now, sentinels included."""
        return {port: process.pid for port, process in self._servers.items()}

    def stop(self) -> None:
        for process in self._servers.values():
            stop_process(process, grace=10)
        self._servers.clear()
