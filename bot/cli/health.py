"""Health endpoints of serve (both modes, on PORT) and of workers (on DEEPTHREAD_HEALTH_PORT), each
answering from real checks, with liveness and readiness apart:

    GET /healthz   alive: restart me if not. serve: its event loop answers and none of its background
                   loops (publisher, sweeps) has died. worker: RQ's main loop has beaten recently.
    GET /readyz    ready: send me work if so. serve: Redis answers, Slack is connected (Socket Mode) or
                   listened to (HTTP), the publisher is cycling and not behind the updates stream, and it
                   is not shutting down. worker: Redis answers and it is not shutting down; the body
                   says which run it is carrying and whether it still holds that run's lease.

Each answers JSON: {"ok": true|false, "checks": {name: "what was found"}}, 200 or 503.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiohttp import web
from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from bot.publishing.publisher import Publisher
from jobs import keys
from jobs.control import ownership
from jobs.keyspace.connection import text

__all__ = ["ServeHealth", "WorkerHealth"]

# A check that takes longer than this counts as failed: a health endpoint must answer promptly.
CHECK_TIMEOUT_SECONDS = 2.0
# The publisher reads the stream every 250 ms; one that has not finished a cycle in this long is wedged.
PUBLISHER_STALE_SECONDS = 30.0
# Updates announced this long ago and not yet read: the publisher is falling behind.
PUBLISHER_BEHIND_SECONDS = 60.0

Checks = dict[str, str]


def _answer(ok: bool, checks: Checks) -> web.Response:
    return web.json_response({"ok": ok, "checks": checks}, status=200 if ok else 503)


class ServeHealth:
    """What `deepthread serve` reports; `draining` is set at SIGTERM (not ready from then on)."""

    def __init__(
        self,
        redis: AsyncRedis,
        publisher: Publisher,
        background: dict[str, asyncio.Task[Any]],
        slack: Callable[[], Awaitable[str | None]],
    ) -> None:
        self.redis = redis
        self.publisher = publisher
        self.background = background  # name -> task that must run for the process's life
        self.slack = slack  # None when connected, else what is wrong
        self.draining = False

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/healthz", self.live)
        app.router.add_get("/readyz", self.ready)

    async def live(self, _: web.Request) -> web.Response:
        checks: Checks = {}
        for name, task in self.background.items():
            if task.done() and not self.draining:
                error = task.exception() if not task.cancelled() else None
                checks[name] = f"stopped ({type(error).__name__ if error else 'cancelled'})"
            else:
                checks[name] = "running"
        return _answer(all(v == "running" for v in checks.values()), checks)

    async def ready(self, _: web.Request) -> web.Response:
        checks: Checks = {"shutdown": "draining" if self.draining else "no"}
        ok = not self.draining
        try:
            await asyncio.wait_for(self.redis.ping(), CHECK_TIMEOUT_SECONDS)
            checks["redis"] = "answers"
        except Exception as exc:  # any failure is the answer
            checks["redis"] = f"not answering ({type(exc).__name__})"
            ok = False
        problem = await self.slack()
        checks["slack"] = problem or "connected"
        ok = ok and problem is None
        cycle_age = time.monotonic() - self.publisher.last_cycle
        behind = await self._behind() if checks["redis"] == "answers" else None
        checks["publisher"] = f"last cycle {cycle_age:.1f} s ago" + (f", {behind:.0f} s behind" if behind else "")
        ok = ok and cycle_age < PUBLISHER_STALE_SECONDS and (behind or 0) < PUBLISHER_BEHIND_SECONDS
        return _answer(ok, checks)

    async def _behind(self) -> float | None:
        """Seconds between the newest update announced and the last one this publisher read."""
        try:
            newest: Any = await asyncio.wait_for(
                self.redis.xrevrange(keys.UPDATES_STREAM, count=1), CHECK_TIMEOUT_SECONDS
            )
        except Exception:
            return None
        if not newest:
            return 0.0
        newest_ms = int(text(newest[0][0]).split("-")[0])
        read_ms = int(self.publisher.last_read.split("-")[0])
        return max(0.0, (newest_ms - read_ms) / 1000) if read_ms else None


class WorkerHealth:
    """What `deepthread worker` reports, from a thread of the worker's main process."""

    def __init__(self, worker: Any, redis_url: str, port: int, host: str) -> None:
        """Listens on `host`: loopback unless DEEPTHREAD_METRICS_HOST opens it (the answers are unauthenticated)."""
        from jobs.keyspace.connection import connect

        self.worker = worker
        self.redis: Redis = connect(redis_url, retry_window=0, socket_timeout=CHECK_TIMEOUT_SECONDS)
        self.stopping = False
        health = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802  # http.server's name
                if self.path == "/healthz":
                    ok, checks = health.live()
                elif self.path == "/readyz":
                    ok, checks = health.ready()
                else:
                    self.send_error(404)
                    return
                body = json.dumps({"ok": ok, "checks": checks}).encode()
                self.send_response(200 if ok else 503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:  # probes every few seconds: keep them out of the log
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True

    def start(self) -> WorkerHealth:
        threading.Thread(target=self.server.serve_forever, name="health", daemon=True).start()
        return self

    def close(self) -> None:
        """In the work-horse after the fork: let go of the listening socket it inherited."""
        self.server.socket.close()

    def live(self) -> tuple[bool, Checks]:
        from jobs.workers.worker import WORKER_TTL_SECONDS

        beat = self.worker.last_heartbeat
        age = (datetime.now(UTC) - beat.replace(tzinfo=UTC)).total_seconds() if beat else None
        ok = age is not None and age < 2 * WORKER_TTL_SECONDS + self.worker.job_monitoring_interval
        return ok, {"heartbeat": f"{age:.0f} s ago" if age is not None else "never"}

    def ready(self) -> tuple[bool, Checks]:
        checks: Checks = {"shutdown": "stopping" if self.stopping else "no"}
        ok = not self.stopping
        try:
            self.redis.ping()
            checks["redis"] = "answers"
        except Exception as exc:
            checks["redis"] = f"not answering ({type(exc).__name__})"
            ok = False
        job_id = self.worker.get_current_job_id() if checks["redis"] == "answers" else None
        carried = getattr(self.worker, "active_job_ids", None)  # a worker carrying many runs at once
        if carried is not None:
            checks["runs"] = f"{len(carried)} of {self.worker.runs}"
        if job_id is None:
            checks["job"] = "idle"
            return ok, checks
        checks["job"] = text(job_id)
        run_id = _run_of(text(job_id))
        if run_id is not None:
            held = ownership.holder(self.redis, run_id) or ""
            checks["run"] = run_id
            checks["lease"] = "held" if held.endswith(f":{text(job_id)}") else f"not held ({held or 'free'})"
        return ok, checks


def _run_of(job_id: str) -> str | None:
    """The run a research job carries (its id is keys.job_id(run) plus a suffix)."""
    prefix = keys.job_id("")
    return job_id[len(prefix) :].split("-", 1)[0] if job_id.startswith(prefix) else None
