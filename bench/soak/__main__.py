"""An hour of production in twenty minutes: the documented topology on loopback under about 30
research runs at once, while a seeded chaos schedule restarts, kills, fails over and cuts off
every part in turn; then each goal judged.

    .venv/bin/python -m bench.soak [--minutes 20] [--runs 30] [--seed N] [--logs DIR]

Two serve replicas (HTTP mode) and two workers (one forking, one sharing its loop among many
runs), a Redis primary and replica behind three `redis-server --sentinel`, and the fake Slack,
model and web (realistic delays, occasional 429s and 529s) in this process. Threads are mentions;
some carry a file, ask for a plan first, get a note, "go deeper", a stop or a follow-up. The chaos
schedule (printed first) does in turn: a rolling restart of every process, a SIGKILL of a random
worker or replica, a Redis failover (SENTINEL FAILOVER, then a SIGKILL of the new primary), a model
outage, a burst of Slack 429s. When the load time is over no new thread is asked, every run is told
to answer at its next turn, and the soak waits for every run to end before it judges (goals beside
each figure; exit status 1 when one is missed). `--minutes 3` is the short form CI runs.
"""
from __future__ import annotations

import argparse
import logging
import random
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench.common import report_checks
from jobs import RunStore
from jobs.keyspace.connection import connect
from tests.fakes.server import ServerThread
from tests.fakes.web import FakeWeb
from tests.paths import PAGES
from tests.processes import DEEPTHREAD, ROOT, SIGNING_SECRET, SentinelTopology, environment

from . import verdict
from .chaos import Chaos, schedule
from .fakes import SoakModel, SoakPolicy, SoakSlack
from .sampling import Sampler
from .topology import ROLES, Fleet
from .traffic import Traffic

SHARED_WORKER_RUNS = 40  # the sharing worker's DEEPTHREAD_WORKER_RUNS: room for every run at once
SETTLE_SECONDS = 5.0  # after every end is shown: stray late edits (a double post) land before the verdict
ENDS_SHOWN_SECONDS = 180.0  # the longest the verdict waits for the publishers to show every run's end


class Clock:
    def __init__(self) -> None:
        self.began = time.monotonic()

    def log(self, line: str) -> None:
        elapsed = time.monotonic() - self.began
        print(f"[{int(elapsed // 60):02d}:{int(elapsed % 60):02d}] {line}", flush=True)


def doctor_live(env: dict[str, str]) -> tuple[int, list[str]]:
    done = subprocess.run(DEEPTHREAD + ["doctor", "--live"], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    return done.returncode, [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    # A killed worker leaves the fake model writing a stream to a closed socket: aiohttp's server logs
    # each as an error with a traceback, which says nothing about the bot.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="how long the load lasts (the drain follows)")
    parser.add_argument("--runs", type=int, default=None, help="threads at work at once (default 30; 8 under 10 min)")
    parser.add_argument("--seed", type=int, default=None, help="the chaos schedule's and the traffic's seed")
    parser.add_argument("--logs", type=Path, default=None, help="keep every process's log here")
    args = parser.parse_args(argv)
    short = args.minutes < 10
    seed = args.seed if args.seed is not None else random.randrange(10_000)
    target = args.runs or (8 if short else 30)
    load_seconds = args.minutes * 60
    window = 60.0 if short else 300.0
    turns, turn_seconds = ((8, 16), (0.8, 2.0)) if short else ((25, 45), (1.5, 4.0))
    faults = schedule(seed, load_seconds, outage_seconds=20 if short else 60, burst_seconds=10 if short else 30)
    clock = Clock()
    print(f"soak: {args.minutes:g} min of load, {target} threads at work, seed {seed}")
    print("chaos schedule:")
    for fault in faults:
        print(f"  {int(fault.at // 60):02d}:{int(fault.at % 60):02d}  {fault.describe()}")
    print(flush=True)

    with ExitStack() as stack:
        logs = args.logs or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-soak-")))
        logs.mkdir(parents=True, exist_ok=True)
        policy = SoakPolicy(turns, seed)
        model = SoakModel(policy, turn_seconds=turn_seconds, seed=seed)
        slack = SoakSlack(seed)
        web = FakeWeb.from_directory(PAGES, prefix="/pages/")
        model_url = stack.enter_context(ServerThread(model.app())).url
        slack_url = stack.enter_context(ServerThread(slack.app())).url
        web_url = stack.enter_context(ServerThread(web.app())).url
        # Sentinels that call a primary down after 5 s without an answer, as compose.yaml's: the tests'
        # 1 s, on this loaded machine, once called a healthy new primary down and promoted the replica
        # just revived, empty, and every key went with the resync.
        redis = SentinelTopology(logs / "redis", down_after_ms=5000).start()
        stack.callback(redis.stop)
        env = environment(
            SLACK_BOT_TOKEN="xoxb-soak", SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=f"{slack_url}/api/",
            ANTHROPIC_API_KEY="soak", ANTHROPIC_BASE_URL=model_url, REDIS_URL=redis.url, DEEPTHREAD_SEARCH="searxng",
            SEARXNG_URL=web_url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1",
        )
        fleet = Fleet(logs, env, shared_runs=SHARED_WORKER_RUNS)
        stack.callback(fleet.close)
        for role in ROLES:
            fleet.start(role)
        clock.log(f"topology up: {', '.join(ROLES)}; Redis {redis.url}; logs in {logs}")
        store = RunStore(connect(redis.url))
        traffic = Traffic(slack, model, store, fleet.events_urls, target=target, seed=seed, log=clock.log)
        sampler = Sampler(fleet, lambda: len(traffic.active()))
        chaos = Chaos(fleet, redis, model, slack, clock.log)
        clock_offset = time.time() - time.monotonic()
        load_began = time.monotonic()
        sampler.start()
        traffic.start()
        warm: verdict.Calls | None = None
        for fault in faults:
            while time.monotonic() < load_began + fault.at:
                for death in fleet.check():
                    clock.log(f"unexpected: {death}")
                time.sleep(1)
            if warm is None:
                warm = verdict.Calls(sum(slack.methods.values()), model.total, _answered(model))
            chaos.inject(fault)
        while time.monotonic() < load_began + load_seconds:
            for death in fleet.check():
                clock.log(f"unexpected: {death}")
            time.sleep(1)
        load_ended = time.monotonic()
        traffic.accepting = False
        policy.finish.set()
        clock.log(f"load over: {len(traffic.conversations)} threads asked; draining {len(traffic.active())}")
        drain_deadline = time.monotonic() + (240 if short else 420)
        while traffic.active() and time.monotonic() < drain_deadline:
            time.sleep(2)
        clock.log(f"drained: {len(traffic.active())} thread(s) still at work")
        # The runs' ends are in Redis; Slack shows them as fast as its edit rate lets the publishers.
        # The verdict waits for that (up to ENDS_SHOWN_SECONDS) and reports how long each took.
        drained, owed = time.monotonic(), verdict.ends_not_shown(traffic.conversations,
                                                                 verdict.read_threads(store, traffic.conversations),
                                                                 slack)
        while owed and time.monotonic() < drained + ENDS_SHOWN_SECONDS:
            time.sleep(2)
            owed = verdict.ends_not_shown(traffic.conversations, verdict.read_threads(store, traffic.conversations),
                                          slack)
        clock.log(f"ends shown in Slack {time.monotonic() - drained:.0f} s after the drain; {len(owed)} thread(s) "
                  "ended in Redis and not shown")
        time.sleep(SETTLE_SECONDS)
        traffic.stop()
        sampler.stop()
        end = verdict.Calls(sum(slack.methods.values()), model.total, _answered(model))
        threads = verdict.read_threads(store, traffic.conversations)
        code, doctor = doctor_live(env)
        verdict.dump_threads(str(logs / "threads.txt"), traffic.conversations, threads, slack, store)

        print()
        print("memory per process (MB) by window:")
        for line in verdict.memory_table(fleet, sampler.samples, load_began, load_ended, window):
            print(line)
        print()
        print("what moved with each fault (per minute):")
        for line in verdict.watch_table(faults, sampler.samples):
            print(line)
        print()
        print("processes:")
        for life in fleet.lives:
            lived = ((life.ended or time.monotonic()) - life.started) / 60
            print(f"  {life.role}-{life.generation}: {lived:.1f} min, {life.how or 'stopped at the end'}")
        print()
        print(f"deepthread doctor --live (exit {code}):")
        for line in doctor:
            print(f"  {line}")
        print()
        runs_asked = sum(c.runs_asked for c in traffic.conversations)
        runs, run_problems = verdict.runs_checks(traffic.conversations, threads, slack, traffic.undelivered)
        messages, message_problems = verdict.messages_checks(traffic.conversations, threads, slack)
        lags = verdict.end_shown_lags(traffic.conversations, threads, slack, clock_offset)
        checks = [
            *runs, *messages, *verdict.end_shown_checks(lags),
            *verdict.recovery_checks(faults, traffic.conversations, threads, model, slack, clock_offset),
            *verdict.memory_checks(fleet, sampler.samples, load_began, load_ended),
            *verdict.redis_checks(doctor),
            *verdict.lag_checks(fleet, sampler.samples),
            *verdict.calls_checks(warm or end, end, runs_asked),
        ]
        for problem in (run_problems + message_problems)[:40]:
            print(f"  problem: {problem}")
        print()
        failed = report_checks(checks)
        if failed and not args.logs:
            kept = Path(tempfile.mkdtemp(prefix="bench-soak-kept-"))
            subprocess.run(["cp", "-r", str(logs) + "/.", str(kept)], check=False)
            print(f"logs kept in {kept}")
        return failed


def _answered(model: SoakModel) -> int:
    return sum(1 for answers in list(model.answers.values()) for _, status in list(answers) if status == 200)


if __name__ == "__main__":
    sys.exit(main())
