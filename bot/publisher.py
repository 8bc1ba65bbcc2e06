"""Keeps each run's Slack messages in step with its run state.

All Slack writes for a run go through here. The publisher follows the updates stream,
re-renders the whole state and calls chat.update only when the rendering changed.

- Coalescing: about one sync per run every UPDATE_INTERVAL_SECONDS, counted in Redis so
  it holds across publisher processes; a run's final state is flushed at once.
- One sync of a run at a time, across processes (a lease in Redis), so an older rendering
  can never land after a newer one.
- Every call waits for its workspace's shared rate limiter (ratelimit.py); a 429 pauses
  that workspace for every run and process.
- A report too big for one message puts its full text in a file in the thread (spill.py).
- Slack's assistant thread status follows the run and is refreshed before it lapses.

It remembers how far it has read only once everything read was synced, and resumes from
there (plus every active run) on start, so a restart loses nothing: it re-renders from state.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from jobs import RunNotFound, RunState, RunStore
from jobs.keys import ACTIVE_RUNS, PREFIX, UPDATES_STREAM

from . import spill
from .ratelimit import LimitedSlack, SlackRateLimiter, Urgency, bucket_of
from .render import Attachment, SlackMessage, render_progress, render_report_parts, render_status

log = logging.getLogger(__name__)

# One sync per run at most this often, across all publishers (final states are flushed at once).
UPDATE_INTERVAL_SECONDS = 2.0
# How long one stream read waits for news before looking at due runs.
READ_BLOCK_MS = 250
# Runs synced at once by one process (most of them wait for the shared limiter, which decides
# how fast calls go out): enough that a finished run is never stuck behind busy ones.
CONCURRENT_SYNCS = 64
# A run's sync lease; renewed while the sync runs, so only a dead process lets it lapse.
LEASE_SECONDS = 30.0
# Another process is syncing this run: look again this much later.
LEASED_RETRY_SECONDS = 0.5
# After a failed sync (Slack or network trouble), try again this much later.
RETRY_SECONDS = 2.0
# A rendering this old when its rate-limit slot comes up is rebuilt from the newest state first.
STALE_AFTER_SECONDS = 0.5
# Slack clears an assistant status after ~2 min without a message: refresh it well before.
STATUS_REFRESH_SECONDS = 90.0
# A run whose state has not changed for this long is presumed stuck: its status may lapse.
STATUS_IDLE_SECONDS = 15 * 60
# Active runs are checked this often for a status due for refresh.
STATUS_SCAN_SECONDS = 10.0
# One process sets a run's status at a time; a holder that died lets go after this.
STATUS_LEASE_SECONDS = 10.0
# A workspace that refused assistant statuses is not asked again for this long.
STATUS_OFF_SECONDS = 24 * 3600
# Answers to assistant.threads.setStatus that mean this workspace or app cannot have one.
STATUS_UNSUPPORTED = frozenset({
    "not_allowed", "unknown_method", "missing_scope", "not_allowed_token_type", "no_permission",
    "feature_not_enabled", "method_deprecated", "access_denied", "team_not_allowed",
})
# Slack errors after which a message can never be updated again.
PERMANENT_ERRORS = frozenset({"message_not_found", "cant_update_message", "edit_window_closed", "channel_not_found",
                              "is_archived", "not_in_channel"})
# Slack refused the rendering itself: retrying the same bytes cannot help (a bug to log loudly).
REJECTED_RENDERING = frozenset({"msg_too_long", "msg_blocks_too_long", "invalid_blocks", "invalid_blocks_format"})
RENDERED_TTL_SECONDS = 90 * 24 * 3600

CURSOR_KEY = f"{PREFIX}:publisher:cursor"  # last stream id whose runs are all in Slack

# Returns 0: leased (and the next sync is due in ARGV[3] ms); -1: another process holds the
# lease; else the ms until the run may be synced again.
_CLAIM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
if ARGV[4] ~= '1' then
  local next_at = tonumber(redis.call('GET', KEYS[2]) or '0')
  if next_at > now then
    return next_at - now
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', tonumber(ARGV[2]))
local interval = tonumber(ARGV[3])
if interval > 0 then
  redis.call('SET', KEYS[2], now + interval, 'PX', interval)
end
return 0
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def rendered_key(run_id: str) -> str:
    return f"{PREFIX}:rendered:{run_id}"


def lease_key(run_id: str) -> str:
    return f"{PREFIX}:publisher:lease:{run_id}"


def next_sync_key(run_id: str) -> str:
    return f"{PREFIX}:publisher:next:{run_id}"


def status_lease_key(run_id: str) -> str:
    return f"{PREFIX}:publisher:status-lease:{run_id}"


def status_off_key(team: str | None) -> str:
    return f"{PREFIX}:status:off:{bucket_of(team)}"


def remember_rendered(redis: Redis, run_id: str, *, progress: str, report: str) -> None:
    redis.hset(rendered_key(run_id), mapping={"progress": progress, "report": report})
    redis.expire(rendered_key(run_id), RENDERED_TTL_SECONDS)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class _Rendering:
    progress: SlackMessage
    report: SlackMessage
    attachment: Attachment | None


def _render(state: RunState, attachment_error: str | None = None, stop_reaction: str = "octagonal_sign") -> _Rendering:
    parts = render_report_parts(state, attachment_error=attachment_error)
    return _Rendering(render_progress(state, stop_reaction), parts.message, parts.attachment)


class Publisher:
    """Syncs Slack from run state; run several (in several processes) on one Redis if you like.

    `shared_limiter=False` and `update_interval=0` turn off the shared rate limiter and the
    coalescing (the benchmark's baseline); 429s are then left to the client's retry handler.
    """

    def __init__(self, redis: Redis, async_redis: AsyncRedis, store: RunStore, client: AsyncWebClient, *,
                 limiter: SlackRateLimiter | None = None, shared_limiter: bool = True,
                 update_interval: float = UPDATE_INTERVAL_SECONDS,
                 spill_refresh_seconds: float = spill.REFRESH_SECONDS,
                 status_refresh_seconds: float = STATUS_REFRESH_SECONDS,
                 stop_reaction: str = "octagonal_sign") -> None:
        self.redis = redis
        self.stop_reaction = stop_reaction  # named in the progress message's how-to-steer line
        self.async_redis = async_redis
        self.store = store
        self.limiter = (limiter or SlackRateLimiter(async_redis)) if shared_limiter else None
        self.slack = LimitedSlack(client, self.limiter)
        self.client = self.slack.client
        self.spill = spill.SpillFiles(async_redis, self.slack, refresh_seconds=spill_refresh_seconds)
        self.update_interval = update_interval
        self.status_refresh_seconds = status_refresh_seconds
        self._status_scan_seconds = min(STATUS_SCAN_SECONDS, status_refresh_seconds / 3)
        self._owner = uuid.uuid4().hex  # this process's name on the leases it holds
        self._claim = async_redis.register_script(_CLAIM)
        self._renew = async_redis.register_script(_RENEW)
        self._release = async_redis.register_script(_RELEASE)
        self._due: dict[str, float] = {}  # run id -> monotonic time its next sync may start
        self._dirty: set[str] = set()  # runs with announced changes not yet synced
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._semaphore = asyncio.Semaphore(CONCURRENT_SYNCS)

    # --- the loop ---------------------------------------------------------------------

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Sync until `stop` is set. Stopping between reads, never by cancelling one: a
        cancelled blocking XREAD can leave redis-py's asyncio connection stuck."""
        stop = stop or asyncio.Event()
        cursor = await self.async_redis.get(CURSOR_KEY)
        last_id = _text(cursor) if cursor else "0-0"
        for run_id in await asyncio.to_thread(self.store.active_ids):  # re-render whatever was in flight
            self._mark(run_id)
        statuses = asyncio.create_task(self._keep_statuses(stop), name="publisher-statuses")
        try:
            while not stop.is_set():
                try:
                    last_id = await self._read(last_id)
                    self._start_due()
                    if not self._dirty and not self._tasks:
                        await self.async_redis.set(CURSOR_KEY, last_id)
                except asyncio.CancelledError:
                    raise
                except Exception:  # the publisher must outlive any single bad run or Redis blip
                    log.exception("publisher cycle failed; continuing")
                    await asyncio.sleep(1)
        finally:
            tasks = [statuses, *self._tasks.values()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _mark(self, run_id: str) -> None:
        self._dirty.add(run_id)
        self._schedule(run_id, time.monotonic())

    def _schedule(self, run_id: str, at: float) -> None:
        self._due[run_id] = min(self._due.get(run_id, at), at)

    async def _read(self, last_id: str) -> str:
        # Runs being synced right now are looked at again when that sync ends, not before.
        wait = min((due for run_id, due in self._due.items() if run_id not in self._tasks), default=None)
        block = READ_BLOCK_MS if wait is None else int(min(READ_BLOCK_MS, max(1.0, (wait - time.monotonic()) * 1000)))
        answer = await self.async_redis.xread({UPDATES_STREAM: last_id}, block=block, count=500)
        for _stream, entries in answer or []:
            for entry_id, fields in entries:
                last_id = _text(entry_id)
                run_id = fields.get(b"run_id") or fields.get("run_id")
                if run_id:
                    self._mark(_text(run_id))
        return last_id

    def _start_due(self) -> None:
        now = time.monotonic()
        for run_id, due in list(self._due.items()):
            if due <= now and run_id not in self._tasks:
                del self._due[run_id]
                task = asyncio.create_task(self._cycle(run_id), name=f"publish-{run_id}")
                self._tasks[run_id] = task
                task.add_done_callback(lambda _t, r=run_id: self._tasks.pop(r, None))

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
        # The final state is flushed at once: a run that left the active set has ended.
        if wait > 0 and not await self.async_redis.sismember(ACTIVE_RUNS, run_id):
            wait = await self._try_lease(run_id, force=True)
        if wait != 0:
            if dirty:
                self._dirty.add(run_id)
            self._schedule(run_id, time.monotonic() + (LEASED_RETRY_SECONDS if wait < 0 else wait))
            return
        renewing = asyncio.create_task(self._keep_lease(run_id))
        try:
            state = await self._load(run_id)  # read under the lease: nothing newer was synced before
            if state is None:
                return
            ok = await self.sync(state)
        finally:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
            await self._release(keys=[lease_key(run_id)], args=[self._owner])
        if not ok:
            self._dirty.add(run_id)
            self._schedule(run_id, time.monotonic() + RETRY_SECONDS)

    async def _try_lease(self, run_id: str, *, force: bool) -> float:
        """0.0: leased; -1.0: another process is syncing it; else seconds until it may be synced."""
        answer = int(await self._claim(keys=[lease_key(run_id), next_sync_key(run_id)],
                                       args=[self._owner, int(LEASE_SECONDS * 1000),
                                             int(self.update_interval * 1000), "1" if force else "0"]))
        return -1.0 if answer < 0 else answer / 1000

    async def _keep_lease(self, run_id: str) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            await self._renew(keys=[lease_key(run_id)], args=[self._owner, int(LEASE_SECONDS * 1000)])

    async def _load(self, run_id: str) -> RunState | None:
        try:
            # Store reads block; keep them off the loop that also acks Slack events.
            return await asyncio.to_thread(self.store.get, run_id)
        except RunNotFound:
            self._dirty.discard(run_id)
            return None

    def _wake(self, run_id: str, at_epoch: float) -> None:
        """Look at this run again at `at_epoch` (a status refresh or a deferred file upload)."""
        self._schedule(run_id, time.monotonic() + max(0.0, at_epoch - time.time()))

    # --- one sync ---------------------------------------------------------------------

    async def sync(self, state: RunState) -> bool:
        """Bring the run's messages, file and status up to date; False when a retry later is worthwhile."""
        run = state.run
        if not run.channel:
            return True
        rendering = await asyncio.to_thread(_render, state, None, self.stop_reaction)
        stored = {_text(k): _text(v) for k, v in (await self.async_redis.hgetall(rendered_key(run.id))).items()}
        outcome = await self.spill.sync(state, rendering.attachment, time.time())
        if outcome.wake_at is not None:
            self._wake(run.id, outcome.wake_at)
        await self._sync_status(state)  # before the messages, which may wait long for the rate limiter
        error = outcome.error
        if error:
            rendering.report = (await asyncio.to_thread(_render, state, error, self.stop_reaction)).report
        ok = outcome.ok
        rendered_at = time.monotonic()
        for name, ts, message in (("progress", run.progress_message, rendering.progress),
                                  ("report", run.report_message, rendering.report)):
            if ts and stored.get(name) != message.digest():
                ok = await self._update(state, name, ts, message, rendered_at, stored.get(name), error) and ok
        return ok

    async def _update(self, state: RunState, name: str, ts: str, message: SlackMessage, rendered_at: float,
                      sent: str | None, attachment_error: str | None) -> bool:
        run = state.run
        channel = run.channel or ""

        async def send() -> str | None:
            nonlocal message
            if time.monotonic() - rendered_at >= STALE_AFTER_SECONDS:  # waited for a slot: the run moved on
                fresh = await self._load(run.id)
                if fresh is not None:
                    rendering = await asyncio.to_thread(_render, fresh, attachment_error, self.stop_reaction)
                    message = rendering.progress
                    if name == "report":
                        # The newer report may have outgrown the message: its file goes first.
                        outcome = await self.spill.sync(fresh, rendering.attachment, time.time())
                        if outcome.error != attachment_error:
                            rendering = await asyncio.to_thread(_render, fresh, outcome.error, self.stop_reaction)
                        message = rendering.report
                    if message.digest() == sent:
                        return None
            await self.client.chat_update(channel=channel, ts=ts, text=message.text, blocks=message.blocks)
            return message.digest()

        try:
            digest = await self.slack.call(run.team, "chat.update", send, urgent=self._finished_check(state))
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error in PERMANENT_ERRORS:
                log.warning("run %s: %s message can no longer be updated (%s)", run.id, name, error)
                return True  # nothing a retry could fix; do not loop on it
            if error in REJECTED_RENDERING:
                log.error("run %s: Slack refused the %s rendering (%s): %s", run.id, name, error,
                          exc.response.get("response_metadata"))
                await self._remember(run.id, {name: message.digest()})  # not again until it changes
                return True
            log.warning("run %s: updating the %s message failed (%s); will retry", run.id, name, error)
            return False
        except (SlackClientError, OSError, asyncio.TimeoutError) as exc:
            log.warning("run %s: updating the %s message failed (%s); will retry", run.id, name, exc)
            return False
        if digest is not None:
            await self._remember(run.id, {name: digest})
        return True

    def _finished_check(self, state: RunState) -> Urgency:
        """A final state is urgent; so is a routine update whose run ends while it waits for a
        slot (it will send the final state), or the final flush would queue behind it."""
        if state.status.finished:
            return True

        async def ended() -> bool:
            return not await self.async_redis.sismember(ACTIVE_RUNS, state.run.id)

        return ended

    async def _remember(self, run_id: str, fields: dict[str, str | float]) -> None:
        await self.async_redis.hset(rendered_key(run_id), mapping=fields)
        await self.async_redis.expire(rendered_key(run_id), RENDERED_TTL_SECONDS)

    # --- assistant thread status ------------------------------------------------------

    async def _status_record(self, run_id: str) -> tuple[str | None, float]:
        """The status last set for this run (None: never) and when (epoch seconds)."""
        have, at = await self.async_redis.hmget(rendered_key(run_id), ["status", "status_at"])
        return (_text(have) if have is not None else None), float(_text(at)) if at else 0.0

    def _status_to_set(self, state: RunState, have: str | None, set_at: float, now: float) -> str | None:
        """The status to send now ("" clears it), or None when Slack already shows the right one."""
        want = render_status(state)
        if not want:
            return "" if have else None
        idle = now - state.updated_at.timestamp() > STATUS_IDLE_SECONDS
        if want == have and (idle or now - set_at < self.status_refresh_seconds):
            return None
        return want

    async def _sync_status(self, state: RunState) -> None:
        """Set, refresh (before Slack lets it lapse) or clear the thread's assistant status.

        Never fails the sync: the status is a nicety, the messages are the product.
        """
        run = state.run
        if not run.channel or not run.thread_ts:
            return
        have, set_at = await self._status_record(run.id)
        if self._status_to_set(state, have, set_at, time.time()) is None:
            return
        if await self.async_redis.exists(status_off_key(run.team)):
            return
        # One status writer per run at a time, acting on the newest state: a refresh that read
        # an older state can never land after the status was cleared.
        if not await self.async_redis.set(status_lease_key(run.id), self._owner, nx=True,
                                          px=int(STATUS_LEASE_SECONDS * 1000)):
            self._wake(run.id, time.time() + LEASED_RETRY_SECONDS)
            return
        try:
            fresh = await self._load(run.id)
            if fresh is not None:
                await self._set_status(fresh)
        finally:
            await self._release(keys=[status_lease_key(run.id)], args=[self._owner])

    async def _set_status(self, state: RunState) -> None:
        run = state.run
        have, set_at = await self._status_record(run.id)
        now = time.time()
        status = self._status_to_set(state, have, set_at, now)
        if status is None:
            return
        channel, thread_ts, team = run.channel or "", run.thread_ts or "", run.team
        try:
            await self.slack.call(team, "assistant.threads.setStatus",
                                  lambda: self.client.assistant_threads_setStatus(
                                      channel_id=channel, thread_ts=thread_ts, status=status))
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error in STATUS_UNSUPPORTED:
                # The first process to find out says so; every process stops asking.
                if await self.async_redis.set(status_off_key(team), error, nx=True, ex=STATUS_OFF_SECONDS):
                    log.warning("workspace %s does not take assistant thread statuses (%s); not asking again "
                                "for %d h", bucket_of(team), error, STATUS_OFF_SECONDS // 3600)
                return
            log.info("run %s: setting the assistant status failed (%s); will retry", run.id, error)
            self._wake(run.id, now + RETRY_SECONDS)
            return
        except (SlackClientError, OSError, asyncio.TimeoutError) as exc:
            log.info("run %s: setting the assistant status failed (%s); will retry", run.id, exc)
            self._wake(run.id, now + RETRY_SECONDS)
            return
        await self._remember(run.id, {"status": status, "status_at": now})

    async def _keep_statuses(self, stop: asyncio.Event) -> None:
        """Refresh the status of every active run before Slack lets it lapse, whoever synced
        the run last and however long its messages wait for the rate limiter."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self._status_scan_seconds)
                return
            except asyncio.TimeoutError:
                pass
            try:
                for run_id in await asyncio.to_thread(self.store.active_ids):
                    have, set_at = await self._status_record(run_id)
                    if have and time.time() - set_at >= self.status_refresh_seconds:
                        state = await self._load(run_id)
                        if state is not None:
                            await self._sync_status(state)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("refreshing assistant statuses failed; continuing")
