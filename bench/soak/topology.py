"""The documented production topology on loopback, by role: two serve replicas (HTTP mode), a forking
worker and a worker whose loop many runs share, against a Redis primary and replica behind three
sentinels. Each role's process may be replaced (a successor started, then SIGTERM, as a deploy does)
or killed (SIGKILL of its whole tree, as a lost machine; the platform starts it again). Every life
of every process is kept, with its metrics endpoint, for the soak's figures."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.processes import DEEPTHREAD, ROOT, STARTUP_SECONDS, free_port, wait_for

SERVES = ("serve-1", "serve-2")
WORKERS = ("worker-fork", "worker-shared")
ROLES = SERVES + WORKERS
# A platform's usual grace between SIGTERM and SIGKILL.
GRACE_SECONDS = 30.0
# A killed process is started again after this long (a platform's restart back-off).
RESTART_AFTER_SECONDS = 3.0


def tree(pid: int) -> list[int]:
    """`pid` and every process under it (a work-horse, the extraction pool's processes)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return found


def pss_kb(pid: int) -> int:
    """The proportional set size of one process (its share of pages shared with its parent)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class Life:
    """One process of one role, from its start to its end."""

    role: str
    generation: int
    process: subprocess.Popen[bytes]
    log: Path
    metrics_url: str
    started: float = field(default_factory=time.monotonic)
    events_url: str = ""  # serve: where Slack's events go
    ended: float | None = None
    how: str = ""  # "SIGTERM exit 0 after 4.1 s", "SIGKILL", "died (code 1)"

    @property
    def alive(self) -> bool:
        return self.ended is None and self.process.poll() is None

    def memory_kb(self) -> int:
        return sum(pss_kb(p) for p in tree(self.process.pid)) if self.alive else 0


class Fleet:
    def __init__(self, logs: Path, env: dict[str, str], *, shared_runs: int) -> None:
        self.logs = logs
        self.env = env
        self.shared_runs = shared_runs
        self.lives: list[Life] = []
        self._generation: dict[str, int] = {}
        self._outs: list[object] = []

    # --- starting and ending ------------------------------------------------------------------

    def start(self, role: str) -> Life:
        generation = self._generation.get(role, 0) + 1
        self._generation[role] = generation
        metrics_port = free_port()
        multiproc = self.logs / "metrics" / f"{role}-{generation}"
        multiproc.mkdir(parents=True, exist_ok=True)
        env = {**self.env, "DEEPTHREAD_METRICS_PORT": str(metrics_port), "PROMETHEUS_MULTIPROC_DIR": str(multiproc)}
        command = "serve" if role in SERVES else "worker"
        if role in SERVES:
            env["PORT"] = str(free_port())
        env["DEEPTHREAD_WORKER_RUNS"] = str(self.shared_runs if role == "worker-shared" else 1)
        log = self.logs / f"{role}-{generation}.log"
        out = log.open("wb")
        self._outs.append(out)
        process = subprocess.Popen(DEEPTHREAD + [command], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                   start_new_session=True)
        life = Life(role, generation, process, log, f"http://127.0.0.1:{metrics_port}/metrics")
        self.lives.append(life)
        if role in SERVES:
            base = f"http://127.0.0.1:{env['PORT']}"
            wait_for(lambda: self._answers(life, f"{base}/healthz"), STARTUP_SECONDS, f"{role} to listen")
            life.events_url = f"{base}/slack/events"
        else:
            wait_for(lambda: self._answers(life, life.metrics_url), STARTUP_SECONDS, f"{role} to start")
        return life

    @staticmethod
    def _answers(life: Life, url: str) -> bool:
        if life.process.poll() is not None:
            raise RuntimeError(f"{life.role} exited at start ({life.process.returncode}): see {life.log}")
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def current(self, role: str) -> Life | None:
        alive = [life for life in self.lives if life.role == role and life.alive]
        return alive[-1] if alive else None

    def live(self) -> list[Life]:
        return [life for life in self.lives if life.alive]

    def events_urls(self) -> list[str]:
        return [life.events_url for life in self.live() if life.events_url]

    def replace(self, role: str) -> Life:
        """A deploy: the successor started first, then the old process SIGTERMed and waited for."""
        old = self.current(role)
        successor = self.start(role)
        if old is not None:
            started = time.monotonic()
            old.process.send_signal(signal.SIGTERM)
            try:
                code = old.process.wait(GRACE_SECONDS)
                old.how = f"SIGTERM, exit {code} after {time.monotonic() - started:.1f} s"
            except subprocess.TimeoutExpired:
                self._kill_tree(old)
                old.how = f"SIGTERM, still running after {GRACE_SECONDS:.0f} s: SIGKILL"
            old.ended = time.monotonic()
        return successor

    def kill(self, role: str) -> Life:
        """A lost machine: SIGKILL the role's whole process tree; the platform starts it again."""
        old = self.current(role)
        if old is not None:
            self._kill_tree(old)
            old.ended, old.how = time.monotonic(), "SIGKILL"
        time.sleep(RESTART_AFTER_SECONDS)
        return self.start(role)

    @staticmethod
    def _kill_tree(life: Life) -> None:
        for pid in tree(life.process.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        life.process.wait(10)

    def check(self) -> list[str]:
        """Processes that died on their own since the last check (each said once)."""
        died = []
        for life in self.lives:
            if life.ended is None and life.process.poll() is not None:
                life.ended, life.how = time.monotonic(), f"died on its own (exit {life.process.returncode})"
                died.append(f"{life.role}-{life.generation} {life.how}: see {life.log}")
        return died

    def close(self) -> None:
        for life in self.lives:
            if life.alive:
                life.process.send_signal(signal.SIGTERM)
        for life in self.lives:
            if life.ended is None:
                try:
                    life.process.wait(GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    self._kill_tree(life)
                life.ended = time.monotonic()
        for out in self._outs:
            out.close()  # type: ignore[attr-defined]
