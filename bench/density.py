"""How many research runs one machine carries: RQ's forking worker (a work-horse per run) against one
worker process carrying many (DEEPTHREAD_WORKER_RUNS), both in the same run, against the fakes.

    .venv/bin/python -m bench.density [--runs 50] [--fork-runs 10] [--idle-seconds 120]

Each scripted run reads two real saved pages (../shared/fixtures/pages when present, else the small
pages in tests/pages: say which), writes a section, then waits `--idle-seconds` on a slow model
answer (a run's usual state: waiting on the model) and answers. Printed per mode:

- memory per concurrent run: the PSS of every process of the workers (worker, work-horses, the
  extraction pool) at the peak, divided by the runs running then;
- runs completed;
- event-loop lag p99 while the runs extract their pages (deepthread_event_loop_lag_seconds from the
  worker's metrics endpoint; a histogram, so the figure is its bucket's upper bound);
- Redis commands per idle run-minute: INFO's total_commands_processed over the window in which
  every run waits on the model, divided by runs and minutes (EVALSHA counts as one command).

Beside each mode an idle event loop (a process doing nothing but the same 100 ms timer) measures how
late the machine itself wakes a timer over the same stretch, and the load average is printed: on a
shared machine that lateness is the floor under both modes' figures, not the worker's doing. The
fake model runs at a lower priority (it is the bench's, not the worker's, CPU).

CI runs a short form (.ci/run): the shared mode alone, fifty runs, a minute's idle window, paired with
the idle loop beside it; it exits 1 when a goal is missed, as the full form does.

The forking mode is the baseline; it runs `--fork-runs` runs (a process each: 50 would need ~50
processes' start-up on this machine), and its per-run figures are what it is compared on.
Goals for the shared mode: ≤ 15 MB per concurrent run, loop lag p99 ≤ 50 ms, ≤ 10 Redis commands
per idle run-minute, every run completed.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web
from redis import Redis

from bench.common import ROOT, START_TIMEOUT_SECONDS, report_checks, stop
from bot.cli.local_redis import LocalRedis
from jobs import RunStatus, RunStore
from jobs.control.ownership import ALIVE_EVERY_SECONDS, LEASE_SECONDS
from jobs.lifecycle.queue import enqueue
from jobs.process.loop_lag import INTERVAL_SECONDS as LAG_INTERVAL_SECONDS
from jobs.records.models import Run
from tests.fakes.anthropic import FakeAnthropic, Reply, stream_events, tool_reply
from tests.fakes.policies import MARKER, ResearchPolicy, is_extraction, side_reply, turn_of
from tests.fakes.server import ServerThread, free_port
from tests.fakes.web import FakeWeb, Page
from tests.processes import DEEPTHREAD, environment

FIXTURE_PAGES = ROOT.parent / "shared" / "fixtures" / "pages"
SMALL_PAGES = ROOT / "tests" / "pages"
PAGES_PER_RUN = 2
QUICK_TURN_SECONDS = 0.3  # the model's answer before the idle turn
# The API pings a stream while the model thinks; the idle turn's answer does too, this often.
PING_SECONDS = 5.0
IDLE_TURN = 4  # 1-2: read a page each, 3: write a section, 4: the slow answer, 5: the final answer
SAMPLE_SECONDS = 1.0
WINDOW_MARGIN_SECONDS = 3.0
# The idle window is a whole number of this: an idle run's commands come in waves (its lease renewed
# every third of LEASE_SECONDS, recorded alive every ALIVE_EVERY_SECONDS), and the runs, started
# together, renew together; a window that ends between two waves counted one wave too many or too few
# (11.0 a minute in a 50 s window, 8.7 in a 60 s one, for the same runs).
COUNT_PERIOD_SECONDS = float(math.lcm(int(LEASE_SECONDS / 3), int(ALIVE_EVERY_SECONDS)))
# BENCH_DENSITY_DEBUG=1: workers log their slow callbacks (asyncio debug), the commands are broken down,
# and the logs are kept in /tmp/bench-density-logs.
DEBUG_LOOP = bool(os.environ.get("BENCH_DENSITY_DEBUG"))
RUN_TIMEOUT_SECONDS = 600.0
GOAL_MB_PER_RUN = 15.0
GOAL_LAG_P99_MS = 50.0
GOAL_COMMANDS_PER_IDLE_RUN_MINUTE = 10.0


# --- the scripted model (in a process of its own: the bench measures the workers, not itself) ----

class DensityPolicy:
    """Each run reads the pages its question names, writes a section, then its idle turn."""

    def __call__(self, request: dict[str, Any]) -> Reply:
        side = side_reply(request)
        if side is not None:
            return side
        messages, turn = request["messages"], turn_of(request)
        if (request.get("tool_choice") or {}).get("type") == "none" or turn > IDLE_TURN:
            return ResearchPolicy().final(messages)
        if turn <= PAGES_PER_RUN:
            urls = re.findall(r"https?://127\.0\.0\.1:\d+/pages/[^\s<\"]+", json.dumps(messages[0]))
            return tool_reply(("read_page", {"url": urls[turn - 1], "goal": "what the page says about its subject"}))
        seen = MARKER.findall(json.dumps(messages))
        if turn == PAGES_PER_RUN + 1 and seen:
            return tool_reply(("write_section", {"title": "Findings", "body": f"The page says so {seen[0]}."}))
        return tool_reply(("calculator", {"expression": "2 + 2"}))


class DensityModel(FakeAnthropic):
    """The fake model, slow only on each run's idle turn; counts the requests waiting there."""

    def __init__(self, idle_seconds: float) -> None:
        super().__init__(DensityPolicy())
        self.idle_seconds = idle_seconds
        self.idle_waiting = 0
        self.idle_since: list[float] = []  # when each waiting idle answer began (this process's clock)

    async def answer(self, request: web.Request, body: dict[str, Any], **kwargs: Any) -> web.StreamResponse:
        import asyncio

        turn = 1 + sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
        idle = bool(body.get("tools")) and turn == IDLE_TURN and not is_extraction(body)
        if idle and body.get("stream"):
            request["think_seconds"] = self.idle_seconds  # the answer streams, slow: see _stream
        elif idle:
            async with self._waiting():
                await asyncio.sleep(self.idle_seconds)
        else:
            await asyncio.sleep(QUICK_TURN_SECONDS)
        return await super().answer(request, body, **kwargs)

    async def _stream(self, request: web.Request, message: dict[str, Any], failure: Any,
                      limit_headers: dict[str, str]) -> web.StreamResponse:
        """A slow answer as the API streams one: its message_start at once, then a ping every few
        seconds while the model thinks (a run's silence watch, agent/silence.py, sees them), then the rest."""
        import asyncio

        think = float(request.get("think_seconds", 0.0))
        if not think or failure is not None:
            return await super()._stream(request, message, failure, limit_headers)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                           "Cache-Control": "no-cache", **limit_headers})
        await resp.prepare(request)
        first, *rest = stream_events(message)
        await resp.write(f"event: {first['type']}\ndata: {json.dumps(first)}\n\n".encode())
        async with self._waiting():
            deadline = time.monotonic() + think
            while (left := deadline - time.monotonic()) > 0:
                await asyncio.sleep(min(PING_SECONDS, left))
                await resp.write(b'event: ping\ndata: {"type": "ping"}\n\n')
        for event in rest:
            await resp.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        await resp.write_eof()
        return resp

    @asynccontextmanager
    async def _waiting(self) -> AsyncIterator[None]:
        self.idle_waiting += 1
        began = time.monotonic()
        self.idle_since.append(began)
        try:
            yield
        finally:
            self.idle_waiting -= 1
            self.idle_since.remove(began)

    def app(self) -> web.Application:
        application = super().app()

        async def idle(_: web.Request) -> web.Response:
            oldest = time.monotonic() - min(self.idle_since) if self.idle_since else 0.0
            return web.json_response({"waiting": self.idle_waiting, "oldest_seconds": oldest})

        application.router.add_get("/bench/idle", idle)
        return application


# The bench's own processes (the fake model) run this much nicer than the workers they measure.
HARNESS_NICE = 10


@contextmanager
def model_process(idle_seconds: float) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(["nice", "-n", str(HARNESS_NICE), sys.executable, "-m", "bench.density",
                                "--serve-model", str(port), "--idle-seconds", str(idle_seconds)], cwd=ROOT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            try:
                httpx.get(f"{url}/bench/idle", timeout=0.5)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the fake model did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        stop(process)


def idle_waiting(model_url: str) -> int:
    return int(httpx.get(f"{model_url}/bench/idle", timeout=5).json()["waiting"])


def oldest_idle_seconds(model_url: str) -> float:
    """How long the run that went idle first has waited: the window must end before it is answered."""
    return float(httpx.get(f"{model_url}/bench/idle", timeout=5).json()["oldest_seconds"])


# --- the machine's own lateness: an idle loop beside the workers --------------------------------

@contextmanager
def idle_loop(out: Path) -> Iterator[Path]:
    """A process running only a timer every LAG_INTERVAL_SECONDS, at the workers' priority, writing
    each wake's lateness (ms) to `out`: what the machine does to a loop that has no work of its own."""
    process = subprocess.Popen([sys.executable, "-m", "bench.density", "--idle-loop", str(out)], cwd=ROOT)
    try:
        yield out
    finally:
        stop(process)


def _watch_idle_loop(out: Path) -> None:
    import asyncio

    async def watch() -> None:
        loop = asyncio.get_running_loop()
        with out.open("a", buffering=1) as samples:
            while True:
                due = loop.time() + LAG_INTERVAL_SECONDS
                await asyncio.sleep(LAG_INTERVAL_SECONDS)
                samples.write(f"{time.time():.3f} {max(0.0, loop.time() - due) * 1000:.2f}\n")

    asyncio.run(watch())


def idle_lag_p99_ms(samples: Path, since: float) -> float:
    """The idle loop's p99 lateness over the wakes after `since` (time.time()): the stretch the workers'
    own histogram covers, from their start to its reading."""
    rows = [line.split() for line in samples.read_text().splitlines()] if samples.exists() else []
    values = sorted(float(late) for at, late in rows if float(at) >= since)
    return values[min(len(values) - 1, math.ceil(0.99 * len(values)) - 1)] if values else math.nan


def load_average() -> float:
    return os.getloadavg()[0]


# --- memory -----------------------------------------------------------------------------------

def tree(pid: int) -> list[int]:
    """`pid` and every process under it."""
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
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    match = re.search(r"^Pss:\s+(\d+) kB", rollup, re.M)
    return int(match.group(1)) if match else 0


class Sampler:
    """PSS of the workers' process trees every second, with how many runs were waiting then."""

    def __init__(self, pids: list[int], model_url: str) -> None:
        self.pids = pids
        self.model_url = model_url
        self.peak_kb = 0
        self.runs_at_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_SECONDS):
            kb = sum(pss_kb(p) for root in self.pids for p in tree(root))
            try:
                waiting = idle_waiting(self.model_url)
            except httpx.HTTPError:
                continue
            # The peak that counts is the one with every run in the process (all waiting at once).
            if waiting and (waiting > self.runs_at_peak or (waiting == self.runs_at_peak and kb > self.peak_kb)):
                self.peak_kb, self.runs_at_peak = kb, waiting


# --- one mode -----------------------------------------------------------------------------------

@dataclass
class Figures:
    mode: str
    runs: int
    completed: int
    mb_per_run: float
    lag_p99_ms: float
    commands_per_idle_run_minute: float
    seconds: float
    idle_loop_p99_ms: float  # the machine's own lateness over the same stretch
    load: float  # the load average (1 min) when the lag was read


def pages() -> tuple[dict[str, Page], str]:
    folder = FIXTURE_PAGES if FIXTURE_PAGES.is_dir() else SMALL_PAGES
    found = {f"/pages/{p.name}": Page(p.read_bytes()) for p in sorted(folder.glob("*.html"))}
    return found, ("real saved pages" if folder == FIXTURE_PAGES else
                   "the small pages in tests/pages (../shared/fixtures/pages is not beside this checkout)")


def lag_p99_ms(metrics_url: str) -> float:
    """The p99 of deepthread_event_loop_lag_seconds: the upper bound of the bucket it falls in."""
    text = httpx.get(metrics_url, timeout=10).text
    buckets = sorted(
        (math.inf if le == "+Inf" else float(le), float(count))
        for le, count in re.findall(r'deepthread_event_loop_lag_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)', text)
    )
    total = buckets[-1][1] if buckets else 0.0
    for bound, count in buckets:
        if total and count >= 0.99 * total:
            return bound * 1000
    return math.nan


def breakdown(url: str, seconds: float, out: Path) -> None:
    """Debugging: which commands Redis received for `seconds` (redis-cli MONITOR), by name and key."""
    from collections import Counter

    try:
        lines = subprocess.run(["redis-cli", "-u", url, "monitor"], capture_output=True, text=True,
                               timeout=seconds).stdout.splitlines()
    except subprocess.TimeoutExpired as cut:
        lines = (cut.stdout or b"").decode().splitlines() if isinstance(cut.stdout, bytes) else (cut.stdout or "").splitlines()
    seen: Counter[str] = Counter()
    for line in lines:
        words = re.findall(r'"([^"]*)"', line)
        if words:
            key = re.sub(r"[0-9a-f]{8,}", "ID", words[1]) if len(words) > 1 else ""
            seen[f"{words[0]} {key}"] += 1
    out.write_text("\n".join(f"{n:6d} {name}" for name, n in seen.most_common()))


def commands(redis: Redis) -> int:
    return int(redis.info("stats")["total_commands_processed"])


def run_mode(mode: str, runs: int, idle_seconds: float, logs: Path) -> Figures:
    started = time.monotonic()
    with ExitStack() as stack:
        local = stack.enter_context(LocalRedis())
        redis = Redis.from_url(local.url)
        stack.callback(redis.close)
        served, _ = pages()
        web_server = stack.enter_context(ServerThread(FakeWeb(served).app()))
        model_url = stack.enter_context(model_process(idle_seconds))
        idle_samples = stack.enter_context(idle_loop(logs / f"idle-loop-{mode}.txt"))
        names = sorted(served)
        store = RunStore(redis)
        run_ids = []
        for i in range(runs):
            urls = [f"{web_server.url}{names[(i * PAGES_PER_RUN + k) % len(names)]}" for k in range(PAGES_PER_RUN)]
            run = Run(question=f"What do these pages say? {' and '.join(urls)} (run {i})")
            store.create(run)
            enqueue(redis, run)
            run_ids.append(run.id)
        metrics_port = free_port()
        env = environment(
            **({"PYTHONASYNCIODEBUG": "1"} if DEBUG_LOOP else {}),
            ANTHROPIC_API_KEY="bench", ANTHROPIC_BASE_URL=model_url, REDIS_URL=local.url, DEEPTHREAD_SEARCH="searxng",
            SEARXNG_URL=web_server.url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1", DEEPTHREAD_METRICS_PORT=str(metrics_port),
            DEEPTHREAD_WORKER_RUNS=str(runs if mode == "shared" else 1),
            PROMETHEUS_MULTIPROC_DIR=str(logs / f"metrics-{mode}"),
        )
        (logs / f"metrics-{mode}").mkdir(exist_ok=True)
        processes = []
        workers_started = time.time()
        for n in range(1 if mode == "shared" else runs):
            out = stack.enter_context((logs / f"worker-{mode}-{n}.log").open("wb"))
            worker_env = env if n == 0 else {**env, "DEEPTHREAD_METRICS_PORT": str(free_port())}
            process = subprocess.Popen(DEEPTHREAD + ["worker", "--burst"], env=worker_env, stdout=out,
                                       stderr=subprocess.STDOUT, cwd=ROOT)
            stack.callback(stop, process)
            processes.append(process)
        with Sampler([p.pid for p in processes], model_url) as sampler:
            deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
            while idle_waiting(model_url) < runs:  # every run has read its pages and waits on the model
                if time.monotonic() > deadline or all(p.poll() is not None for p in processes):
                    raise RuntimeError(f"{mode}: only {idle_waiting(model_url)}/{runs} runs reached their idle turn; "
                                       f"see {logs}")
                time.sleep(0.2)
            lag = lag_p99_ms(f"http://127.0.0.1:{metrics_port}/metrics")
            machine_lag, load = idle_lag_p99_ms(idle_samples, workers_started), load_average()
            window_start, before = time.monotonic(), commands(redis)
            # Every run waits: the window lasts until just before the first of them is answered.
            room = idle_seconds - oldest_idle_seconds(model_url) - WINDOW_MARGIN_SECONDS
            seconds = COUNT_PERIOD_SECONDS * math.floor(room / COUNT_PERIOD_SECONDS)
            if seconds < COUNT_PERIOD_SECONDS:
                raise RuntimeError(f"{mode}: the runs went idle too far apart for a {COUNT_PERIOD_SECONDS:.0f} s window "
                                   f"({room:.0f} s left); raise --idle-seconds")
            if DEBUG_LOOP:
                breakdown(local.url, seconds, logs / f"commands-{mode}.txt")
            else:
                time.sleep(seconds)
            after, window = commands(redis), time.monotonic() - window_start
            still_idle = idle_waiting(model_url)
            for process in processes:
                process.wait(RUN_TIMEOUT_SECONDS)
        completed = sum(store.get(run_id).status == RunStatus.completed for run_id in run_ids)
        if still_idle < runs:
            print(f"  note: {runs - still_idle} run(s) left their idle turn inside the window")
        per_minute = (after - before - 1) / runs / (window / 60)  # less the bench's first INFO (counted once answered)
        return Figures(mode, runs, completed, sampler.peak_kb / 1024 / max(1, sampler.runs_at_peak), lag,
                       per_minute, time.monotonic() - started, machine_lag, load)


def show(results: list[Figures]) -> None:
    print(f"  {'mode':<8} {'runs':>4} {'done':>5} {'MB/run':>7} {'lag p99':>9} {'idle loop':>10} {'load':>5} "
          f"{'cmds/idle run-min':>18} {'took':>6}")
    for f in results:
        print(f"  {f.mode:<8} {f.runs:>4} {f.completed:>5} {f.mb_per_run:>7.1f} {f.lag_p99_ms:>7.0f}ms "
              f"{f.idle_loop_p99_ms:>8.0f}ms {f.load:>5.1f} {f.commands_per_idle_run_minute:>18.1f} {f.seconds:>5.0f}s")
    print("  (lag p99: the worker's histogram bucket; idle loop: an idle loop's p99 beside it, the machine's own; "
          "load: the 1-minute load average then)\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="runs at once in the shared mode")
    parser.add_argument("--fork-runs", type=int, default=10, help="runs (a worker process each) in the forking mode")
    parser.add_argument("--idle-seconds", type=float, default=120.0, help="how long each run waits on the model")
    parser.add_argument("--modes", default="fork,shared",
                        help="which modes to run (fork is the baseline; the goals are the shared mode's)")
    parser.add_argument("--serve-model", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--idle-loop", type=Path, metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.idle_loop:
        _watch_idle_loop(args.idle_loop)
        return 0
    if args.serve_model:
        web.run_app(DensityModel(args.idle_seconds).app(), host="127.0.0.1", port=args.serve_model, print=None)
        return 0
    _, which = pages()
    print(f"density: {args.runs} runs in one shared worker, {args.fork_runs} in forking workers; pages: {which}\n")
    with tempfile.TemporaryDirectory(prefix="bench-density-") as tmp:
        logs = Path(tmp)
        if DEBUG_LOOP:
            logs = Path("/tmp/bench-density-logs")
            logs.mkdir(exist_ok=True)
        modes = args.modes.split(",")
        figures = {m: run_mode(m, args.runs if m == "shared" else args.fork_runs, args.idle_seconds, logs) for m in modes}
        show(list(figures.values()))
        if "shared" not in figures:  # the baseline alone: figures only, no goal is about it
            return 0
        return report_checks(verdicts(figures["shared"], figures.get("fork")))


def verdicts(shared: Figures, baseline: Figures | None) -> list[tuple[str, str, bool, str]]:
    """The shared mode's goals; the forking baseline's figures beside them when it ran."""

    def beside(text: str) -> str:
        return f" ({text})" if baseline is not None else ""

    fork = baseline or shared  # read only inside beside(), which shows nothing without a baseline
    checks = [
        ("runs completed (shared)", f"{shared.completed}/{shared.runs}", shared.completed == shared.runs, "all"),
        ("memory per concurrent run", f"{shared.mb_per_run:.1f} MB" + beside(
            f"fork: {fork.mb_per_run:.1f} MB, {fork.mb_per_run / shared.mb_per_run:.1f}x"),
         shared.mb_per_run <= GOAL_MB_PER_RUN, f"≤ {GOAL_MB_PER_RUN:.0f} MB"),
        ("loop lag p99 while extracting", f"≤ {shared.lag_p99_ms:.0f} ms" + beside(f"fork: ≤ {fork.lag_p99_ms:.0f} ms")
         + f"; an idle loop beside it: {shared.idle_loop_p99_ms:.0f} ms, load {shared.load:.1f}",
         shared.lag_p99_ms <= GOAL_LAG_P99_MS, f"≤ {GOAL_LAG_P99_MS:.0f} ms"),
        ("Redis commands per idle run-minute", f"{shared.commands_per_idle_run_minute:.1f}" + beside(
            f"fork: {fork.commands_per_idle_run_minute:.1f}"),
         shared.commands_per_idle_run_minute <= GOAL_COMMANDS_PER_IDLE_RUN_MINUTE,
         f"≤ {GOAL_COMMANDS_PER_IDLE_RUN_MINUTE:.0f}"),
    ]
    if baseline is not None:
        checks.insert(1, ("runs completed (fork)", f"{baseline.completed}/{baseline.runs}",
                          baseline.completed == baseline.runs, "all"))
    return checks


if __name__ == "__main__":
    sys.exit(main())
