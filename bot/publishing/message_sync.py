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

from bot.exceptions import SlotBusy
from bot.settings import DEFAULT_STOP_REACTION, ReportMode
from bot.slack.client import take_slots
from bot.slack.ratelimit import Urgency
from jobs import Run, RunState, RunStatus

from . import rendered
from .agent_sessions import AgentSessions, LatestRun
from .assistant_status import AssistantStatus, Load, Wake
from .canvas_sync import CanvasSync
from .chart_sync import ChartFiles, ChartsOutcome
from .file_notices import FileNotices
from .message_parts import CanvasView, ReportRendering, SlackMessage
from .progress_render import render_progress
from .report_render import render_report_parts
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


@dataclass(frozen=True)
class _Report:
    """The pinned report as it should be now, with its canvas and file brought up to date first."""

    message: SlackMessage
    ok: bool = True
    # The canvas exists and its link is in the message: its sections are brought up to date after
    # the messages (a burst of canvas edits must not hold the pinned message back).
    canvas_later: bool = False


def _render_report(
    state: RunState,
    attachment_error: str | None,
    chart_links: Mapping[str, str] | None,
    canvas: CanvasView | None,
) -> ReportRendering:
    return render_report_parts(state, attachment_error=attachment_error, chart_links=chart_links, canvas=canvas)


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
        canvases: CanvasSync | None = None,
        report_mode: ReportMode = "message",
        latest: LatestRun | None = None,
    ) -> None:
        self.redis = redis
        self.latest = latest  # the newest run of a thread: only it may edit the report the thread's runs share
        self.sessions = sessions  # the thread as an agent session; where there is none, the assistant status
        self.canvases = canvases  # a report too long for one message lives in a canvas (canvas_sync.py)
        self.report_mode = report_mode  # DEEPTHREAD_REPORT: "canvas" puts every report in its canvas
        self.file_notices = FileNotices(redis, client)  # a file the bot cannot open, said in the thread once
        self.client = client
        self.spill = spill
        self.charts = charts  # the run's charts as files in the thread (chart_sync.py)
        self.status = status
        self.load = load
        self.wake = wake
        self.is_active = is_active
        self.stop_reaction = stop_reaction  # named in the progress message's how-to-steer line

    async def sync(self, state: RunState, *, settle_presence: bool = True, wait_for_slots: bool = True) -> Synced:
        """Bring the run's messages, file and status up to date. `settle_presence=False` leaves a
        finished run's session (or status) as it is, for the caller to move on once its own part of
        the end is shown (`presence`): a streamed run's end goes out before its session moves on.
        `wait_for_slots=False`: a running run's message whose chat.update slot is not free now is
        left for a later sync (woken when one frees) rather than waited for; a streamed run's
        progress is paced by its stream's tier, and its sync must not sit in the report's."""
        run = state.run
        if not run.channel:
            return Synced(ok=True, sent=False)
        if await self._superseded(state):
            return await self._progress_only(state)
        # Charts go up first, so the report that links them is rendered with their permalinks.
        charts = await self.charts.sync(state, time.time()) if self.charts is not None else ChartsOutcome()
        if charts.wake_at is not None:
            self.wake(run.id, charts.wake_at)
        links = charts.links
        progress = await asyncio.to_thread(render_progress, state, self.stop_reaction)
        stored = await rendered.shown(self.redis, run.id)
        report = await self._report(state, links, later=True)
        presence = True
        if not state.status.finished:
            presence = await self._presence(state)  # before routine messages, which may wait long for a slot
        ok, edited = report.ok and charts.ok, False
        rendered_at = time.monotonic()
        for name, ts, message in (
            ("progress", run.progress_message, progress),
            ("report", run.report_message, report.message),
        ):
            if ts and stored.get(name) != message.digest():
                done = await self._update(
                    state, name, ts, message, rendered_at, stored.get(name), links, wait=wait_for_slots
                )
                ok, edited = ok and done.ok, edited or done.sent
            log.debug(
                "run %s v%s (%s): %s %s",
                run.id,
                state.version,
                state.status.value,
                name,
                "unchanged" if ts and stored.get(name) == message.digest() else f"synced, ts={ts}",
            )
        if report.canvas_later and self.canvases is not None:
            ok = await self._canvas(state, links) and ok
        ok = await self.file_notices.sync(state) and ok  # after the messages: the report comes first
        if state.status.finished and settle_presence:
            # The answer first, then the session moved on (or the status cleared).
            presence = await self._presence(state)
        return Synced(ok=ok and presence, sent=edited)

    async def _superseded(self, state: RunState) -> bool:
        """A finished run whose thread went on: a continuation edits the report they share now, and
        an older run's sync (a retry, a re-render after a restart) must never put its own back
        (seen in bench.soak: a parent's rendering landed over its continuation's final report)."""
        if not state.status.finished:
            return False  # a running run is its thread's newest: a reply during it is a note, not a run
        return await self._successor(state.run) is not None

    async def _successor(self, run: Run) -> RunState | None:
        """The thread's newest run, when it is not `run` and edits the report they share."""
        if self.latest is None or not run.report_message:
            return None
        latest = await self.latest(run.team, run.channel or "", run.thread_ts or "")
        if latest is not None and latest.run.id != run.id and latest.run.report_message == run.report_message:
            return latest
        return None

    async def _progress_only(self, state: RunState) -> Synced:
        """A superseded run's own progress message; the report is its successor's."""
        ts = state.run.progress_message
        progress = await asyncio.to_thread(render_progress, state, self.stop_reaction)
        stored = await rendered.shown(self.redis, state.run.id)
        if not ts or stored.get("progress") == progress.digest():
            return Synced(ok=True, sent=False)
        return await self._update(state, "progress", ts, progress, time.monotonic(), stored.get("progress"))

    async def _report(self, state: RunState, chart_links: Mapping[str, str] | None, *, later: bool = False) -> _Report:
        """Render the pinned report and bring what holds the full text up to date first: its canvas
        (created when the report outgrows the message, or always in canvas mode) or, where the
        workspace has no canvases, its file. The message is rendered again with what they came to
        (the canvas's link, the file's error)."""
        run = state.run
        view: CanvasView | None = None
        if self.canvases is not None:
            refused = await self.canvases.refused(run.team)
            link = await self.canvases.link(state)
            always = self.report_mode == "canvas" or link is not None  # a report that has a canvas keeps it
            view = CanvasView(
                always=always,
                permalink=link.permalink if link else "",
                title=link.title if link else "",
                refused=refused,
            )
        parts = await asyncio.to_thread(_render_report, state, None, chart_links, view)
        ok = True
        if parts.canvas is not None and view is not None and view.permalink and view.refused is None and later:
            return _Report(parts.message, canvas_later=True)
        if parts.canvas is not None and self.canvases is not None and view is not None:
            outcome = await self.canvases.sync(state, parts.canvas)
            ok = outcome.ok
            shown = CanvasView(
                # A report that has a canvas keeps it: not tried at full length in the message again.
                always=view.always or outcome.link is not None,
                permalink=outcome.link.permalink if outcome.link else view.permalink,
                title=outcome.link.title if outcome.link else view.title,
                refused=outcome.refused,
            )
            if shown != view:
                parts = await asyncio.to_thread(_render_report, state, None, chart_links, shown)
                view = shown
        spilled = await self.spill.sync(state, parts.attachment, time.time())
        if spilled.wake_at is not None:
            self.wake(run.id, spilled.wake_at)
        if spilled.error:
            parts = await asyncio.to_thread(_render_report, state, spilled.error, chart_links, view)
        return _Report(parts.message, ok=ok and spilled.ok)

    async def _canvas(self, state: RunState, chart_links: Mapping[str, str] | None) -> bool:
        """The canvas's sections, after the messages, from the newest state; False: sync again later
        (also when the workspace just refused canvases: the next sync shows the file instead)."""
        assert self.canvases is not None
        fresh = await self.load(state.run.id) or state
        link = await self.canvases.link(fresh)
        view = CanvasView(always=True, permalink=link.permalink if link else "", title=link.title if link else "")
        parts = await asyncio.to_thread(_render_report, fresh, None, chart_links, view)
        if parts.canvas is None:
            return True
        outcome = await self.canvases.sync(fresh, parts.canvas)
        return outcome.ok and outcome.refused is None

    async def presence(self, state: RunState) -> bool:
        """Move a finished run's session on (or clear its status); False: try again later."""
        return await self._presence(state)

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
        chart_links: Mapping[str, str] | None = None,
        *,
        wait: bool = True,
    ) -> Synced:
        run = state.run
        channel = run.channel or ""

        async def send() -> str | None:
            nonlocal message
            if time.monotonic() - rendered_at >= STALE_AFTER_SECONDS:  # waited for a slot: the run may have moved on
                fresh = await self.load(run.id)
                # Rendered again only if it did: twenty runs ending at once would each render twice.
                if fresh is not None and _moved_on(fresh, state):
                    if name == "report":
                        # The newer report may have outgrown the message: its canvas or file goes first.
                        message = (await self._report(fresh, chart_links, later=True)).message
                    else:
                        message = await asyncio.to_thread(render_progress, fresh, self.stop_reaction)
                    if message.digest() == sent:
                        return None
            # The report is checked again at the last moment: a continuation may have begun (and
            # ended) while this edit waited for its slot (seen in bench.soak: a parent's final,
            # queued behind twenty others, landed over its continuation's).
            if name == "report" and await self._successor(run) is not None:
                return None
            await self.client.chat_update(channel=channel, ts=ts, text=message.text, blocks=message.blocks)
            log.debug("run %s: %s sent (%d blocks)", run.id, name, len(message.blocks))  # ids, never words
            if name == "report" and (successor := await self._successor(run)) is not None:
                # One began while the edit was in flight (a 429's wait): it puts its own back.
                await rendered.forget(self.redis, successor.run.id, "report")
                self.wake(successor.run.id, time.time())
            return message.digest()

        try:
            digest = await take_slots(
                self.client,
                run.team,
                "chat.update",
                send,
                urgent=self._urgency(state),
                wait=wait or state.status.finished,  # a final state always waits for its slot
            )
        except SlotBusy as busy:
            self.wake(run.id, time.time() + busy.retry_after)
            log.debug("run %s: %s left for a free slot in %.1f s", run.id, name, busy.retry_after)
            return Synced(ok=True, sent=False)
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
        if state.status.finished or state.status == RunStatus.planned:  # a plan waits on the team
            return True

        async def ended() -> bool:
            return not await self.is_active(state.run.id)

        return ended


def _moved_on(fresh: RunState, rendered: RunState) -> bool:
    """Whether the stored state differs from the one a message was rendered from: every write
    bumps the version (jobs/records/store.py), the messages' own addresses included."""
    return fresh.version != rendered.version
