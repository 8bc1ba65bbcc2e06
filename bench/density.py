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
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web
from redis import Redis

from bench.common import ROOT, START_TIMEOUT_SECONDS, report_checks, stop
from bot.cli.local_redis import LocalRedis
from jobs import RunStatus, RunStore
from jobs.records.models import Run
from jobs.lifecycle.queue import enqueue
from tests.fakes.anthropic import FakeAnthropic, Reply, tool_reply
from tests.fakes.policies import MARKER, ResearchPolicy, is_extraction, side_reply, turn_of
from tests.fakes.server import ServerThread, free_port
from tests.fakes.web import FakeWeb, Page
from tests.processes import DEEPTHREAD, environment

FIXTURE_PAGES = ROOT.parent / "shared" / "fixtures" / "pages"
SMALL_PAGES = ROOT / "tests" / "pages"
PAGES_PER_RUN = 2
QUICK_TURN_SECONDS = 0.3  # the model's answer before the idle turn
IDLE_TURN = 4  # 1-2: read a page each, 3: write a section, 4: the slow answer, 5: the final answer
SAMPLE_SECONDS = 1.0
WINDOW_MARGIN_SECONDS = 3.0
MIN_WINDOW_SECONDS = 20.0
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
        if idle:
            self.idle_waiting += 1
            began = time.monotonic()
            self.idle_since.append(began)
            try:
                await asyncio.sleep(self.idle_seconds)
            finally:
                self.idle_waiting -= 1
                self.idle_since.remove(began)
        else:
            await asyncio.sleep(QUICK_TURN_SECONDS)
        return await super().answer(request, body, **kwargs)

    def app(self) -> web.Application:
        application = super().app()

        async def idle(_: web.Request) -> web.Response:
            oldest = time.monotonic() - min(self.idle_since) if self.idle_since else 0.0
            return web.json_response({"waiting": self.idle_waiting, "oldest_seconds": oldest})

        application.router.add_get("/bench/idle", idle)
        return application


@contextmanager
def model_process(idle_seconds: float) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "bench.density", "--serve-model", str(port),
                                "--idle-seconds", str(idle_seconds)], cwd=ROOT)
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
            window_start, before = time.monotonic(), commands(redis)
            # Every run waits: the window lasts until just before the first of them is answered.
            seconds = idle_seconds - oldest_idle_seconds(model_url) - WINDOW_MARGIN_SECONDS
            if seconds < MIN_WINDOW_SECONDS:
                raise RuntimeError(f"{mode}: the runs went idle too far apart for a {MIN_WINDOW_SECONDS:.0f} s window; "
                                   "raise --idle-seconds")
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
                       per_minute, time.monotonic() - started)


def show(results: list[Figures]) -> None:
    print(f"  {'mode':<8} {'runs':>4} {'done':>5} {'MB/run':>7} {'lag p99':>9} {'cmds/idle run-min':>18} {'took':>6}")
    for f in results:
        print(f"  {f.mode:<8} {f.runs:>4} {f.completed:>5} {f.mb_per_run:>7.1f} {f.lag_p99_ms:>7.0f}ms "
              f"{f.commands_per_idle_run_minute:>18.1f} {f.seconds:>5.0f}s")
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="runs at once in the shared mode")
    parser.add_argument("--fork-runs", type=int, default=10, help="runs (a worker process each) in the forking mode")
    parser.add_argument("--idle-seconds", type=float, default=120.0, help="how long each run waits on the model")
    parser.add_argument("--modes", default="fork,shared", help="which modes to run (fork is the baseline)")
    parser.add_argument("--serve-model", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
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
        if modes != ["fork", "shared"]:  # a look at one mode: figures only, no verdicts
            show([run_mode(m, args.runs if m == "shared" else args.fork_runs, args.idle_seconds, logs) for m in modes])
            return 0
        baseline = run_mode("fork", args.fork_runs, args.idle_seconds, logs)
        shared = run_mode("shared", args.runs, args.idle_seconds, logs)
        show([baseline, shared])
        return report_checks([
            ("runs completed (shared)", f"{shared.completed}/{shared.runs}", shared.completed == shared.runs, "all"),
            ("runs completed (fork)", f"{baseline.completed}/{baseline.runs}", baseline.completed == baseline.runs,
             "all"),
            ("memory per concurrent run", f"{shared.mb_per_run:.1f} MB (fork: {baseline.mb_per_run:.1f} MB, "
             f"{baseline.mb_per_run / shared.mb_per_run:.1f}x)", shared.mb_per_run <= GOAL_MB_PER_RUN,
             f"≤ {GOAL_MB_PER_RUN:.0f} MB"),
            ("loop lag p99 while extracting", f"≤ {shared.lag_p99_ms:.0f} ms (fork: ≤ {baseline.lag_p99_ms:.0f} ms)",
             shared.lag_p99_ms <= GOAL_LAG_P99_MS, f"≤ {GOAL_LAG_P99_MS:.0f} ms"),
            ("Redis commands per idle run-minute", f"{shared.commands_per_idle_run_minute:.1f} "
             f"(fork: {baseline.commands_per_idle_run_minute:.1f})",
             shared.commands_per_idle_run_minute <= GOAL_COMMANDS_PER_IDLE_RUN_MINUTE,
             f"≤ {GOAL_COMMANDS_PER_IDLE_RUN_MINUTE:.0f}"),
        ])


if __name__ == "__main__":
    sys.exit(main())
