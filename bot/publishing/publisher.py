"""Keeps each run's Slack messages in step with its run state: the loop.

All Slack writes for a run go through the publisher. It follows the updates stream, decides
which run to sync when, and hands each sync to message_sync.py, which re-renders the whole
state and calls chat.update only when the rendering changed.

- Coalescing: about one sync per run every UPDATE_INTERVAL_SECONDS, counted in Redis so
  it holds across publisher processes (leases.py); a run's final state is flushed at once.
- One sync of a run at a time, across processes (a lease in Redis), so an older rendering
  can never land after a newer one.
- Every call waits for its workspace's shared rate limiter (ratelimit.py, through the
  client in slack_client.py); a 429 pauses that workspace for every run and process.
- Final states first: the limiter keeps two chat.update slots free for every run still owed
  its final state, and routine syncs of a run are spaced by its fair share of what is left
  (adaptive coalescing), so a busy workspace shows fewer progress edits, never a late answer.
  A plan awaiting approval goes out like a final state: the run waits on the team, and with 30
  busy runs a routine sync of it waited ~15 minutes (bench.soak).
- A report too big for one message lives in a canvas shared in the thread, edited section by
  section (canvas_sync.py); where the workspace has no canvases, its full text goes in a file in
  the thread (spill.py).
- The thread is a Slack agent session that follows the run (agent_sessions.py); where the
  workspace has none, Slack's assistant thread status does, refreshed before it lapses
  (assistant_status.py).

It remembers how far it has read only once everything read was synced, and resumes from
there (plus every active run) on start, so a restart loses nothing: it re-renders from state.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable
from functools import partial
from typing import Any, TypeVar

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.web.async_client import AsyncWebClient

from agent import utcnow
from bot import keys
from bot.exceptions import NotInstalled
from bot.settings import DEFAULT_STOP_REACTION, ReportMode, StreamConfig
from bot.slack.client import LimitedWebClient
from bot.slack.ratelimit import FINAL_CALLS_PER_RUN, SlackRateLimiter
from bot.slack.tenancy import Tenant, acting_for
from jobs import RunNotFound, Runs, RunState, RunStatus, RunStore
from jobs import keys as run_keys
from jobs.keyspace.connection import text
from jobs.process.background import beside
from jobs.process.logcontext import log_context
from jobs.process.metrics import metrics

from . import chart_sync, spill
from .agent_sessions import AgentSessions, SessionConfig
from .assistant_status import STATUS_REFRESH_SECONDS, AssistantStatus
from .canvas_sync import CanvasSync
from .leases import Leases
from .library_sync import Shelf
from .message_sync import MessageSync, Synced
from .rendered import remember_rendered
from .stream_records import StreamRecords
from .stream_sync import StreamSync

__all__ = ["UPDATE_INTERVAL_SECONDS", "Publisher", "remember_rendered"]

A = TypeVar("A")
B = TypeVar("B")

log = logging.getLogger(__name__)

# One sync per run at most this often, across all publishers (final states are flushed at once).
UPDATE_INTERVAL_SECONDS = 2.0
# A run that ended is counted as owed its final state for at most this long (another process
# may have shown it), so the slots kept for it are not kept forever.
FINAL_OWED_SECONDS = 30.0
# The count of runs owed a final state is refreshed at least this often (and on every new run).
FINALS_REFRESH_SECONDS = 1.0
# How long one stream read waits for news before looking at due runs.
READ_BLOCK_MS = 250
# Runs synced at once by one process (most of them wait for the shared limiter, which decides
# how fast calls go out): enough that a finished run is never stuck behind busy ones.
CONCURRENT_SYNCS = 64
# Another process is syncing this run: look again this much later.
LEASED_RETRY_SECONDS = 0.5
# After a failed sync (Slack or network trouble), try again this much later.
RETRY_SECONDS = 2.0
# At shutdown, syncs under way get this long to finish (and let go of their leases) before they are
# cancelled; another process re-renders from state whatever was cut short.
FLUSH_SECONDS = 5.0


class Publisher:
    """Syncs Slack from run state; run several (in several processes) on one Redis if you like.

    `shared_limiter=False` and `update_interval=0` turn off the shared rate limiter and the
    coalescing (the benchmark's baseline); 429s are then left to the client's retry handler.
    """

    def __init__(
        self,
        redis: Redis,
        async_redis: AsyncRedis,
        store: RunStore,
        client: AsyncWebClient,
        *,
        limiter: SlackRateLimiter | None = None,
        shared_limiter: bool = True,
        update_interval: float = UPDATE_INTERVAL_SECONDS,
        spill_refresh_seconds: float = spill.REFRESH_SECONDS,
        status_refresh_seconds: float = STATUS_REFRESH_SECONDS,
        stop_reaction: str = DEFAULT_STOP_REACTION,
        streams: StreamConfig | None = None,
        sessions: SessionConfig | None = None,
        report_mode: ReportMode = "message",
    ) -> None:
        self.redis = redis
        self.async_redis = async_redis
        self.store = store
        self._runs = Runs(store)
        self.limiter: SlackRateLimiter | None = None
        if not shared_limiter:
            self.client = client  # the baseline: 429s are left to the client's own retry handler
        elif isinstance(client, LimitedWebClient) and client.limiter is not None and limiter is None:
            self.client, self.limiter = client, client.limiter  # the app's client: one limiter per process
        else:
            self.limiter = limiter or SlackRateLimiter(async_redis)
            self.client = LimitedWebClient.like(client, self.limiter)
        self.update_interval = update_interval
        self.leases = Leases(async_redis, uuid.uuid4().hex)  # this process's name on the leases it holds
        self.status = AssistantStatus(
            async_redis,
            self.client,
            self.leases,
            load=self._load,
            wake=self._wake,
            refresh_seconds=status_refresh_seconds,
        )
        # Each thread is an agent session (processing, active, closed) where the workspace has them.
        self.sessions = AgentSessions(async_redis, self.client, self.leases, latest=self._latest, config=sessions)
        self.messages = MessageSync(
            async_redis,
            self.client,
            spill.SpillFiles(async_redis, self.client, refresh_seconds=spill_refresh_seconds),
            self.status,
            load=self._load,
            wake=self._wake,
            is_active=self._is_active,
            stop_reaction=stop_reaction,
            charts=chart_sync.ChartFiles(async_redis, self.client),  # uploaded before the report links them
            sessions=self.sessions,
            canvases=CanvasSync(async_redis, self.client),  # a report too long for one message, by section
            report_mode=report_mode,
            latest=self._latest,  # only a thread's newest run edits the report its runs share
        )
        # A run whose progress is a native stream (DEEPTHREAD_PROGRESS=stream) is synced here;
        # message_sync.py then keeps only its report, file and status.
        self.streams = StreamSync(
            StreamRecords(redis),
            self.client,
            store,
            streams or StreamConfig(),
            wake=self._wake,
            is_active=self._is_active,
            stop_reaction=stop_reaction,
            stop_by_event=self.sessions.stop_button,
        )
        self.shelf = Shelf(redis, store, self.client)  # a final report joins the team's library
        self._due: dict[str, float] = {}  # run id -> monotonic time its next sync may start
        self._dirty: set[str] = set()  # runs with announced changes not yet synced
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._semaphore = asyncio.Semaphore(CONCURRENT_SYNCS)
        self._active: set[str] = set()  # runs active at the last look
        self._streaming: set[str] = set()  # runs whose progress is a stream, at their last sync
        self._owed: dict[str, float] = {}  # ended runs not yet shown final -> monotonic time we stop counting them
        self._finals_checked = 0.0
        # For health checks (bot/cli/health.py): when the loop last went round, and how far it has read.
        self.last_cycle = time.monotonic()
        self.last_read = "0-0"
        self._not_installed: set[str] = set()  # runs of uninstalled workspaces, logged once

    async def sync(self, state: RunState) -> bool:
        """Bring one run's messages, file and status up to date now; False when a retry later is worthwhile."""
        return (await self._sync_state(state)).ok

    async def _sync_state(self, state: RunState) -> Synced:
        """Sync with the token of the run's own installation. A workspace that uninstalled the
        app has nothing left to show it: said once, and not retried."""
        with acting_for(Tenant.of_run(state.run)):
            try:
                return await self._sync_messages(state)
            except NotInstalled as exc:
                if state.run.id not in self._not_installed:
                    self._not_installed.add(state.run.id)
                    log.warning("run %s: not shown in Slack: %s", state.run.id, exc)
                return Synced(ok=True, sent=False)

    async def _sync_messages(self, state: RunState) -> Synced:
        """The run's progress stream, if it has one (then message_sync.py keeps only the report,
        file and status), else its messages. A final report and the stream's end go out together."""
        streaming = await self.streams.streaming(state.run.id)
        if streaming and not state.status.finished:
            self._streaming.add(state.run.id)  # paced by its stream's own tier (_sync_interval)
        else:
            self._streaming.discard(state.run.id)
        if state.status.finished and streaming:
            # The report and the stream's end together (each waits only in its own method's queue:
            # chat.update is Tier 3, appendStream Tier 4), then the session moved on, then the
            # stream stopped (Tier 2, may trail).
            messages, shown = await _both(
                self.messages.sync(_without_progress(state), settle_presence=False),
                self.streams.sync(state, stop=False),
            )
            if shown is None:  # streaming was refused meanwhile: the progress message shows the end
                return await self.messages.sync(state)
            presence = await self.messages.presence(state)
            stopped = await self.streams.sync(state) or shown
            return Synced(
                ok=messages.ok and shown.ok and presence and stopped.ok,
                sent=messages.sent or shown.sent or stopped.sent,
            )
        shown = await self.streams.sync(state)
        if shown is None:
            return await self.messages.sync(state)
        # The report is not waited for: this sync is paced by the stream's tier, and a run that ends
        # while it sat in a chat.update queue would show its end only after it (bench.publish).
        messages = await self.messages.sync(_without_progress(state), wait_for_slots=False)
        return Synced(ok=messages.ok and shown.ok, sent=messages.sent or shown.sent)

    # --- the loop ---------------------------------------------------------------------

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Sync until `stop` is set. Stopping between reads, never by cancelling one: a
        cancelled blocking XREAD can leave redis-py's asyncio connection stuck."""
        stop = stop or asyncio.Event()
        cursor = await self.async_redis.get(keys.PUBLISHER_CURSOR)
        last_id = text(cursor) if cursor else "0-0"
        self.last_read = last_id
        for run_id in await self._count_finals():  # re-render whatever was in flight
            self._mark(run_id)
        statuses = asyncio.create_task(self.status.keep_alive(stop, self._active_ids), name="publisher-statuses")
        closing = asyncio.create_task(self.sessions.keep_closing(stop), name="publisher-sessions")
        try:
            while not stop.is_set():
                try:
                    last_id, news = await self._read(last_id)
                    self.last_read, self.last_cycle = last_id, time.monotonic()
                    if news or time.monotonic() - self._finals_checked >= FINALS_REFRESH_SECONDS:
                        await self._count_finals()  # before a new run's first sync takes a slot
                    self._start_due()
                    if not self._dirty and not self._tasks:
                        await self.async_redis.set(keys.PUBLISHER_CURSOR, last_id)
                except asyncio.CancelledError:
                    raise
                except Exception:  # the publisher must outlive any single bad run or Redis blip
                    log.exception("publisher cycle failed; continuing")
                    await asyncio.sleep(1)
        finally:
            statuses.cancel()
            closing.cancel()
            syncing = list(self._tasks.values())
            if syncing:  # let syncs under way land (and release their leases) rather than cut them off
                await asyncio.wait(syncing, timeout=FLUSH_SECONDS)
            tasks = [statuses, closing, *self._tasks.values()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _mark(self, run_id: str) -> None:
        self._dirty.add(run_id)
        self._schedule(run_id, time.monotonic())

    def _schedule(self, run_id: str, at: float) -> None:
        self._due[run_id] = min(self._due.get(run_id, at), at)

    async def _read(self, last_id: str) -> tuple[str, bool]:
        """Mark the runs the stream names; True when one of them is new to this process."""
        # Runs being synced right now are looked at again when that sync ends, not before.
        wait = min((due for run_id, due in self._due.items() if run_id not in self._tasks), default=None)
        block = READ_BLOCK_MS if wait is None else int(min(READ_BLOCK_MS, max(1.0, (wait - time.monotonic()) * 1000)))
        answer: Any = await self.async_redis.xread({run_keys.UPDATES_STREAM: last_id}, block=block, count=500)
        news = False
        for _stream, entries in answer or []:
            for entry_id, fields in entries:
                last_id = text(entry_id)
                run_id = fields.get(b"run_id") or fields.get("run_id")
                if run_id:
                    run_id = text(run_id)
                    news = news or (run_id not in self._active and run_id not in self._owed)
                    self._mark(run_id)
        return last_id, news

    # --- final states first -----------------------------------------------------------

    async def _count_finals(self) -> set[str]:
        """Tell the limiter how many runs may still need a final state: every active run, and
        every run that ended since the last look and is not shown final yet. Returns the active ones."""
        active = set(await self._active_ids())
        now = time.monotonic()
        for run_id in self._active - active:
            self._owed.setdefault(run_id, now + FINAL_OWED_SECONDS)
        self._owed = {run_id: until for run_id, until in self._owed.items() if until > now and run_id not in active}
        self._active = active
        self._finals_checked = now
        if self.limiter is not None:
            self.limiter.expect_finals(len(active) + len(self._owed))
        return active

    def _final_shown(self, run_id: str) -> None:
        if self._owed.pop(run_id, None) is not None and self.limiter is not None:
            self.limiter.expect_finals(len(self._active) + len(self._owed))

    def _sync_interval(self, run_id: str) -> float:
        """Seconds between two routine syncs of one run: the coalescing interval, or, when the
        workspace is busy, this run's fair share of what routine syncs may call. Every run's sync
        may edit its report (chat.update, Tier 3; a message run also its progress message), so
        that share bounds every run; a streamed run's progress is also one chat.appendStream
        (Tier 4) among the streamed runs. A stream synced faster than its report fills sooner
        and rolls over more, and rollovers are Tier 2 (bench.publish)."""
        if self.limiter is None or self.update_interval <= 0:
            return self.update_interval
        window = self.limiter.window_seconds
        streamed_runs = self._active & self._streaming
        edits = len(streamed_runs) + FINAL_CALLS_PER_RUN["chat.update"] * len(self._active - self._streaming)
        fair = window * max(1, edits) / max(1, self.limiter.routine_share("chat.update"))
        if run_id in self._streaming:
            appends = window * max(1, len(streamed_runs)) / max(1, self.limiter.routine_share("chat.appendStream"))
            fair = max(fair, appends)
        return max(self.update_interval, fair)

    def _start_due(self) -> None:
        now = time.monotonic()
        for run_id, due in list(self._due.items()):
            if due <= now and run_id not in self._tasks:
                del self._due[run_id]
                task = asyncio.create_task(self._cycle(run_id), name=f"publish-{run_id}")
                self._tasks[run_id] = task
                task.add_done_callback(partial(self._forget, run_id))

    def _forget(self, run_id: str, _task: asyncio.Task[None]) -> None:
        self._tasks.pop(run_id, None)

    async def _cycle(self, run_id: str) -> None:
        """One attempt to sync a run: lease it, sync it, say when to look again."""
        async with self._semaphore:
            try:
                await self._cycle_leased(run_id)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("run %s: sync failed; will retry", run_id)
                self._dirty.add(run_id)
                self._schedule(run_id, time.monotonic() + RETRY_SECONDS)

    async def _cycle_leased(self, run_id: str) -> None:
        dirty = run_id in self._dirty
        self._dirty.discard(run_id)  # changes announced from now on need another sync
        wait = await self._try_lease(run_id, force=False)
        # Flushed at once: the final state (a run that left the active set has ended), and a plan that
        # waits for the team's approval (nothing is researched until someone sees it).
        if wait > 0 and (not await self._is_active(run_id) or await self._awaits_the_team(run_id)):
            wait = await self._try_lease(run_id, force=True)
        log.debug(
            "run %s: sync lease %s",
            run_id,
            "taken" if wait == 0 else "held elsewhere" if wait < 0 else f"after {wait:.1f} s",
        )
        if wait != 0:
            if dirty:
                self._dirty.add(run_id)
            self._schedule(run_id, time.monotonic() + (LEASED_RETRY_SECONDS if wait < 0 else wait))
            return
        try:
            # Renewed while the sync runs, and stopped between renewals (jobs/process/background.py).
            async with beside(partial(self.leases.keep, run_id), f"sync-lease-{run_id}"):
                state = await self._load(run_id)  # read under the lease: nothing newer was synced before
                if state is None:
                    return
                with log_context(run_id=run_id, team=state.run.team):
                    synced = await self._sync_state(state)
                ok = synced.ok
                if synced.sent and ok:  # how long the change took to reach Slack
                    metrics().publisher_lag.observe(max(0.0, (utcnow() - state.updated_at).total_seconds()))
                if synced.sent and self.update_interval > 0:
                    await self.leases.edited(run_id)  # before the lease goes: the next claim sees it
                if ok and state.status.finished:
                    self._final_shown(run_id)
                    with acting_for(Tenant.of_run(state.run)):
                        await self._shelve(state)
        finally:
            await self.leases.release(keys.sync_lease(run_id))
        if not ok:
            self._dirty.add(run_id)
            self._schedule(run_id, time.monotonic() + RETRY_SECONDS)

    async def _shelve(self, state: RunState) -> None:
        """The final report on the team's library shelf; a failure is logged, never the sync's."""
        try:
            await self.shelf.shelve(state)
        except Exception:  # Redis or Slack trouble: the next sync of the run shelves it
            log.exception("run %s: not shelved in the library", state.run.id)

    async def _try_lease(self, run_id: str, *, force: bool) -> float:
        """0.0: leased; -1.0: another process is syncing it; else seconds until it may be synced."""
        return await self.leases.claim(run_id, interval=self._sync_interval(run_id), force=force)

    async def _load(self, run_id: str) -> RunState | None:
        try:
            # Store reads block; keep them off the loop that also acks Slack events.
            return await asyncio.to_thread(self.store.get, run_id)
        except RunNotFound:
            self._dirty.discard(run_id)
            return None

    async def _latest(self, team: str | None, channel: str, thread_ts: str) -> RunState | None:
        return await asyncio.to_thread(self._runs.latest_in_thread, team, channel, thread_ts)

    async def _active_ids(self) -> set[str]:
        return set(await asyncio.to_thread(self.store.active_ids))

    async def _is_active(self, run_id: str) -> bool:
        return bool(await self.async_redis.sismember(run_keys.ACTIVE_RUNS, run_id))

    async def _awaits_the_team(self, run_id: str) -> bool:
        """A plan posted for approval (plan first): the run waits on the team, not on the model."""
        status = await self.async_redis.hget(run_keys.run_state(run_id), "status")
        return status is not None and text(status) == RunStatus.planned.value

    def _wake(self, run_id: str, at_epoch: float) -> None:
        """Look at this run again at `at_epoch` (a status refresh or a deferred file upload)."""
        self._schedule(run_id, time.monotonic() + max(0.0, at_epoch - time.time()))


async def _both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both results; if either fails, its error once both have ended. Never a sync left running
    beside the next one for the same run, as plain gather would leave it."""
    one, two = await asyncio.gather(first, second, return_exceptions=True)
    for result in (one, two):
        if isinstance(result, BaseException):
            raise result
    return one, two  # type: ignore[return-value]


def _without_progress(state: RunState) -> RunState:
    """The state as message_sync.py should see it when a stream shows the progress."""
    return state.model_copy(update={"run": state.run.model_copy(update={"progress_message": None})})
