"""One sync of a run: its progress and report messages (and spilled file, and status) made
to match its current state.

Rendering is whole and deterministic, so a digest says whether Slack needs an update; only
changed messages are sent. A message waits for its rate-limit slot before it is rendered for
the last time: a sync that waited sends the newest state, not the one it started with.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from redis.asyncio import Redis as AsyncRedis
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.settings import DEFAULT_STOP_REACTION
from bot.slack.client import take_slots
from bot.slack.ratelimit import Urgency
from jobs import RunState

from . import rendered
from .agent_sessions import AgentSessions
from .assistant_status import AssistantStatus, Load, Wake
from .chart_sync import ChartFiles, ChartsOutcome
from .render import Attachment, SlackMessage, render_progress, render_report_parts
from .spill import SpillFiles

__all__ = ["MessageSync", "Synced"]

log = logging.getLogger("bot.publisher.messages")

# A rendering this old when its rate-limit slot comes up is rebuilt from the newest state first.
STALE_AFTER_SECONDS = 0.5
# Slack errors after which a message can never be updated again.
PERMANENT_ERRORS = frozenset(
    {
        "message_not_found",
        "cant_update_message",
        "edit_window_closed",
        "channel_not_found",
        "is_archived",
        "not_in_channel",
    }
)
# Slack refused the rendering itself: retrying the same bytes cannot help (a bug to log loudly).
REJECTED_RENDERING = frozenset({"msg_too_long", "msg_blocks_too_long", "invalid_blocks", "invalid_blocks_format"})


@dataclass(frozen=True)
class Synced:
    ok: bool  # False: a retry later is worthwhile
    sent: bool  # a message was edited (the run's coalescing interval starts again)


@dataclass
class _Rendering:
    progress: SlackMessage
    report: SlackMessage
    attachment: Attachment | None


def _render(
    state: RunState,
    attachment_error: str | None = None,
    stop_reaction: str = DEFAULT_STOP_REACTION,
    chart_links: Mapping[str, str] | None = None,
) -> _Rendering:
    parts = render_report_parts(state, attachment_error=attachment_error, chart_links=chart_links)
    return _Rendering(render_progress(state, stop_reaction), parts.message, parts.attachment)


class MessageSync:
    def __init__(
        self,
        redis: AsyncRedis,
        client: AsyncWebClient,
        spill: SpillFiles,
        status: AssistantStatus,
        *,
        load: Load,
        wake: Wake,
        is_active: Callable[[str], Awaitable[bool]],
        stop_reaction: str = DEFAULT_STOP_REACTION,
        charts: ChartFiles | None = None,
        sessions: AgentSessions | None = None,
    ) -> None:
        self.redis = redis
        self.sessions = sessions  # the thread as an agent session; where there is none, the assistant status
        self.client = client
        self.spill = spill
        self.charts = charts  # the run's charts as files in the thread (chart_sync.py)
        self.status = status
        self.load = load
        self.wake = wake
        self.is_active = is_active
        self.stop_reaction = stop_reaction  # named in the progress message's how-to-steer line

    async def sync(self, state: RunState) -> Synced:
        """Bring the run's messages, file and status up to date."""
        run = state.run
        if not run.channel:
            return Synced(ok=True, sent=False)
        # Charts go up first, so the report that links them is rendered with their permalinks.
        charts = await self.charts.sync(state, time.time()) if self.charts is not None else ChartsOutcome()
        if charts.wake_at is not None:
            self.wake(run.id, charts.wake_at)
        links = charts.links
        rendering = await asyncio.to_thread(_render, state, None, self.stop_reaction, links)
        stored = await rendered.shown(self.redis, run.id)
        outcome = await self.spill.sync(state, rendering.attachment, time.time())
        if outcome.wake_at is not None:
            self.wake(run.id, outcome.wake_at)
        presence = True
        if not state.status.finished:
            presence = await self._presence(state)  # before routine messages, which may wait long for a slot
        error = outcome.error
        if error:
            rendering.report = (await asyncio.to_thread(_render, state, error, self.stop_reaction, links)).report
        ok, edited = outcome.ok and charts.ok, False
        rendered_at = time.monotonic()
        for name, ts, message in (
            ("progress", run.progress_message, rendering.progress),
            ("report", run.report_message, rendering.report),
        ):
            if ts and stored.get(name) != message.digest():
                done = await self._update(state, name, ts, message, rendered_at, stored.get(name), error, links)
                ok, edited = ok and done.ok, edited or done.sent
        if state.status.finished:
            presence = await self._presence(
                state
            )  # the answer first, then the session moved on (or the status cleared)
        return Synced(ok=ok and presence, sent=edited)

    async def _presence(self, state: RunState) -> bool:
        """The agent session shows that the run works (and its stop button); where the workspace or
        thread has none, the assistant thread status does. False: try again later."""
        if self.sessions is not None:
            shown = await self.sessions.sync(state)
            if shown.by_session:
                return shown.ok
        await self.status.sync(state)
        return True

    async def _update(
        self,
        state: RunState,
        name: str,
        ts: str,
        message: SlackMessage,
        rendered_at: float,
        sent: str | None,
        attachment_error: str | None,
        chart_links: Mapping[str, str] | None = None,
    ) -> Synced:
        run = state.run
        channel = run.channel or ""

        async def send() -> str | None:
            nonlocal message
            if time.monotonic() - rendered_at >= STALE_AFTER_SECONDS:  # waited for a slot: the run moved on
                fresh = await self.load(run.id)
                if fresh is not None:
                    rendering = await asyncio.to_thread(
                        _render, fresh, attachment_error, self.stop_reaction, chart_links
                    )
                    message = rendering.progress
                    if name == "report":
                        # The newer report may have outgrown the message: its file goes first.
                        outcome = await self.spill.sync(fresh, rendering.attachment, time.time())
                        if outcome.error != attachment_error:
                            rendering = await asyncio.to_thread(
                                _render, fresh, outcome.error, self.stop_reaction, chart_links
                            )
                        message = rendering.report
                    if message.digest() == sent:
                        return None
            await self.client.chat_update(channel=channel, ts=ts, text=message.text, blocks=message.blocks)
            return message.digest()

        try:
            digest = await take_slots(self.client, run.team, "chat.update", send, urgent=self._urgency(state))
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error in PERMANENT_ERRORS:
                log.warning("run %s: %s message can no longer be updated (%s)", run.id, name, error)
                return Synced(ok=True, sent=False)  # nothing a retry could fix; do not loop on it
            if error in REJECTED_RENDERING:
                log.error(
                    "run %s: Slack refused the %s rendering (%s): %s",
                    run.id,
                    name,
                    error,
                    exc.response.get("response_metadata"),
                )
                await rendered.remember(self.redis, run.id, {name: message.digest()})  # not again until it changes
                return Synced(ok=True, sent=False)
            log.warning("run %s: updating the %s message failed (%s); will retry", run.id, name, error)
            return Synced(ok=False, sent=False)
        except (TimeoutError, SlackClientError, OSError) as exc:
            log.warning("run %s: updating the %s message failed (%s); will retry", run.id, name, exc)
            return Synced(ok=False, sent=False)
        if digest is None:
            return Synced(ok=True, sent=False)
        await rendered.remember(self.redis, run.id, {name: digest})
        return Synced(ok=True, sent=True)

    def _urgency(self, state: RunState) -> Urgency:
        """A final state is urgent; so is a routine update whose run ends while it waits for a
        slot (it will send the final state), or the final flush would queue behind it."""
        if state.status.finished:
            return True

        async def ended() -> bool:
            return not await self.is_active(state.run.id)

        return ended
