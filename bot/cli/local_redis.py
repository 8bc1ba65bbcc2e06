"""The embedded default: a private redis-server for `deepthread up` when REDIS_URL is unset.

`deepthread up` keeps its Redis data in a data directory with an append-only file, so a
restart keeps every run: a reply in an old thread still continues it. The directory is
`$DEEPTHREAD_DATA_DIR/redis`, else `$XDG_DATA_HOME/deepthread/redis`, else
`~/.local/share/deepthread/redis`. One `deepthread up` at a time may use a directory (a lock
file says so); two redis-servers appending to one file would corrupt it. While it runs, its address
is in ADDRESS_FILE there, so `deepthread inspect` and `forget` find it without REDIS_URL
(`running_url`); the port itself is any free one, so two checkouts never clash.

Without a data directory (benches, throwaway stacks) the server lives in a temporary
directory, saves nothing and forgets everything when it stops.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Self

from redis import Redis
from redis.exceptions import RedisError

from bot.settings import DATA_DIR_VARIABLE

__all__ = ["ADDRESS_FILE", "LocalRedis", "running_url"]

# Loading a large append-only file takes a while; an empty one starts in milliseconds.
START_TIMEOUT_SECONDS = 60.0
# On SIGTERM redis-server flushes the append-only file before exiting: give it time to.
STOP_TIMEOUT_SECONDS = 30.0
LOCK_FILE = "deepthread-up.lock"
# The running server's URL, written once it answers and removed when it stops.
ADDRESS_FILE = "address"
# appendfsync everysec: at most one second of writes is lost if the machine dies; a clean
# stop loses nothing. The RDB snapshots are off: the append-only file is the record.
PERSISTENT = ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]
EPHEMERAL = ["--appendonly", "no", "--save", ""]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DataDirInUse(RuntimeError):
    """Another `deepthread up` holds the data directory."""


class LocalRedis:
    """Starts redis-server on loopback; stops it on close. With `data_dir`, data persists in
    `data_dir/redis` across restarts; without, it lives in a temporary directory."""

    def __init__(self, *, data_dir: Path | str | None = None) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.data_dir = Path(data_dir).expanduser() / "redis" if data_dir is not None else None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._lock: IO[str] | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        binary = shutil.which("redis-server")
        if not binary:
            raise RuntimeError("redis-server is not installed: apt-get install redis-server, or set REDIS_URL")
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._take_lock(self.data_dir)
            directory, mode = str(self.data_dir), PERSISTENT
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="deepthread-redis-")
            directory, mode = self._tmp.name, EPHEMERAL
        self._process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", directory, *mode],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # The server inherits the lock: if `up` dies without stopping it, the directory stays
            # locked until the orphaned server is gone too.
            pass_fds=(self._lock.fileno(),) if self._lock is not None else (),
        )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        client = Redis(port=self.port)
        while time.monotonic() < deadline:
            try:
                client.ping()
                if self.data_dir is not None:
                    (self.data_dir / ADDRESS_FILE).write_text(self.url + "\n", encoding="utf-8")
                return self
            except RedisError:  # refused, or still loading the append-only file
                if self._process.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()
        where = f" with data in {self.data_dir}" if self.data_dir else ""
        raise RuntimeError(
            f"redis-server did not start on port {self.port}{where}: run it by hand to see why, or set REDIS_URL"
        )

    def _take_lock(self, directory: Path) -> None:
        lock = (directory / LOCK_FILE).open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise DataDirInUse(
                f"another `deepthread up` is using {directory}: stop it first, or set "
                f"{DATA_DIR_VARIABLE} to another directory"
            ) from None
        lock.write(str(os.getpid()))
        lock.flush()
        self._lock = lock

    def stop(self) -> None:
        if self.data_dir is not None and self._lock is not None:  # only the holder's address is removed
            (self.data_dir / ADDRESS_FILE).unlink(missing_ok=True)
        if self._process and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._lock is not None:
            self._lock.close()  # closing releases the lock
            self._lock = None
        if self._tmp:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def running_url(data_dir: Path | str) -> str | None:
    """The URL of the Redis a running `deepthread up` keeps its data in under `data_dir`; None when
    none runs there (no address written, or it no longer answers)."""
    address = Path(data_dir).expanduser() / "redis" / ADDRESS_FILE
    try:
        url = address.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    client = Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        client.ping()
    except (RedisError, ValueError):
        return None  # `up` died without stopping its server: the address is stale
    finally:
        client.close()
    return url
