"""How fast `deepthread serve` acks a burst of mentions, and whether every one becomes exactly one run.

    .venv/bin/python -m bench.ack [--mentions N] [--concurrency C] [--channels K] [--keep-logs]

Starts a private redis-server, a fake Slack Web API and a real `deepthread serve` (HTTP mode),
fires N signed, distinct app_mention events at once, then re-sends each as Slack's retry.
No worker runs, so the RQ queue length counts the runs that were started. The same burst
against a bare aiohttp server (no Bolt, no Redis) is the baseline: compare the ratio, not ms.
Both listen with the same backlog (DEEPTHREAD_LISTEN_BACKLOG's default), and the kernel's count of
connections dropped at a full backlog is read around each burst (TcpExtListenOverflows, as `nstat`
shows it): a dropped SYN is retried by its client a second later, so the goal is 0.

Each started run posts two messages in its mention's thread, and Slack takes about one
chat.postMessage a second per channel (serve allows itself CALLS_PER_WINDOW of them a minute per
channel, bot/slack/ratelimit.py): 200 mentions in one channel are 400 posts, over seven minutes
of that channel's slot. So the burst is spread over as many channels as keep each one's posts
within one window, as a burst across an organisation is (`--channels` sets it: with 1, the wait
for the posts grows by a window for each window's worth of posts). Every post is attributed to
its event by the run it carries (the marker of bot/publishing/posting.py), never by when it came.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis import Redis
from rq import Queue

from bench.common import (
    Request,
    Result,
    baseline_server,
    fire,
    listen_overflows,
    percentile,
    terminate_raises,
    wait_healthy,
)
from bot.cli.local_redis import LocalRedis
from bot.slack.ratelimit import CALLS_PER_WINDOW, WINDOW_SECONDS
from jobs import RunStore
from tests.fakes.server import ServerThread, free_port
from tests.fakes.slack import FakeSlack, app_mention_event, sign
from tests.processes import SIGNING_SECRET, environment, running

QUEUE_NAME = "deepthread"  # jobs.keys.QUEUE, spelled out: the bench checks the name the worker listens on
CHANNEL_PREFIX = "C0BENCH"
DEFAULT_MENTIONS = 200
DEFAULT_CONCURRENCY = 200
# Slack retries an event that is not acked with a 2xx within 3 s.
ACK_DEADLINE_SECONDS = 3.0
# How long the N runs may take to reach the queue after the burst before the bench gives up, and
# the posts of the channel's last window to land once that window opens.
ENQUEUE_TIMEOUT_SECONDS = 60.0
# The chat.postMessage calls serve makes in one channel per window (per minute): its share of
# Slack's ~1 a second per channel. Posts past it wait for the next window.
POSTS_PER_CHANNEL_WINDOW = CALLS_PER_WINDOW["chat.postMessage"]
# After the retries are acked, how long their listeners get to (wrongly) start a run.
RETRY_SETTLE_SECONDS = 3.0
POLL_SECONDS = 0.02
# Ports nothing listens on: serve never calls the model or the web, only the worker would.
UNUSED_URL = "http://127.0.0.1:9"


def channels_for(count: int) -> int:
    """As many channels as keep each one's posts (POSTS_PER_RUN a mention) within one window."""
    return max(1, math.ceil(count * POSTS_PER_RUN / POSTS_PER_CHANNEL_WINDOW))


def channel_of(i: int, channels: int) -> str:
    return f"{CHANNEL_PREFIX}{i % channels}" if channels > 1 else CHANNEL_PREFIX


def post_wait_seconds(count: int, channels: int) -> float:
    """How long the originals' posts may take to land: the busiest channel's posts fill
    `windows` of its slot, the last of which opens (windows - 1) windows after the burst."""
    busiest = math.ceil(count / channels) * POSTS_PER_RUN
    windows = math.ceil(busiest / POSTS_PER_CHANNEL_WINDOW)
    return (windows - 1) * WINDOW_SECONDS + ENQUEUE_TIMEOUT_SECONDS


def mentions(slack: FakeSlack, count: int, channels: int) -> list[dict[str, Any]]:
    """Distinct app_mention envelopes (own event_id and ts), dealt round the channels, each
    message seeded in the fake workspace."""
    envelopes = [app_mention_event(f"bench question {i}: what is the expense ratio of fund {i}?",
                                   channel=channel_of(i, channels))
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
RUN_PARTS = ("progress", "report")
# The metadata event type each of a run's messages carries, with its run id and part
# (bot.publishing.posting.MARKER_EVENT, spelled out: the bench checks what lands in Slack).
MARKER_EVENT = "deepthread_run_message"


@dataclass(frozen=True)
class Post:
    """One chat.postMessage call in a mention's thread, and what it says it is."""

    thread: str
    run: str | None  # the run id its marker names; None for a reply with no marker
    part: str | None


@dataclass(frozen=True)
class Tally:
    delivered: int  # mentions whose thread holds its own run's progress and report, once each
    strays: int  # every other post in the mentions' threads: unmarked, another run's, a second copy


def posts_in(slack: FakeSlack, threads: Sequence[str]) -> list[Post]:
    """chat.postMessage calls in the mentions' threads, in the order the fake received them."""
    wanted = set(threads)
    posts = []
    for call in slack.calls_of("chat.postMessage"):
        thread = str(call.get("thread_ts") or "")
        if thread not in wanted:
            continue
        meta = call.get("metadata")
        if isinstance(meta, str):  # a form-encoded call sends it as JSON text
            meta = json.loads(meta)
        if isinstance(meta, dict) and meta.get("event_type") == MARKER_EVENT:
            payload = meta.get("event_payload") or {}
            posts.append(Post(thread, str(payload.get("run_id")), str(payload.get("part"))))
        else:
            posts.append(Post(thread, None, None))
    return posts


def tally(posts: Sequence[Post], run_of: dict[str, str]) -> Tally:
    """Each post attributed to its event: a mention's (its thread's) own run's first progress and
    first report are the mention's; anything else in a mention's thread is a stray, whenever it came."""
    own = {(p.thread, p.run, p.part) for p in posts
           if p.run is not None and run_of.get(p.thread) == p.run and p.part in RUN_PARTS}
    delivered = sum(all((t, r, part) in own for part in RUN_PARTS) for t, r in run_of.items())
    return Tally(delivered=delivered, strays=len(posts) - len(own))


def wait_for_posts(slack: FakeSlack, threads: Sequence[str], run_of: dict[str, str], timeout: float) -> Tally:
    """Until every mention's thread that has a run holds that run's posts (or `timeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        counts = tally(posts_in(slack, threads), run_of)
        if counts.delivered == len(run_of) or time.monotonic() > deadline:
            return counts
        time.sleep(POLL_SECONDS)


def runs_by_thread(redis: Redis, queue: Queue) -> tuple[dict[str, str], int]:
    """The run each queued job is for, by the thread it answers (a mention's ts), and how many
    mentions' threads have more than one run (each such thread keeps its first)."""
    store = RunStore(redis)
    run_of: dict[str, str] = {}
    doubled = 0
    for job in sorted(queue.get_jobs(), key=lambda j: j.enqueued_at.timestamp() if j.enqueued_at else 0.0):
        run_id = str(job.args[0])
        thread = str(store.get(run_id).run.thread_ts or "")
        if thread in run_of:
            doubled += 1
        else:
            run_of[thread] = run_id
    return run_of, doubled


def attached(redis: Redis, run_ids: Sequence[str]) -> int:
    """Runs whose messages are attached (jobs.Runs.attach_messages): from then on the publisher
    edits them and a reaction or button on them finds the run. Printed, not a verdict."""
    store = RunStore(redis)
    return sum(store.get(run_id).run.progress_message is not None for run_id in run_ids)


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


def burst(url: str, requests: Sequence[Request], concurrency: int) -> tuple[list[Result], int | None]:
    """The requests fired at once, and the connections the kernel dropped meanwhile at a full listen
    backlog (each costs its client a retry a second later; None where the count cannot be read)."""
    before = listen_overflows()
    results = asyncio.run(fire(url, requests, concurrency))
    after = listen_overflows()
    return results, (after - before if before is not None and after is not None else None)


def overflow_text(count: int | None) -> str:
    return "n/a (no /proc/net/netstat)" if count is None else str(count)


def run(count: int, concurrency: int, logs: Path, *, timing: bool = True, channels: int | None = None) -> list[str]:
    """Run the bench and print its table; returns the reasons it failed (empty when it passed).
    `timing=False` leaves out the verdict that depends on the machine's speed (the 3 s ack
    deadline), as CI runs it: counts, statuses and exact runs only. `channels`: how many the
    mentions are spread over (default: channels_for(count))."""
    channels = channels or channels_for(count)
    post_wait = post_wait_seconds(count, channels)
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
        envelopes = mentions(slack, count, channels)

        # Baseline first, so the background work our burst leaves behind cannot slow it down.
        baseline, base_overflows = burst(baseline_url, signed(envelopes), concurrency)

        requests = signed(envelopes)
        first_send = time.time()
        ours, our_overflows = burst(events_url, requests, concurrency)
        enqueued = wait_for_jobs(queue, count, ENQUEUE_TIMEOUT_SECONDS)
        last = last_enqueued_at(queue)
        threads = [e["event"]["ts"] for e in envelopes]
        found, doubled = runs_by_thread(redis, queue)
        run_of = {t: found[t] for t in threads if t in found}  # the run each mention started
        runless = count - len(run_of)
        # Every post is attributed to its event by the run it carries, so one of a mention's own
        # posts still waiting for its channel's slot is never counted against the retries; the
        # wait covers the windows the busiest channel's posts need.
        before = wait_for_posts(slack, threads, run_of, post_wait)
        posts_landed = time.time()
        undelivered = count - before.delivered

        retries = asyncio.run(fire(events_url, signed(envelopes, retry=True), concurrency))
        settle_until = time.monotonic() + RETRY_SETTLE_SECONDS
        while time.monotonic() < settle_until and queue.count == enqueued:
            time.sleep(POLL_SECONDS)
        after_retries = queue.count
        retry_runs = after_retries - enqueued
        after = tally(posts_in(slack, threads), run_of)
        retry_posts = after.strays - before.strays
        shown = attached(redis, list(run_of.values()))
        limited = slack.count_429
        serve_alive = serve.poll() is None

    ours_s, base_s, retry_s = latencies(ours), latencies(baseline), latencies(retries)
    p50, p99, worst = percentile(ours_s, 50), percentile(ours_s, 99), max(ours_s)
    b50, b99, bworst = percentile(base_s, 50), percentile(base_s, 99), max(base_s)
    rows = [
        ("mentions sent", f"{count} (concurrency {concurrency}) over {channels} channel{'s' * (channels > 1)}"),
        ("acks 200", f"{ok_count(ours)}/{count}" + ("" if ok_count(ours) == count else f"  [{statuses(ours)}]")),
        ("ack latency p50 / p99 / max", f"{ms(p50)} / {ms(p99)} / {ms(worst)} ms"),
        ("baseline p50 / p99 / max", f"{ms(b50)} / {ms(b99)} / {ms(bworst)} ms"),
        ("ratio ours/baseline p50 / p99", f"{p50 / b50:.1f}x / {p99 / b99:.1f}x"),
        ("listen overflows (ours / baseline)", f"{overflow_text(our_overflows)} / {overflow_text(base_overflows)} "
                                               f"(SYNs dropped at a full backlog during each burst; must be 0)"),
        ("runs enqueued", f"{enqueued}/{count}"),
        ("time to last enqueue", f"{last - first_send:.2f} s after the first send" if last else "n/a"),
        ("retry acks 200 (p99)", f"{ok_count(retries)}/{count} ({ms(percentile(retry_s, 99))} ms)"),
        ("threads with their run's posts", f"{before.delivered}/{count} ({posts_landed - first_send:.2f} s after the "
                                           f"first send; wait {post_wait:.0f} s)"),
        ("other posts in the threads", f"{before.strays} (must be 0)"),
        ("Slack 429 answers", f"{sum(limited.values())}" + (f" ({limited})" if limited else "")),
        ("runs attached to their messages", f"{shown}/{count} when the bench ends (printed, not a verdict)"),
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
    if our_overflows and timing:  # how fast a loop accepts is the machine's too: a timing verdict
        failures.append(f"{our_overflows} connections overflowed serve's listen backlog during the burst")
    if enqueued != count:
        failures.append(f"{enqueued} runs enqueued, expected {count}")
    if runless or doubled:
        failures.append(f"{runless} mentions started no run and {doubled} started more than one")
    if undelivered:
        failures.append(f"{undelivered} mentions' threads did not get their run's {POSTS_PER_RUN} posts "
                        f"within {post_wait:.0f} s")
    if before.strays:
        failures.append(f"{before.strays} posts in the mentions' threads are not their runs' progress and report")
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
    parser.add_argument("--channels", type=int, default=None,
                        help="channels the mentions are spread over (default: enough that each channel's posts fit "
                             f"serve's {POSTS_PER_CHANNEL_WINDOW} a minute)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the serve log even when the bench passes")
    args = parser.parse_args(argv)
    if args.mentions < 1 or args.concurrency < 1 or (args.channels is not None and args.channels < 1):
        parser.error("--mentions, --concurrency and --channels must be at least 1")

    logs = Path(tempfile.mkdtemp(prefix="deepthread-bench-ack-"))
    failures = ["interrupted"]
    try:
        with terminate_raises():
            failures = run(args.mentions, args.concurrency, logs, channels=args.channels)
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
