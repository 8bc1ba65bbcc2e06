"""How fast `deepthread serve` acks a burst of mentions, and whether every one becomes exactly one run.

    .venv/bin/python -m bench.ack [--mentions N] [--concurrency C] [--keep-logs]

Starts a private redis-server, a fake Slack Web API and a real `deepthread serve` (HTTP mode),
fires N signed, distinct app_mention events at once, then re-sends each as Slack's retry.
No worker runs, so the RQ queue length counts the runs that were started. The same burst
against a bare aiohttp server (no Bolt, no Redis) is the baseline: compare the ratio, not ms.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from redis import Redis
from rq import Queue

from bench.common import Request, Result, baseline_server, fire, percentile, terminate_raises, wait_healthy
from bot.cli.local_redis import LocalRedis
from tests.fakes.server import ServerThread, free_port
from tests.fakes.slack import FakeSlack, app_mention_event, sign
from tests.processes import SIGNING_SECRET, environment, running

QUEUE_NAME = "deepthread"  # jobs.keys.QUEUE, spelled out: the bench checks the name the worker listens on
CHANNEL = "C0BENCH"
DEFAULT_MENTIONS = 200
DEFAULT_CONCURRENCY = 200
# Slack retries an event that is not acked with a 2xx within 3 s.
ACK_DEADLINE_SECONDS = 3.0
# How long the N runs may take to reach the queue after the burst before the bench gives up.
ENQUEUE_TIMEOUT_SECONDS = 60.0
# After the retries are acked, how long their listeners get to (wrongly) start a run.
RETRY_SETTLE_SECONDS = 3.0
POLL_SECONDS = 0.02
# Ports nothing listens on: serve never calls the model or the web, only the worker would.
UNUSED_URL = "http://127.0.0.1:9"


def mentions(slack: FakeSlack, count: int) -> list[dict[str, Any]]:
    """Distinct app_mention envelopes (own event_id and ts), each message seeded in the fake workspace."""
    envelopes = [app_mention_event(f"bench question {i}: what is the expense ratio of fund {i}?", channel=CHANNEL)
                 for i in range(count)]
    for envelope in envelopes:
        slack.seed_event(envelope)
    assert len({e["event_id"] for e in envelopes}) == count and len({e["event"]["ts"] for e in envelopes}) == count
    return envelopes


def signed(envelopes: Sequence[dict[str, Any]], *, retry: bool = False) -> list[Request]:
    extra = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"} if retry else {}
    requests = []
    for envelope in envelopes:
        body = json.dumps(envelope).encode()
        requests.append(Request(body, {**sign(SIGNING_SECRET, body), **extra}))
    return requests


def serve_environment(redis_url: str, slack_url: str, port: int) -> dict[str, str]:
    return environment(
        SLACK_BOT_TOKEN="xoxb-bench-token", SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=f"{slack_url}/api/",
        ANTHROPIC_API_KEY="bench-key", ANTHROPIC_BASE_URL=UNUSED_URL, REDIS_URL=redis_url,
        DEEPTHREAD_SEARCH="searxng", SEARXNG_URL=UNUSED_URL, PORT=str(port),
    )


# What serve posts for one started run: the progress reply and the report, both in the mention's thread.
POSTS_PER_RUN = 2


def posts_by_thread(slack: FakeSlack) -> dict[str, int]:
    """chat.postMessage calls counted by the thread they went to: each post is attributed to the
    mention (the event) whose thread it answers, however late it drains through the channel's slot."""
    counts: dict[str, int] = {}
    for call in slack.calls_of("chat.postMessage"):
        thread = str(call.get("thread_ts") or "")
        counts[thread] = counts.get(thread, 0) + 1
    return counts


def wait_for_posts(slack: FakeSlack, threads: Sequence[str], timeout: float) -> dict[str, int]:
    """Until every mention's thread has its run's posts (or `timeout`): the posts still draining
    through the channel's post slot land before the retries are judged."""
    deadline = time.monotonic() + timeout
    while True:
        counts = posts_by_thread(slack)
        if all(counts.get(t, 0) >= POSTS_PER_RUN for t in threads) or time.monotonic() > deadline:
            return counts
        time.sleep(POLL_SECONDS)


def extra_posts(before: dict[str, int], after: dict[str, int], threads: Sequence[str]) -> int:
    """Posts in the mentions' threads that arrived after the retries were sent."""
    return sum(after.get(t, 0) - before.get(t, 0) for t in threads)


def wait_for_jobs(queue: Queue, count: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        queued = queue.count
        if queued >= count or time.monotonic() > deadline:
            return queued
        time.sleep(POLL_SECONDS)


def last_enqueued_at(queue: Queue) -> float | None:
    stamps = [job.enqueued_at.timestamp() for job in queue.get_jobs() if job.enqueued_at is not None]
    return max(stamps) if stamps else None


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def latencies(results: Sequence[Result]) -> list[float]:
    return [r.seconds for r in results]


def ok_count(results: Sequence[Result]) -> int:
    return sum(r.status == 200 for r in results)


def statuses(results: Sequence[Result]) -> str:
    seen: dict[str, int] = {}
    for r in results:
        key = str(r.status) if r.status else r.error
        seen[key] = seen.get(key, 0) + 1
    return ", ".join(f"{k}×{v}" for k, v in sorted(seen.items()))


def log_problems(log: Path) -> list[str]:
    """WARNING/ERROR lines and tracebacks from the serve log, without their timestamps."""
    if not log.exists():
        return []
    lines = []
    for line in log.read_text(errors="replace").splitlines():
        if " ERROR " in line or " WARNING " in line or " CRITICAL " in line or line.startswith("Traceback"):
            lines.append(line.split(" ", 2)[-1] if line[:2].isdigit() else line)
    return lines


def run(count: int, concurrency: int, logs: Path, *, timing: bool = True) -> list[str]:
    """Run the bench and print its table; returns the reasons it failed (empty when it passed).
    `timing=False` leaves out the verdict that depends on the machine's speed (the 3 s ack
    deadline), as CI runs it: counts, statuses and exact runs only."""
    serve_log = logs / "serve.log"
    with ExitStack() as stack:
        local = stack.enter_context(LocalRedis())
        redis = Redis.from_url(local.url)
        stack.callback(redis.close)
        slack = FakeSlack()
        slack_server = stack.enter_context(ServerThread(slack.app()))
        port = free_port()
        serve = stack.enter_context(running(["serve"], serve_environment(local.url, slack_server.url, port), serve_log))
        wait_healthy(f"http://127.0.0.1:{port}/healthz", serve, "deepthread serve", serve_log)
        events_url = f"http://127.0.0.1:{port}/slack/events"
        baseline_url = stack.enter_context(baseline_server(free_port()))
        queue = Queue(QUEUE_NAME, connection=redis)
        envelopes = mentions(slack, count)

        # Baseline first, so the background work our burst leaves behind cannot slow it down.
        baseline = asyncio.run(fire(baseline_url, signed(envelopes), concurrency))

        requests = signed(envelopes)
        first_send = time.time()
        ours = asyncio.run(fire(events_url, requests, concurrency))
        enqueued = wait_for_jobs(queue, count, ENQUEUE_TIMEOUT_SECONDS)
        last = last_enqueued_at(queue)
        threads = [e["event"]["ts"] for e in envelopes]
        # Every original post is attributed to its own mention's thread and waited for, so a
        # reply still draining through the post slot is never counted against the retries.
        posts_before = wait_for_posts(slack, threads, ENQUEUE_TIMEOUT_SECONDS)
        undelivered = sum(posts_before.get(t, 0) < POSTS_PER_RUN for t in threads)

        retries = asyncio.run(fire(events_url, signed(envelopes, retry=True), concurrency))
        settle_until = time.monotonic() + RETRY_SETTLE_SECONDS
        while time.monotonic() < settle_until and queue.count == enqueued:
            time.sleep(POLL_SECONDS)
        after_retries = queue.count
        retry_runs = after_retries - enqueued
        retry_posts = extra_posts(posts_before, posts_by_thread(slack), threads)
        serve_alive = serve.poll() is None

    ours_s, base_s, retry_s = latencies(ours), latencies(baseline), latencies(retries)
    p50, p99, worst = percentile(ours_s, 50), percentile(ours_s, 99), max(ours_s)
    b50, b99, bworst = percentile(base_s, 50), percentile(base_s, 99), max(base_s)
    rows = [
        ("mentions sent", f"{count} (concurrency {concurrency})"),
        ("acks 200", f"{ok_count(ours)}/{count}" + ("" if ok_count(ours) == count else f"  [{statuses(ours)}]")),
        ("ack latency p50 / p99 / max", f"{ms(p50)} / {ms(p99)} / {ms(worst)} ms"),
        ("baseline p50 / p99 / max", f"{ms(b50)} / {ms(b99)} / {ms(bworst)} ms"),
        ("ratio ours/baseline p50 / p99", f"{p50 / b50:.1f}x / {p99 / b99:.1f}x"),
        ("runs enqueued", f"{enqueued}/{count}"),
        ("time to last enqueue", f"{last - first_send:.2f} s after the first send" if last else "n/a"),
        ("retry acks 200 (p99)", f"{ok_count(retries)}/{count} ({ms(percentile(retry_s, 99))} ms)"),
        ("threads with their run's posts", f"{count - undelivered}/{count}"),
        ("retries that started a run", f"{retry_runs} (must be 0; replies posted in their threads: {retry_posts})"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"\ndeepthread serve — ack of {count} concurrent app_mention events (no worker; runs only enqueued)")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")

    problems = log_problems(serve_log)
    if problems:
        print(f"\nserve log: {len(problems)} warning/error lines; first distinct ones:")
        for line in list(dict.fromkeys(problems))[:5]:
            print(f"  {line}")

    failures = []
    if ok_count(ours) != count or ok_count(retries) != count:
        failures.append(f"not every ack was 200 (first: {statuses(ours)}; retries: {statuses(retries)})")
    late = sum(s > ACK_DEADLINE_SECONDS for s in ours_s + retry_s)
    if late and timing:
        failures.append(f"{late} acks took longer than Slack's {ACK_DEADLINE_SECONDS:.0f} s")
    if enqueued != count:
        failures.append(f"{enqueued} runs enqueued, expected {count}")
    if undelivered:
        failures.append(f"{undelivered} mentions' threads never got their run's {POSTS_PER_RUN} posts")
    if retry_runs or retry_posts:
        failures.append(f"retries started {retry_runs} runs and posted {retry_posts} replies")
    if not serve_alive:
        failures.append("deepthread serve exited during the bench")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ack", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mentions", type=int, default=DEFAULT_MENTIONS, help="events to send (default %(default)s)")
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                        help="requests in flight and connections (default %(default)s)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the serve log even when the bench passes")
    args = parser.parse_args(argv)
    if args.mentions < 1 or args.concurrency < 1:
        parser.error("--mentions and --concurrency must be at least 1")

    logs = Path(tempfile.mkdtemp(prefix="deepthread-bench-ack-"))
    failures = ["interrupted"]
    try:
        with terminate_raises():
            failures = run(args.mentions, args.concurrency, logs)
    except KeyboardInterrupt:
        print("\ninterrupted; everything the bench started has been stopped", file=sys.stderr)
        return 130
    except Exception as exc:
        failures = [f"{type(exc).__name__}: {exc}"]
    finally:
        if failures or args.keep_logs:
            print(f"\nserve log kept in {logs / 'serve.log'}", file=sys.stderr)
        else:
            shutil.rmtree(logs, ignore_errors=True)
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
