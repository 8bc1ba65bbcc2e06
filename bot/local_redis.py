"""The embedded default: a private redis-server for `deepthread up` when REDIS_URL is unset."""
from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time

from redis import Redis
from redis.exceptions import RedisError

START_TIMEOUT_SECONDS = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalRedis:
    """Starts redis-server on loopback in a temporary directory; stops it on close."""

    def __init__(self, *, persist_dir: str | None = None) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._tmp = tempfile.TemporaryDirectory(prefix="deepthread-redis-") if persist_dir is None else None
        self._dir = persist_dir or (self._tmp.name if self._tmp else ".")
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> "LocalRedis":
        binary = shutil.which("redis-server")
        if not binary:
            raise RuntimeError("redis-server is not installed: apt-get install redis-server, or set REDIS_URL")
        self._process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self._dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        client = Redis(port=self.port)
        while time.monotonic() < deadline:
            try:
                client.ping()
                return self
            except RedisError:
                if self._process.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self._process and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()
        if self._tmp:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "LocalRedis":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
