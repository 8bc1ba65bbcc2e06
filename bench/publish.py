"""Publishing 20 busy runs to one Slack workspace whose chat.update is capped at Tier 3.

    .venv/bin/python -m bench.publish [--runs 20] [--seconds 30] [--publishers 2] [--skip-baseline]
                                      [--modes message,stream]

Scripted runs (no model) change their run state through `jobs.RunStore.apply` with agent
RunEvents (Progress, SourceAdded, UsageRecorded, SectionWritten, SectionRevised, Finished),
one every 100–300 ms per run, each run in its own thread. Real Publisher instances (each
with its own Redis connection and Slack client, as separate processes would have) follow
the updates stream and write to the fake Slack Web API over HTTP, which answers a 429 with
Retry-After past 50 chat.update calls per minute. A few runs grow reports too big for one
message, so the full report lives in a canvas in the thread, edited section by section.

All runs end at about the same moment, the worst case for "final states first": ours keeps
two chat.update slots of the window for every run still owed its final state and spaces
routine syncs by each run's fair share of the rest, so the finals go out at once.

When every run has ended, the bench waits for Slack to settle and checks that every report
and progress message is exactly the rendering of its run's final state (and every canvas
exactly its report's sections). The same workload then runs against the baseline:
no coalescing and no shared limiter (429s left to the client's retry handler, as a naive
publisher would). Exit 1 when our publisher's final Slack state is not exact, or when it
received a 429.

Both progress modes run (DEEPTHREAD_PROGRESS): `message` edits a progress message, `stream`
shows progress as Slack's native stream (bot/publishing/stream_sync.py; the fake caps chat.appendStream
at Tier 4 and chat.startStream/stopStream at Tier 2). The table reports Slack calls per run by
method for each. "Final state shown" is when a person sees the run's end: both messages exact in
message mode; in stream mode the report exact and the end state appended to the run's last
stream (at chat.appendStream's Tier 4); "exact" at the end also wants that stream stopped
(chat.stopStream, Tier 2, which may trail).
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler, async_default_handlers
from slack_sdk.web.async_client import AsyncWebClient

from agent import Finished, Progress, SectionRevised, SectionWritten, Source, SourceAdded, UsageRecorded
from bot import keys
from bot.cli.local_redis import LocalRedis
from bot.publishing.canvas_render import render_canvas
from bot.publishing.canvas_sync import CanvasRecord
from bot.publishing.message_parts import CanvasView
from bot.publishing.progress_render import render_progress
from bot.publishing.publisher import Publisher, remember_rendered
from bot.publishing.report_render import render_report, render_report_parts
from bot.publishing.stream_records import StreamRecords
from bot.publishing.stream_render import end_text
from bot.publishing.stream_sync import open_stream
from bot.settings import DEFAULT_STOP_REACTION, StreamConfig
from bot.slack.client import LimitedWebClient
from bot.slack.outgoing import guard
from bot.slack.ratelimit import SlackRateLimiter
from bot.surface.app import SLACK_429_RETRIES
from jobs import Run, RunState, RunStore
from tests.fakes import slack_canvases, slack_streaming
from tests.fakes.server import ServerThread
from tests.fakes.slack import TEAM_ID, FakeSlack

CHANNEL = "C0BENCH"
TIER_3_PER_MINUTE = 50  # what the fake Slack enforces on chat.update, per workspace
# What it enforces on the stream methods (their pages: Tier 2 and Tier 4).
STREAM_TIERS = {"chat.startStream": 20, "chat.appendStream": 100, "chat.stopStream": 20}
MODES = ("message", "stream")
DEFAULT_RUNS = 20
DEFAULT_SECONDS = 30.0
EVENT_GAP_SECONDS = (0.1, 0.3)  # between two events of one run
BIG_RUN_EVERY = 7  # every 7th run writes long sections: its report moves into a canvas
MAX_SECTIONS_SMALL = 6
# After the workload, how long Slack may take to show every final state.
SETTLE_TIMEOUT_SECONDS = 300.0
POLL_SECONDS = 0.25  # how often a watcher looks at the fake Slack (the figures' resolution)
SEED = 20261130


@dataclass
class Script:
    """One run's events, decided up front so ours and the baseline replay the same workload."""

    index: int
    big: bool
    steps: list[tuple[float, object]] = field(default_factory=list)  # (gap before, event)


def script(index: int, seconds: float) -> Script:
    rng = random.Random(SEED + index)
    plan = Script(index=index, big=index % BIG_RUN_EVERY == 0)
    sources = sections = revisions = requests = 0
    elapsed = 0.0
    while elapsed < seconds:
        gap = rng.uniform(*EVENT_GAP_SECONDS)
        elapsed += gap
        roll = rng.random()
        max_sections = 10_000 if plan.big else MAX_SECTIONS_SMALL
        if roll < 0.35:
            event: object = Progress(phase="researching", activity=f"Reading page {rng.randint(1, 999)} of run {index}")
        elif roll < 0.6 or sources == 0:
            sources += 1
            event = SourceAdded(source=Source(
                marker=f"s{sources}", url=f"https://example.org/run{index}/{sources}", title=f"Page {sources}",
                passage=f"Fund {sources} has an expense ratio of 0.0{sources % 10}% and tracks its index closely."))
        elif roll < 0.75:
            requests += 1
            event = UsageRecorded(requests=requests, input_tokens=requests * 900, output_tokens=requests * 80)
        elif roll < 0.93 and sections < max_sections:
            sections += 1
            cites = " ".join(f"Claim {k} holds [s{rng.randint(1, sources)}]." for k in range(12 if plan.big else 3))
            body = f"**Finding {sections}.** {cites}\n\n- detail one\n  - nested detail\n\n| fund | fee |\n|--|--|\n| A | 0.03% |"
            event = SectionWritten(section_id=f"sec{sections}", title=f"Finding {sections}", body=body)
        elif sections and revisions < 4:
            revisions += 1
            target = rng.randint(1, sections)
            event = SectionRevised(section_id=f"sec{target}", reason="newer data",
                                   body=f"Corrected finding {target} [s{rng.randint(1, sources)}], revision {revisions}.")
        else:
            event = Progress(phase="researching", activity=f"Comparing sources for run {index}")
        plan.steps.append((gap, event))
    if index == 3:
        plan.steps.append((0.1, Finished(status="stopped", summary="", reason="stopped by <@U0ANA>")))
    else:
        plan.steps.append((0.1, Finished(status="completed", summary="In short: all cheap [s1][s2].", reason="")))
    return plan


def slack_client(url: str) -> AsyncWebClient:
    """Like bot.app.slack_client: the default retry handlers plus the 429 handler."""
    handlers = async_default_handlers() + [AsyncRateLimitErrorRetryHandler(max_retry_count=SLACK_429_RETRIES)]
    return AsyncWebClient(token="xoxb-bench", base_url=f"{url}/api/", retry_handlers=handlers)


def publisher(redis: Redis, connection: AsyncRedis, store: RunStore, url: str, ours: bool,
              mode: str = "message") -> Publisher:
    """One publisher as a process of its own would have it: its own Redis connection and Slack client."""
    streams = StreamConfig(mode=mode)  # type: ignore[arg-type]
    if ours:
        return Publisher(redis, connection, store, slack_client(url), streams=streams)
    return Publisher(redis, connection, store, slack_client(url), shared_limiter=False, update_interval=0,
                     streams=streams)


async def start_runs(redis: Redis, client: AsyncWebClient, count: int, mode: str = "message") -> list[RunState]:
    """What the mention listener does: create the run, post both messages, remember their renderings."""
    store = RunStore(redis)
    states = []
    for i in range(count):
        thread_ts = f"1800000000.{i + 1:06d}"
        state = store.create(Run(team=TEAM_ID, channel=CHANNEL, thread_ts=thread_ts, requester="U0ANA",
                                 question=f"Bench question {i}: compare the fees of funds A, B and C"))
        progress, report = render_progress(state), render_report(state)
        progress_ts = await open_stream(client, StreamRecords(redis), StreamConfig(mode=mode), state,  # type: ignore[arg-type]
                                        DEFAULT_STOP_REACTION)
        if progress_ts is None:
            posted = await client.chat_postMessage(channel=CHANNEL, thread_ts=thread_ts, text=progress.text,
                                                   blocks=progress.blocks)
            progress_ts = posted["ts"]
        pinned = await client.chat_postMessage(channel=CHANNEL, thread_ts=thread_ts, text=report.text,
                                               blocks=report.blocks)
        state = store.set_messages(state.run.id, progress=progress_ts, report=pinned["ts"])
        remember_rendered(redis, state.run.id, progress=progress.digest(), report=report.digest())
        states.append(state)
    return states


def drive(redis_url: str, state: RunState, plan: Script, stop: threading.Event) -> tuple[int, float, RunState]:
    """Apply one run's events at their pace (in a thread, as a worker would).

    Returns how many were applied, when the last one was (monotonic) and the final state.
    """
    redis = Redis.from_url(redis_url)
    store = RunStore(redis)
    applied = 0
    try:
        for gap, event in plan.steps:
            if stop.wait(gap):
                break
            state = store.apply(state, event)  # type: ignore[arg-type]
            applied += 1
    finally:
        redis.close()
    return applied, time.monotonic(), state


@dataclass(frozen=True)
class Expected:
    """What Slack must show for a run's final state: both messages, and the canvas if it has one."""

    state: RunState
    report: tuple[str, object]
    progress: tuple[str, object]
    canvas: list[str] | None  # each canvas section's Markdown, in order
    streamed: bool = False

    @classmethod
    def of(cls, state: RunState, raw_canvas: bytes | None, streamed: bool = False) -> Expected:
        """What the final state renders to, given the run's canvas record as Redis holds it."""
        record = CanvasRecord.model_validate_json(raw_canvas) if raw_canvas else None
        view = CanvasView(always=record is not None, permalink=record.permalink if record else "",
                          title=record.title if record else "")
        parts, progress = render_report_parts(state, canvas=view), render_progress(state)
        canvas = [p.markdown for p in render_canvas(state).parts] if parts.canvas is not None else None
        return cls(state, _as_sent(parts.message.text, parts.message.blocks), _as_sent(progress.text, progress.blocks),
                   canvas, streamed)

    def shown_by(self, slack: FakeSlack) -> bool:
        """A person sees the run's end: the report (and its canvas), and the progress's end state."""
        return not self.difference(slack)

    def difference(self, slack: FakeSlack) -> str:
        """What Slack shows short of the run's end ("" when nothing): which part, and how."""
        run = self.state.run
        report = slack.message(CHANNEL, run.report_message or "")
        if report is None or (report.text, report.blocks) != self.report:
            return f"report message {run.report_message}: " + (_diff((report.text, report.blocks), self.report) if report else "gone")
        if self.streamed:
            streams = slack_streaming.streams_in(slack, CHANNEL, run.thread_ts or "")
            if not streams or not streams[-1].text.rstrip().endswith(end_text(self.state)):
                return f"last stream lacks the end: {streams[-1].text[-120:]!r}" if streams else "no stream"
        else:
            progress = slack.message(CHANNEL, run.progress_message or "")
            if progress is None or (progress.text, progress.blocks) != self.progress:
                shown = _diff((progress.text, progress.blocks), self.progress) if progress else "gone"
                sent = [c.get("text", "")[:60] for c in slack.calls_of("chat.update") if c.get("ts") == run.progress_message]
                return f"progress message {run.progress_message}: {shown}; chat.update sent it {sent}"
        canvases = [c for c in slack_canvases.canvases(slack) if c.title.endswith(f"question {_number(run)}: "
                                                                                  "compare the fees of funds A, B and C")]
        shown = [s.markdown for s in canvases[0].sections] if canvases else None
        if shown != self.canvas:
            return f"canvas: {len(shown or [])} sections shown, {len(self.canvas or [])} expected"
        files = [f for f in slack.files() if f.thread_ts == run.thread_ts]
        return f"{len(files)} file(s) in the thread" if files else ""

    def settled_in(self, slack: FakeSlack) -> bool:
        """Shown, and nothing left to do: a streamed run's last stream stopped too."""
        if not self.shown_by(slack):
            return False
        if self.streamed:
            streams = slack_streaming.streams_in(slack, CHANNEL, self.state.run.thread_ts or "")
            return not streams[-1].streaming
        return True


def _where(task: asyncio.Task[None]) -> str:
    """Where a stuck sync waits: the chain of awaits from the task's coroutine inwards."""
    chain, awaited = [], task.get_coro()
    while awaited is not None and len(chain) < 30:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is not None:
            chain.append(f"{frame.f_code.co_name} ({Path(frame.f_code.co_filename).name}:{frame.f_lineno})")
        nxt = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
        if nxt is None and frame is None:
            chain.append(repr(awaited)[:120])
        awaited = nxt
    return " -> ".join(chain)


def _as_sent(text: str, blocks: object) -> tuple[str, object]:
    """A rendered message as the client puts it on the wire (bot/slack/outgoing.py: every mrkdwn text
    object verbatim, every text inert), which is what Slack then shows."""
    body, _, _ = guard("chat.update", {"text": text, "blocks": blocks}, None, None)
    return body["text"], body["blocks"]


def _diff(shown: tuple[str, object], wanted: tuple[str, object]) -> str:
    """Where a message parts from what it should be: its text, else its first differing block."""
    if shown[0] == wanted[0]:
        shown_blocks, wanted_blocks = list(shown[1] or []), list(wanted[1] or [])  # type: ignore[call-overload]
        at = next((i for i, (a, b) in enumerate(zip(shown_blocks, wanted_blocks, strict=False)) if a != b), None)
        if at is None:
            return f"same text, {len(shown_blocks)} blocks where {len(wanted_blocks)} are expected"
        return f"same text, block {at} shows {str(shown_blocks[at])[:300]!r}, should show {str(wanted_blocks[at])[:300]!r}"
    text, goal = shown[0], wanted[0]
    at = next((i for i, (a, b) in enumerate(zip(text, goal, strict=False)) if a != b), min(len(text), len(goal)))
    return f"shows {text[max(0, at - 40):at + 80]!r}, should show {goal[max(0, at - 40):at + 80]!r}"


def _number(run: Run) -> int:
    return int(run.question.split(":", 1)[0].rsplit(" ", 1)[1])


@dataclass
class Figures:
    label: str
    events: int
    updates_per_run: list[int]
    count_429: int
    by_method_429: dict[str, int]
    other_calls: Counter[str]
    workload_seconds: float
    wall_seconds: float
    latencies: list[float]  # per run: from its last event until Slack showed its final state exactly
    exact_runs: int
    runs: int
    in_canvas: int
    calls_per_run: list[Counter[str]] = field(default_factory=list)  # every Slack write of each run, by method
    not_exact: list[str] = field(default_factory=list)  # for each run not shown exactly, what differs


async def follow(slack: FakeSlack, pool: ThreadPoolExecutor, run: asyncio.Future[tuple[int, float, RunState]],
                 deadline: float, redis: Redis, streamed: bool = False) -> tuple[int, float, str]:
    """Wait for a run's last event, then for Slack to show its final state, then for nothing to be
    left to do; (events, latency until shown, what is not exact at the end: "" when all is).

    The watcher shares the publishers' process, so it must stay cheap: one Redis client for all
    watchers, and the expected rendering rebuilt only when what it depends on (the canvas record,
    whose link the report shows once the canvas exists) changes."""
    applied, finished_at, state = await run
    loop = asyncio.get_running_loop()
    canvas_key = keys.canvas(state.run.team, CHANNEL, state.run.report_message or "")
    raw = await loop.run_in_executor(pool, redis.get, canvas_key)
    expected = await loop.run_in_executor(pool, Expected.of, state, raw, streamed)
    while difference := expected.difference(slack):
        if time.monotonic() > deadline:
            return applied, time.monotonic() - finished_at, f"run {state.run.id}: {difference}"
        await asyncio.sleep(POLL_SECONDS)
        if (fresh := await loop.run_in_executor(pool, redis.get, canvas_key)) != raw:
            raw = fresh
            expected = await loop.run_in_executor(pool, Expected.of, state, raw, streamed)
    latency = time.monotonic() - finished_at
    while not expected.settled_in(slack):
        if time.monotonic() > deadline:
            return applied, latency, f"run {state.run.id}: its last stream was never stopped"
        await asyncio.sleep(POLL_SECONDS)
    return applied, latency, ""


async def one_pass(label: str, runs: int, seconds: float, publishers: int, *, ours: bool,
                   mode: str = "message") -> Figures:
    local = LocalRedis().start()
    slack = FakeSlack()
    streamed = mode == "stream"
    try:
        with ServerThread(slack.app()) as server:
            slack.set_rate_limit("chat.update", TIER_3_PER_MINUTE)
            for method, per_minute in STREAM_TIERS.items():
                slack.set_rate_limit(method, per_minute)
            redis = Redis.from_url(local.url)
            # The mention listener's client: its writes count against the same limiter as the publishers'.
            setup_redis = AsyncRedis.from_url(local.url)
            setup_client = LimitedWebClient(token="xoxb-bench", base_url=f"{server.url}/api/",
                                            limiter=SlackRateLimiter(setup_redis))
            states = await start_runs(redis, setup_client, runs, mode)
            plans = [script(i, seconds) for i in range(runs)]
            connections = [AsyncRedis.from_url(local.url) for _ in range(publishers)]
            store = RunStore(redis)
            instances = [publisher(redis, c, store, server.url, ours, mode) for c in connections]
            stop_publishers = asyncio.Event()
            tasks = [asyncio.create_task(p.run(stop_publishers)) for p in instances]
            stop_drivers = threading.Event()
            loop = asyncio.get_running_loop()
            started = time.monotonic()
            deadline = started + seconds + SETTLE_TIMEOUT_SECONDS
            with ThreadPoolExecutor(max_workers=runs + 2, thread_name_prefix="run") as pool:
                drivers = [loop.run_in_executor(pool, drive, local.url, s, p, stop_drivers)
                           for s, p in zip(states, plans, strict=True)]
                outcomes = await asyncio.gather(*(follow(slack, pool, d, deadline, redis, streamed)
                                                  for d in drivers))
                workload = max(finished for _, finished, _ in await asyncio.gather(*drivers)) - started
                finals = [state for _, _, state in await asyncio.gather(*drivers)]
            wall = time.monotonic() - started
            stuck = [f"run {run_id}: a sync still under way at the end, at {_where(task)}"
                     for p in instances for run_id, task in p._tasks.items()]  # noqa: SLF001 (a diagnosis)
            stuck += [f"{task.get_name()} {'cancelling' if task.cancelling() else ''}: {_where(task)}"
                      for task in asyncio.all_tasks() if task.get_coro().__name__ == "keep"]
            stop_drivers.set()
            stop_publishers.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            for c in [*connections, setup_redis]:
                await c.aclose()
            redis.close()
            by_ts = {f.run.report_message: i for i, f in enumerate(finals)}
            by_ts.update({f.run.progress_message: i for i, f in enumerate(finals)})
            per_run = [0] * runs
            for call in slack.calls_of("chat.update"):
                if call.get("ts") in by_ts:
                    per_run[by_ts[call["ts"]]] += 1
            others = Counter(m for m, _ in slack.calls if m not in ("chat.update", "chat.postMessage"))
            calls_per_run = per_run_calls(slack, finals)
            return Figures(label=label, events=sum(n for n, _, _ in outcomes), updates_per_run=per_run,
                           count_429=sum(slack.count_429.values()), by_method_429=slack.count_429,
                           other_calls=others, workload_seconds=workload,
                           wall_seconds=wall, latencies=[latency for _, latency, _ in outcomes],
                           exact_runs=sum(not why for _, _, why in outcomes), runs=runs,
                           not_exact=[why for _, _, why in outcomes if why] + (stuck if any(
                               why for _, _, why in outcomes) else []),
                           in_canvas=len(slack_canvases.canvases(slack)), calls_per_run=calls_per_run)
    finally:
        local.stop()


def per_run_calls(slack: FakeSlack, finals: list[RunState]) -> list[Counter[str]]:
    """Every Slack write each run caused (the two first posts included), by method, told apart
    by the message or thread each call names."""
    by_key: dict[str, int] = {}
    for i, f in enumerate(finals):
        by_key[f"thread:{f.run.thread_ts}"] = i
        for ts in (f.run.report_message, f.run.progress_message):
            by_key[f"ts:{ts}"] = i
        for stream in slack_streaming.streams_in(slack, CHANNEL, f.run.thread_ts or ""):
            by_key[f"ts:{stream.ts}"] = i
    for canvas in slack_canvases.canvases(slack):
        for i, f in enumerate(finals):
            if canvas.title.endswith(f"question {_number(f.run)}: compare the fees of funds A, B and C"):
                by_key[f"canvas:{canvas.id}"] = i
                by_key[f"title:{canvas.title}"] = i
    counts: list[Counter[str]] = [Counter() for _ in finals]
    for method, params in slack.calls:
        if method in ("chat.startStream", "chat.postMessage") or method.startswith("files."):
            key = f"thread:{params.get('thread_ts')}"
        elif method in ("assistant.threads.setStatus", "agents.sessions.setStatus"):
            key = f"thread:{params.get('thread_ts')}"
        elif method == "canvases.create":
            key = f"title:{params.get('title')}"
        elif method.startswith("canvases."):
            key = f"canvas:{params.get('canvas_id')}"
        else:
            key = f"ts:{params.get('ts') or params.get('timestamp')}"
        if key in by_key:
            counts[by_key[key]][method] += 1
    return counts


def _median_calls(f: Figures) -> str:
    methods = sorted({m for c in f.calls_per_run for m in c})
    total = statistics.median(sum(c.values()) for c in f.calls_per_run)
    parts = [f"{m.removeprefix('chat.').removeprefix('assistant.threads.')} "
             f"{statistics.median(c[m] for c in f.calls_per_run):g}" for m in methods]
    return f"{total:g}: " + ", ".join(parts)


def show(figures: list[Figures]) -> None:
    rows = [
        ("events applied", lambda f: f"{f.events:,}"),
        ("chat.update calls (all)", lambda f: f"{sum(f.updates_per_run):,}"),
        ("chat.update per run min/median/max", lambda f: f"{min(f.updates_per_run)} / "
         f"{statistics.median(f.updates_per_run):g} / {max(f.updates_per_run)}"),
        ("Slack writes per run, median", lambda f: f"{statistics.median(sum(c.values()) for c in f.calls_per_run):g}"),
        ("429s received", lambda f: f"{f.count_429:,}"),
        ("other Slack calls", lambda f: ", ".join(f"{m} {n}" for m, n in sorted(f.other_calls.items())) or "none"),
        ("reports in a canvas", lambda f: f"{f.in_canvas}"),
        ("workload (events) s", lambda f: f"{f.workload_seconds:.1f}"),
        ("final state shown after last event, median/max s", lambda f: f"{statistics.median(f.latencies):.1f} / "
         f"{max(f.latencies):.1f}"),
        ("total wall time s", lambda f: f"{f.wall_seconds:.1f}"),
        ("final Slack state exact", lambda f: f"{f.exact_runs}/{f.runs}"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'':{width}}  " + "  ".join(f"{f.label:>34}" for f in figures))
    for name, value in rows:
        print(f"{name:{width}}  " + "  ".join(f"{value(f):>34}" for f in figures))
    print()
    print("Slack writes per run by method (median):")
    for f in figures:
        print(f"  {f.label:<34} {_median_calls(f)}")
    print()
    print("chat.update calls per run:")
    for f in figures:
        print(f"  {f.label:<34} {' '.join(str(n) for n in f.updates_per_run)}")


def show_tails(passes: dict[str, list[Figures]]) -> None:
    """Each pass's end-state tail, and the median over passes: the maximum of 20 runs moves by a
    second between passes on a 2-core machine, so one pass cannot rank two modes."""
    print("\nfinal state shown after last event, over passes (median / max, s):")
    summary = {}
    for mode, runs in passes.items():
        tails = [max(f.latencies) for f in runs]
        summary[mode] = statistics.median(tails)
        each = "  ".join(f"{statistics.median(f.latencies):.1f}/{max(f.latencies):.1f}" for f in runs)
        print(f"  {mode:<8} {each}   median of the maxima {summary[mode]:.1f}, "
              f"of the medians {statistics.median(statistics.median(f.latencies) for f in runs):.1f}")
    if "stream" in summary and "message" in summary:
        verdict = "at or under" if summary["stream"] <= summary["message"] else "above"
        print(f"  the stream mode's tail is {verdict} the message mode's "
              f"({summary['stream']:.1f} s against {summary['message']:.1f} s)")


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS)
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="how long each run emits events")
    parser.add_argument("--publishers", type=int, default=2)
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--modes", default=",".join(MODES), help="progress modes to run ours in: message,stream")
    parser.add_argument("--passes", type=int, default=1,
                        help="passes of each mode, taking turns; the tails are then compared over all of them")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m in MODES]
    print(f"{args.runs} scripted runs × ~{args.seconds:.0f} s, an event every "
          f"{EVENT_GAP_SECONDS[0] * 1000:.0f}–{EVENT_GAP_SECONDS[1] * 1000:.0f} ms per run, {args.publishers} publishers, "
          f"fake Slack capping chat.update at {TIER_3_PER_MINUTE}/min per workspace\n", flush=True)
    passes: dict[str, list[Figures]] = {mode: [] for mode in modes}
    for _ in range(max(1, args.passes)):  # the modes take turns, so a machine that slows down slows both
        for mode in modes:
            passes[mode].append(await one_pass(f"ours, {mode} (coalesced, limiter)", args.runs, args.seconds,
                                               args.publishers, ours=True, mode=mode))
    results = [runs[0] for runs in passes.values()]
    if not args.skip_baseline:
        results.append(await one_pass("baseline (no coalescing/limiter)", args.runs, args.seconds, args.publishers,
                                      ours=False))
    show(results)
    if args.passes > 1:
        show_tails(passes)
    for ours in [f for runs in passes.values() for f in runs]:
        if ours.exact_runs != ours.runs:
            print(f"\nFAIL ({ours.label}): {ours.runs - ours.exact_runs} run(s) do not show their final state exactly:",
                  *ours.not_exact, sep="\n  ", file=sys.stderr)
            return 1
        if ours.count_429:
            print(f"\nFAIL ({ours.label}): our publisher received {ours.count_429} 429(s) {ours.by_method_429}; "
                  "the shared limiter should prevent them", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
