"""A run's thread as a Slack agent session: the native status and stop button.

Every run is a session of its thread: `processing` while it researches (created with the question
as its title and the requester as its initiator, so Slack shows a stop button), `active` once its
report is finished and waits for the team, `closed` when the thread has been quiet for the idle
time (`DEEPTHREAD_SESSION_IDLE_HOURS`); a continuation or a re-check sets `processing` again, which
reopens it. Slack never moves a status by itself, so the publisher moves it with run state, like
every other write: through the shared limiter (Tier 3), a finished run's `active` urgently, after
its messages. The stop button's event is the surface's (bot/surface/listeners/sessions.py): it
stops the run exactly as the stop reaction does, and this module moves the session on once the
run has ended.

A workspace or app without sessions (the method refused, the feature off) is remembered per
workspace and logged once (refusals.py); its runs show the assistant thread status as before
(assistant_status.py), and the stop reaction stays the way to stop them. A setStatus that warns
`missing_agent_session_stopped_event_subscription` keeps the session (a status with no stop
button beats none) and is logged once too.

Records (this module is their only writer): `deepthread:session:{channel}:{thread}` — the status
Slack shows, the run that set it and when; `deepthread:sessions:idle` — threads whose session is
`active`, scored by when it is closed. One writer per thread at a time (a short lease), and a run
older than the one that set the status never moves it: a parent's late final sync cannot mark
its continuation's session as waiting.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from redis.asyncio import Redis as AsyncRedis
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from agent import shorten
from bot import keys
from bot.exceptions import SlotBusy
from bot.settings import DEFAULT_SESSION_IDLE_HOURS
from bot.slack.client import PATIENCE_SECONDS, is_rate_limited, take_slots
from bot.slack.tenancy import Tenant, acting_for
from jobs import RunState
from jobs.keyspace.connection import text

from .leases import Leases
from .message_parts import _SLACK_USER_ID
from .refusals import SESSION_STOP_EVENT, SESSIONS, AsyncRefusals

__all__ = [
    "DEFAULT_IDLE_SECONDS",
    "SESSIONS_UNSUPPORTED",
    "AgentSessions",
    "SessionConfig",
    "Shown",
    "idle_member",
    "wanted_status",
]

log = logging.getLogger("bot.publisher.sessions")

# A session whose report waits this long without a new run in its thread is closed.
DEFAULT_IDLE_SECONDS = DEFAULT_SESSION_IDLE_HOURS * 3600
# How often the publisher looks for sessions due to close.
IDLE_SWEEP_SECONDS = 60.0
TITLE_CHARS = 200  # agents.sessions.setStatus: "max 200 characters"
# One process writes a thread's session at a time; a holder that died lets go after this.
LEASE_SECONDS = 10.0
# Kept as long as run state is.
RECORD_TTL_SECONDS = 90 * 24 * 3600
# Answers meaning this workspace or app has no sessions: fall back to the assistant status.
SESSIONS_UNSUPPORTED = frozenset(
    {
        "feature_disabled",
        "unknown_method",
        "missing_scope",
        "not_allowed_token_type",
        "no_permission",
        "access_denied",
        "team_not_allowed",
        "method_deprecated",
        "not_allowed",
    }
)
# Answers meaning this thread cannot have a session (the channel, not the workspace): its runs
# show the assistant status, and the thread is not asked again until a new run starts.
THREAD_UNSUPPORTED = frozenset(
    {"not_authorized", "channel_not_found", "not_in_channel", "is_archived", "thread_ts_not_allowed"}
)
STOP_EVENT_MISSING = "missing_agent_session_stopped_event_subscription"
# Stored as the status of a thread that cannot have a session.
UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class SessionConfig:
    idle_seconds: float = DEFAULT_IDLE_SECONDS  # DEEPTHREAD_SESSION_IDLE_HOURS, in seconds
    sweep_seconds: float = IDLE_SWEEP_SECONDS


def wanted_status(state: RunState) -> str:
    """`processing` while the run may still work (queued too: the stop button is useful then), else `active`."""
    return "active" if state.status.finished else "processing"


@dataclass(frozen=True)
class Shown:
    """What a sync came to: whether the session shows the run (else the assistant status should),
    and whether it is up to date (False: sync the run again later)."""

    by_session: bool
    ok: bool = True


@dataclass(frozen=True)
class _Record:
    status: str = ""
    run_id: str = ""
    run_created: float = 0.0  # the run's creation time: an older run never moves the session back
    team: str = ""


LatestRun = Callable[[str | None, str, str], Awaitable[RunState | None]]


class AgentSessions:
    def __init__(
        self,
        redis: AsyncRedis,
        client: AsyncWebClient,
        leases: Leases,
        *,
        latest: LatestRun,
        config: SessionConfig | None = None,
    ) -> None:
        self.redis = redis
        self.client = client
        self.leases = leases
        self.latest = latest  # the newest run of a thread (team, channel, thread_ts)
        self.config = config or SessionConfig()
        self.refusals = AsyncRefusals(redis)

    async def takes_sessions(self, team: str | None) -> bool:
        return await self.refusals.refused(SESSIONS, team) is None

    async def stop_button(self, team: str | None) -> bool:
        """Whether a stop in this workspace arrives as the session's stop event (else streams stop runs themselves)."""
        return await self.takes_sessions(team) and await self.refusals.refused(SESSION_STOP_EVENT, team) is None

    async def _record(self, team: str | None, channel: str, thread_ts: str) -> _Record:
        raw = {text(k): text(v) for k, v in (await self.redis.hgetall(keys.session(team, channel, thread_ts))).items()}
        return _Record(
            status=raw.get("status", ""),
            run_id=raw.get("run", ""),
            run_created=float(raw.get("run_created") or 0),
            team=raw.get("team", ""),
        )

    async def _remember(self, channel: str, thread_ts: str, status: str, state: RunState) -> None:
        key = keys.session(state.run.team, channel, thread_ts)
        await self.redis.hset(
            key,
            mapping={
                "status": status,
                "run": state.run.id,
                "run_created": state.run.created_at.timestamp(),
                "team": state.run.team or "",
                "at": time.time(),
            },
        )
        await self.redis.expire(key, RECORD_TTL_SECONDS)
        member = idle_member(state.run.team, channel, thread_ts)
        if status == "active":
            await self.redis.zadd(keys.IDLE_SESSIONS, {member: time.time() + self.config.idle_seconds})
        else:
            await self.redis.zrem(keys.IDLE_SESSIONS, member)

    async def sync(self, state: RunState) -> Shown:
        """Move the thread's session to what the run's state wants (see Shown)."""
        run = state.run
        if not run.channel or not run.thread_ts:
            return Shown(by_session=False)
        if not await self.takes_sessions(run.team):
            return Shown(by_session=False)
        channel, thread_ts = run.channel, run.thread_ts
        want = wanted_status(state)
        settled = self._settled(await self._record(run.team, channel, thread_ts), state, want)
        if settled is not None:
            return settled
        lease = keys.session_lease(run.team, channel, thread_ts)
        if not await self.redis.set(lease, self.leases.owner, nx=True, px=int(LEASE_SECONDS * 1000)):
            return Shown(by_session=True, ok=False)  # another process is moving it: look again soon
        try:
            return await self._set(state, want)
        finally:
            await self.leases.release(lease)

    @staticmethod
    def _settled(record: _Record, state: RunState, want: str) -> Shown | None:
        """What to answer without calling Slack, or None when the session must be moved."""
        run = state.run
        if record.run_id == run.id and record.status == UNAVAILABLE:
            return Shown(by_session=False)
        if record.run_id == run.id and (record.status == want or (record.status, want) == ("closed", "active")):
            return Shown(by_session=True)  # shown already (a closed session stays closed until a new run)
        if record.run_id and record.run_id != run.id and record.run_created > run.created_at.timestamp():
            return Shown(by_session=True)  # a newer run of this thread owns the session now
        return None

    async def _set(self, state: RunState, want: str, *, initiator: bool = True) -> Shown:
        run = state.run
        channel, thread_ts = run.channel or "", run.thread_ts or ""
        settled = self._settled(await self._record(run.team, channel, thread_ts), state, want)  # again, under the lease
        if settled is not None:
            return settled
        # Title and initiator are used only when this call creates the session (Slack ignores them
        # after): the question names it, whichever status it is created with.
        arguments: dict[str, str] = {
            "channel_id": channel,
            "thread_ts": thread_ts,
            "status": want,
            "title": shorten(" ".join(run.question.split()), TITLE_CHARS),
        }
        if initiator and run.requester and _SLACK_USER_ID.fullmatch(run.requester):
            arguments["initiator_user_id"] = run.requester
        final = state.status.finished
        try:
            answer = await take_slots(
                self.client,
                run.team,
                "agents.sessions.setStatus",
                lambda: self.client.agents_sessions_setStatus(**arguments),
                urgent=final,  # moving the session on is part of the final state (after its messages)
                # A routine move never holds up the messages in front of it: a full bucket or a 429
                # is tried again on a later sync.
                patience_seconds=PATIENCE_SECONDS if final else 0,
                wait=final,
            )
        except SlotBusy:
            return Shown(by_session=True, ok=False)
        except SlackApiError as exc:
            if is_rate_limited(exc):  # the limiter paused the bucket for everyone; a later sync tries again
                return Shown(by_session=True, ok=False)
            error = str(exc.response.get("error"))
            if error in SESSIONS_UNSUPPORTED:
                await self.refusals.refuse(SESSIONS, run.team, error)
                return Shown(by_session=False)
            if error == "user_not_found" and initiator:  # the requester is not a member here: no initiator
                return await self._set(state, want, initiator=False)
            if error in THREAD_UNSUPPORTED:
                log.warning("run %s: the thread cannot be an agent session (%s)", run.id, error)
                await self._remember(channel, thread_ts, UNAVAILABLE, state)
                return Shown(by_session=False)
            log.warning("run %s: setting the agent session to %s failed (%s); will retry", run.id, want, error)
            return Shown(by_session=True, ok=False)
        except (TimeoutError, SlackClientError, OSError) as exc:
            log.warning("run %s: setting the agent session to %s failed (%s); will retry", run.id, want, exc)
            return Shown(by_session=True, ok=False)
        if STOP_EVENT_MISSING in str(answer.get("warning") or ""):
            await self.refusals.refuse(SESSION_STOP_EVENT, run.team, STOP_EVENT_MISSING)
        await self._remember(channel, thread_ts, want, state)
        return Shown(by_session=True)

    # --- closing quiet sessions ------------------------------------------------------------

    async def close_idle(self, now: float | None = None) -> int:
        """Close every session whose report has waited its idle time; returns how many were closed."""
        now = time.time() if now is None else now
        closed = 0
        for raw in await self.redis.zrangebyscore(keys.IDLE_SESSIONS, "-inf", now):
            member = text(raw)  # type: ignore[arg-type]  # plain members, no scores asked for
            if not await self.redis.zrem(keys.IDLE_SESSIONS, member):
                continue  # another process took it
            team, channel, thread_ts = _unmember(member)
            state = await self.latest(team, channel, thread_ts)
            if state is None or not state.status.finished:
                continue  # a new run is working: it shows `processing`
            record = await self._record(team, channel, thread_ts)
            if record.status != "active" or record.run_id != state.run.id:
                continue
            with acting_for(Tenant.of_run(state.run)):  # outside any event: say which installation acts
                if await self._close(state):
                    closed += 1
        return closed

    async def _close(self, state: RunState) -> bool:
        run = state.run
        channel, thread_ts = run.channel or "", run.thread_ts or ""

        async def close() -> object:
            return await self.client.agents_sessions_setStatus(channel_id=channel, thread_ts=thread_ts, status="closed")

        try:
            await take_slots(self.client, run.team, "agents.sessions.setStatus", close)
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error in SESSIONS_UNSUPPORTED:
                await self.refusals.refuse(SESSIONS, run.team, error)
            else:
                log.warning("thread %s/%s: closing its agent session failed (%s)", channel, thread_ts, error)
            return False
        except (TimeoutError, SlackClientError, OSError) as exc:
            log.warning("thread %s/%s: closing its agent session failed (%s)", channel, thread_ts, exc)
            return False
        await self._remember(channel, thread_ts, "closed", state)
        log.info("run %s: its thread's agent session is closed (idle)", run.id)
        return True

    async def keep_closing(self, stop: asyncio.Event) -> None:
        """Close quiet sessions now and then until `stop`."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self.config.sweep_seconds)
                return
            except TimeoutError:
                pass
            try:
                await self.close_idle()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("closing idle agent sessions failed; continuing")


def idle_member(team: str | None, channel: str, thread_ts: str) -> str:
    """A thread in the idle set: the workspace too, as channel ids are not unique across workspaces."""
    return f"{team or ''}|{channel}|{thread_ts}"


def _unmember(member: str) -> tuple[str | None, str, str]:
    team, channel, thread_ts = member.split("|", 2)
    return team or None, channel, thread_ts
