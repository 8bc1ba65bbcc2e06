"""What every benchmark shares: firing signed requests concurrently, percentiles, a baseline server.

Run as `python -m bench.common baseline PORT` to serve the baseline: a bare aiohttp app that
answers POST /slack/events with 200 at once (no Bolt, no Redis), so a bench can report a ratio.
"""
from __future__ import annotations

import asyncio
import math
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.processes import stop_process

ROOT = Path(__file__).resolve().parent.parent
BASELINE_PATH = "/slack/events"
# A request that takes longer than this is recorded as a failure, not waited on forever.
REQUEST_TIMEOUT_SECONDS = 30.0
START_TIMEOUT_SECONDS = 60.0  # a process may take a minute to start on a shared machine (tests.processes.STARTUP_SECONDS)


@dataclass(frozen=True)
class Request:
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Result:
    status: int  # 0 when the request failed without an HTTP answer
    seconds: float
    error: str = ""


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


async def fire(url: str, requests: Sequence[Request], concurrency: int) -> list[Result]:
    """POST every request over `concurrency` connections at once; time each from its send to its answer.

    Each connection is its own single-connection AsyncClient working through its share of the
    requests in turn: one client with a pool of `concurrency` connections spends more time
    scanning that pool (httpcore does it per request, per connection) than the servers spend
    answering, and the bench would measure the client.
    """
    tls = ssl.create_default_context()  # built once: every AsyncClient would otherwise build its own
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    lanes = min(concurrency, len(requests))
    results: list[Result | None] = [None] * len(requests)

    async def lane(client: httpx.AsyncClient, first: int) -> None:
        for i in range(first, len(requests), lanes):
            started = time.perf_counter()
            try:
                response = await client.post(url, content=requests[i].body, headers=requests[i].headers)
            except httpx.HTTPError as exc:
                results[i] = Result(0, time.perf_counter() - started, type(exc).__name__)
            else:
                results[i] = Result(response.status_code, time.perf_counter() - started)

    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(
            httpx.AsyncClient(limits=limits, timeout=REQUEST_TIMEOUT_SECONDS, verify=tls)) for _ in range(lanes)]
        await asyncio.gather(*(lane(client, i) for i, client in enumerate(clients)))
    return [r for r in results if r is not None]


def wait_healthy(url: str, process: subprocess.Popen[bytes], what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            detail = f":\n{log.read_text()}" if log and log.exists() else ""
            raise RuntimeError(f"{what} exited with code {process.returncode}{detail}")
        try:
            if httpx.get(url, timeout=0.5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not answer {url} within {START_TIMEOUT_SECONDS:.0f} s")


stop = stop_process  # one way to end a child we started, shared with the tests


@contextmanager
def baseline_server(port: int) -> Iterator[str]:
    """The baseline in a subprocess (its own interpreter, like `deepthread serve`); yields its events URL."""
    process = subprocess.Popen([sys.executable, "-m", "bench.common", "baseline", str(port)], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(f"{base}/healthz", process, "the baseline server")
        yield base + BASELINE_PATH
    finally:
        stop(process)


@contextmanager
def terminate_raises() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every `finally` that stops a child still runs."""
    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _serve_baseline(port: int) -> None:
    from aiohttp import web

    async def ack(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=200)

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    from bot.settings import DEFAULT_LISTEN_BACKLOG

    app = web.Application()
    app.router.add_post(BASELINE_PATH, ack)
    app.router.add_get("/healthz", health)
    # The backlog serve listens with: a burst is compared with a burst, not with dropped SYNs.
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None, backlog=DEFAULT_LISTEN_BACKLOG)


def listen_overflows() -> int | None:
    """The kernel's count of connections dropped at a full listen backlog (TcpExtListenOverflows in
    /proc/net/netstat, what `nstat` shows): read before and after a burst. Counted for the whole
    network namespace, so another program's overflow counts too. None where it cannot be read."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            return int(table["ListenOverflows"]) if "ListenOverflows" in table else None
    return None


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "baseline":
        raise SystemExit("usage: python -m bench.common baseline PORT")
    _serve_baseline(int(sys.argv[2]))


def report_checks(checks: Sequence[tuple[str, str, bool, str]]) -> int:
    """Print each (figure, value, met, goal) as a table row; exit status 1 when a goal is missed."""
    width = max(len(name) for name, *_ in checks)
    failed = 0
    for name, value, ok, goal in checks:
        failed += not ok
        print(f"  {'ok ' if ok else 'MISS'} {name:<{width}}  {value}   (goal {goal})")
    print()
    return 1 if failed else 0
