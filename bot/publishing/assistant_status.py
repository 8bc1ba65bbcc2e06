"""Slack's assistant thread status follows a run: set while it works, refreshed before Slack
lets it lapse (~2 minutes without a message), cleared when it ends.

A status is a nicety, the messages are the product: nothing here fails a sync. A workspace
that refuses statuses (`not_allowed`, `missing_scope`, …) is not asked again for a day,
whichever process found out (refusals.py). Where the workspace takes agent sessions, the
session shows that the run works (agent_sessions.py) and this status is not set.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from redis.asyncio import Redis as AsyncRedis
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot import keys
from bot.exceptions import NotInstalled, SlotBusy
from bot.slack.client import take_slots
from bot.slack.tenancy import Tenant, acting_for
from jobs import RunState

from . import rendered
from .leases import Leases
from .progress_render import render_status
from .refusals import STATUSES, AsyncRefusals

__all__ = ["STATUS_REFRESH_SECONDS", "AssistantStatus"]

log = logging.getLogger("bot.publisher.status")

# Slack clears an assistant status after ~2 min without a message: refresh it well before.
STATUS_REFRESH_SECONDS = 90.0
# A run whose state has not changed for this long is presumed stuck: its status may lapse.
STATUS_IDLE_SECONDS = 15 * 60
# Active runs are checked this often for a status due for refresh.
STATUS_SCAN_SECONDS = 10.0
# One process sets a run's status at a time; a holder that died lets go after this.
STATUS_LEASE_SECONDS = 10.0
# Another process is setting this run's status: look again this much later.
LEASED_RETRY_SECONDS = 0.5
# After a failed attempt (Slack or network trouble, a 429), try again this much later: a status
# never waits out a rate limit in front of the messages, which are the product.
RETRY_SECONDS = 2.0
# Answers to assistant.threads.setStatus that mean this workspace or app cannot have one.
STATUS_UNSUPPORTED = frozenset(
    {
        "not_allowed",
        "unknown_method",
        "missing_scope",
        "not_allowed_token_type",
        "no_permission",
        "feature_not_enabled",
        "method_deprecated",
        "access_denied",
        "team_not_allowed",
    }
)

Load = Callable[[str], Awaitable[RunState | None]]
Wake = Callable[[str, float], None]  # look at this run again at this epoch time


class AssistantStatus:
    def __init__(
        self,
        redis: AsyncRedis,
        client: AsyncWebClient,
        leases: Leases,
        *,
        load: Load,
        wake: Wake,
        refresh_seconds: float = STATUS_REFRESH_SECONDS,
    ) -> None:
        self.redis = redis
        self.client = client
        self.leases = leases
        self.load = load
        self.wake = wake
        self.refresh_seconds = refresh_seconds
        self.scan_seconds = min(STATUS_SCAN_SECONDS, refresh_seconds / 3)

    def _to_set(self, state: RunState, have: str | None, set_at: float, now: float) -> str | None:
        """The status to send now ("" clears it), or None when Slack already shows the right one."""
        want = render_status(state)
        if not want:
            return "" if have else None
        idle = now - state.updated_at.timestamp() > STATUS_IDLE_SECONDS
        if want == have and (idle or now - set_at < self.refresh_seconds):
            return None
        return want

    async def sync(self, state: RunState) -> None:
        """Set, refresh (before Slack lets it lapse) or clear the thread's assistant status."""
        run = state.run
        if not run.channel or not run.thread_ts:
            return
        with acting_for(Tenant.of_run(run)):
            try:
                await self._sync(state)
            except NotInstalled:
                return  # the status goes with the workspace; the messages' sync says why once

    async def _sync(self, state: RunState) -> None:
        run = state.run
        have, set_at = await rendered.status_shown(self.redis, run.id)
        if self._to_set(state, have, set_at, time.time()) is None:
            return
        if await AsyncRefusals(self.redis).refused(STATUSES, run.team) is not None:
            return
        # One status writer per run at a time, acting on the newest state: a refresh that read
        # an older state can never land after the status was cleared.
        if not await self.redis.set(
            keys.status_lease(run.id), self.leases.owner, nx=True, px=int(STATUS_LEASE_SECONDS * 1000)
        ):
            self.wake(run.id, time.time() + LEASED_RETRY_SECONDS)
            return
        try:
            fresh = await self.load(run.id)
            if fresh is not None:
                await self._set(fresh)
        finally:
            await self.leases.release(keys.status_lease(run.id))

    async def _set(self, state: RunState) -> None:
        run = state.run
        have, set_at = await rendered.status_shown(self.redis, run.id)
        now = time.time()
        status = self._to_set(state, have, set_at, now)
        if status is None:
            return
        channel, thread_ts, team = run.channel or "", run.thread_ts or "", run.team
        try:
            await take_slots(
                self.client,
                team,
                "assistant.threads.setStatus",
                lambda: self.client.assistant_threads_setStatus(channel_id=channel, thread_ts=thread_ts, status=status),
                urgent=state.status.finished,  # clearing it is part of the final state
                patience_seconds=0,
                wait=False,
            )
        except SlotBusy as busy:  # never hold up the messages for a status: come back when a slot frees
            self.wake(run.id, now + max(busy.retry_after, LEASED_RETRY_SECONDS))
            return
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error in STATUS_UNSUPPORTED:
                await AsyncRefusals(self.redis).refuse(STATUSES, team, error)  # every process stops asking
                return
            log.info("run %s: setting the assistant status failed (%s); will retry", run.id, error)
            self.wake(run.id, now + RETRY_SECONDS)
            return
        except (TimeoutError, SlackClientError, OSError) as exc:
            log.info("run %s: setting the assistant status failed (%s); will retry", run.id, exc)
            self.wake(run.id, now + RETRY_SECONDS)
            return
        await rendered.remember(self.redis, run.id, {"status": status, "status_at": now})

    async def keep_alive(self, stop: asyncio.Event, active: Callable[[], Awaitable[Iterable[str]]]) -> None:
        """Refresh the status of every active run before Slack lets it lapse, whoever synced
        the run last and however long its messages wait for the rate limiter."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self.scan_seconds)
                return
            except TimeoutError:
                pass
            try:
                for run_id in await active():
                    have, set_at = await rendered.status_shown(self.redis, run_id)
                    if have and time.time() - set_at >= self.refresh_seconds:
                        state = await self.load(run_id)
                        if state is not None:
                            await self.sync(state)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("refreshing assistant statuses failed; continuing")
