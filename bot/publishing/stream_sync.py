"""A run's progress as Slack's native stream: plan, task cards with sources, text, end state.

The sync mode next to message_sync.py (which keeps the pinned report, its file and the
assistant status either way). The mention flow opens a run's first stream (`open_stream`) in
place of posting a progress message; from then on the publisher appends to it from run state:

- Only what changed is sent: task cards and the plan title by digest, text lines once per run
  (stream_render.py renders them; stream_records.py remembers what was sent, in Redis).
- Rollover: Slack closes a stream a few minutes after it starts (undocumented, widely
  reported), and a message holds only so much. Before either, the stream is stopped cleanly
  (its open cards marked complete, "continued below") and a new one starts with the cards of
  the steps not yet done, so the thread never shows a half-finished stream. A stream Slack
  closed anyway (`message_not_in_streaming_state`) is simply followed by a new one.
- Fallback: a workspace that refuses chat.startStream is remembered (stream_records.py) and
  its runs get the edited progress message instead, even mid-run (the last stream message is
  then edited in place by message_sync.py).
- Restart-safe: a restarted publisher reads the record and resumes the open stream, rolls it
  over if it is too old, or closes it with the run's end state.
- Every call goes through the same per-workspace limiter (take_slots), a final state urgently.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.settings import DEFAULT_STOP_REACTION, StreamConfig
from bot.slack.client import take_slots
from jobs import Runs, RunState, RunStore

from .assistant_status import Wake
from .message_parts import _SLACK_USER_ID
from .message_sync import Synced
from .stream_records import StreamRecord, StreamRecords
from .stream_render import Chunk, StreamView, chunk_chars, controls_block, digest, end_text, render_view

__all__ = ["REFUSALS", "StreamSync", "open_stream", "streamable"]

log = logging.getLogger("bot.publisher.streams")

DISPLAY_MODE = "plan"  # all task cards together in one plan block, under the plan title
# What Slack answers where streaming is not available: the methods' pages list no "feature
# off" error, so these are the refusals a workspace, channel or token without it can give.
REFUSALS = frozenset(
    {
        "feature_not_enabled",
        "not_allowed_token_type",
        "unknown_method",
        "channel_type_not_supported",
        "messages_tab_disabled",
        "missing_recipient_team_id",
        "missing_recipient_user_id",
    }
)
# The stream takes no more appends (Slack closed it, or someone stopped it): continue in a new one.
ENDED = frozenset({"message_not_in_streaming_state", "message_not_found", "stopped_by_user"})
# Someone pressed stop on the stream in Slack. Where the thread is an agent session the click
# arrives as agent_session_stopped, which stops the run by the stop rules; elsewhere (only the
# stream's recipient, the requester, sees its stop) the run stops as a stop reaction would stop it.
# Either way its end state is shown in a new stream.
STOPPED_IN_SLACK = "stopped_by_user"
# Slack refused what we sent; a retry of the same chunks cannot help (a bug to log loudly).
REJECTED = frozenset({"invalid_chunks", "invalid_blocks", "msg_too_long", "msg_blocks_too_long", "msg_blocks_too_many"})
# Slack errors after which nothing more can be shown in this channel.
GONE = frozenset({"channel_not_found", "is_archived", "not_in_channel", "restricted_action"})
CONTINUED = "_Continued in the next message…_"
CONTINUED_DETAILS = "Continues in the next message"


def streamable(state: RunState) -> bool:
    """Slack streams only as a thread reply, and in a channel only to a named user of a named team."""
    run = state.run
    if not run.channel or not run.thread_ts:
        return False
    if run.channel.startswith("D"):
        return True
    return bool(run.team) and bool(run.requester and _SLACK_USER_ID.fullmatch(run.requester))


def _opening(view: StreamView, stop_reaction: str) -> list[Chunk]:
    return [
        {"type": "plan_update", "title": view.title},
        controls_block(stop_reaction),
        *view.tasks.values(),
        *(_markdown_chunk(line) for line in view.texts.values()),
    ]


async def _start(
    client: AsyncWebClient, state: RunState, view: StreamView, stop_reaction: str, *, urgent: bool, number: int
) -> StreamRecord:
    """Start a stream showing `view`; raises SlackApiError as Slack answered."""
    run = state.run
    chunks = _opening(view, stop_reaction)
    recipients: dict[str, Any] = {}
    if run.team and run.requester and _SLACK_USER_ID.fullmatch(run.requester):
        recipients = {"recipient_team_id": run.team, "recipient_user_id": run.requester}

    async def start() -> Any:
        return await client.chat_startStream(
            channel=run.channel or "",
            thread_ts=run.thread_ts or "",
            task_display_mode=DISPLAY_MODE,
            chunks=chunks,
            **recipients,
        )

    answer = await take_slots(client, run.team, "chat.startStream", start, urgent=urgent)
    return StreamRecord(
        channel=run.channel or "",
        ts=str(answer["ts"]),
        opened_at=time.time(),
        number=number,
        title=digest(view.title),
        tasks={card_id: digest(card) for card_id, card in view.tasks.items()},
        texts=list(view.texts),
        chars=chunk_chars(chunks),
    )


async def open_stream(
    client: AsyncWebClient, records: StreamRecords, config: StreamConfig, state: RunState, stop_reaction: str
) -> str | None:
    """The mention flow's side: start the run's first stream and return its ts, or None when
    this run's progress should be an edited message instead (the setting, the workspace
    refused streaming before or just now, or the run is not in a thread with a known user)."""
    team = state.run.team
    if config.mode != "stream" or not streamable(state) or await asyncio.to_thread(records.refused, team):
        return None
    try:
        record = await _start(client, state, render_view(state), stop_reaction, urgent=False, number=1)
    except SlackApiError as exc:
        error = str(exc.response.get("error"))
        if error in REFUSALS:
            await asyncio.to_thread(records.refuse, team, error)
        else:
            log.warning("run %s: could not start a progress stream (%s); posting a message", state.run.id, error)
        return None
    await asyncio.to_thread(records.put, state.run.id, record)
    return record.ts


class StreamSync:
    def __init__(
        self,
        records: StreamRecords,
        client: AsyncWebClient,
        store: RunStore,
        config: StreamConfig,
        *,
        wake: Wake,
        is_active: Callable[[str], Awaitable[bool]],
        stop_reaction: str = DEFAULT_STOP_REACTION,
        stop_by_event: Callable[[str | None], Awaitable[bool]] | None = None,
    ) -> None:
        self.records = records
        # Whether a workspace's stops arrive as the agent session's stop event (its listener applies
        # the stop rules); else a stream stopped in Slack stops the run on the requester's behalf.
        self.stop_by_event = stop_by_event
        self.client = client
        self.runs = Runs(store)  # to register each new stream message as the run's progress message
        self.config = config
        self.wake = wake
        self.is_active = is_active
        self.stop_reaction = stop_reaction

    async def streaming(self, run_id: str) -> bool:
        """Whether this run's progress is (still) shown as a stream."""
        record = await asyncio.to_thread(self.records.get, run_id)
        return record is not None and not record.fallback

    async def sync(self, state: RunState, *, stop: bool = True) -> Synced | None:
        """Bring the run's stream up to date; None when the run's progress is not a stream
        (message_sync.py shows it). `stop=False`: a finished run's end is shown, and the stream is
        left open for a later call to stop (a stop may wait a minute for its Tier 2 slot)."""
        run = state.run
        record = await asyncio.to_thread(self.records.get, run.id)
        if record is None or record.fallback:
            return None
        if record.closed:
            return Synced(ok=True, sent=False)
        try:
            sent = await self._sync(state, record, stop=stop)
            if sent is None:
                return None  # refused mid-run: from now on the last stream message is edited
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error in GONE:
                log.warning("run %s: the progress stream can no longer be shown (%s)", run.id, error)
                await self._save(run.id, record.model_copy(update={"closed": True}))
                return Synced(ok=True, sent=False)
            log.warning("run %s: updating the progress stream failed (%s); will retry", run.id, error)
            return Synced(ok=False, sent=False)
        except (TimeoutError, SlackClientError, OSError) as exc:
            log.warning("run %s: updating the progress stream failed (%s); will retry", run.id, exc)
            return Synced(ok=False, sent=False)
        if not state.status.finished and not record.fallback:
            self.wake(run.id, record.opened_at + self.config.max_seconds)  # roll over even if nothing happens
        return Synced(ok=True, sent=sent)

    async def _sync(self, state: RunState, record: StreamRecord, *, stop: bool = True) -> bool | None:
        """True: something was sent; False: nothing to send; None: streaming was refused."""
        view = render_view(state, after_step=record.after_step)
        pending = self._pending(view, record)
        if state.status.finished:
            # The last call: sum up what does not fit rather than open another stream (each costs
            # a Tier 2 start and stop), and try the stop even on an old stream (_finish copes).
            pending, too_old = _fit(pending, record, self.config.max_tasks), False
        else:
            too_old = time.time() - record.opened_at >= self.config.max_seconds
        cards = len(set(record.tasks) | {c["id"] for c in pending if c["type"] == "task_update"})
        too_full = cards > self.config.max_tasks or record.chars + chunk_chars(pending) > self.config.max_chars
        if too_old or too_full:
            record = await self._roll(state, record, view)
            if record.fallback:
                return None
            if not state.status.finished:
                return True
            view = render_view(state, after_step=record.after_step)
            pending = self._pending(view, record)
        if state.status.finished:
            return await self._finish(state, record, pending, stop=stop)
        if not pending:
            return False
        try:
            await self._call(state, "chat.appendStream", channel=record.channel, ts=record.ts, chunks=pending)
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error == STOPPED_IN_SLACK:
                await self._stop_run(state)
            if error in ENDED:  # Slack closed it first: what it showed stays; continue below it
                return None if (await self._next(state, record, view)).fallback else True
            if error in REJECTED:
                log.error("run %s: Slack refused the stream's chunks (%s): %s", state.run.id, error, pending)
                await self._save(state.run.id, self._shown(record, view, pending))  # not again until they change
                return False
            raise
        await self._save(state.run.id, self._shown(record, view, pending))
        return True

    async def _stop_run(self, state: RunState) -> None:
        if state.status.finished:
            return
        if self.stop_by_event is not None and await self.stop_by_event(state.run.team):
            # The session's stop button stopped the stream; its event (and the authority rules) decide.
            log.info("run %s: its stream was stopped in Slack; the session stop event decides", state.run.id)
            return
        by = f"<@{state.run.requester}>" if state.run.requester else "someone in Slack"
        if await asyncio.to_thread(self.runs.request_stop, state.run.id, by):
            log.info("run %s: stopped from its progress stream by %s", state.run.id, by)

    @staticmethod
    def _pending(view: StreamView, record: StreamRecord) -> list[Chunk]:
        """The chunks that change what this stream shows: new or changed cards, a new title, new lines."""
        chunks: list[Chunk] = []
        if digest(view.title) != record.title:
            chunks.append({"type": "plan_update", "title": view.title})
        chunks += [card for card_id, card in view.tasks.items() if record.tasks.get(card_id) != digest(card)]
        chunks += [_markdown_chunk(line) for key, line in view.texts.items() if key not in record.texts]
        return chunks

    @staticmethod
    def _shown(record: StreamRecord, view: StreamView, sent: list[Chunk]) -> StreamRecord:
        tasks = dict(record.tasks)
        for chunk in sent:
            if chunk["type"] == "task_update":
                tasks[chunk["id"]] = digest(chunk)
        return record.model_copy(
            update={
                "title": digest(view.title),
                "tasks": tasks,
                "texts": [*record.texts, *(key for key in view.texts if key not in record.texts)],
                "chars": record.chars + chunk_chars(sent),
            }
        )

    async def _finish(
        self, state: RunState, record: StreamRecord, pending: list[Chunk], *, stop: bool = True
    ) -> bool | None:
        """The end state: every card settled and the outcome as the last words, appended first
        (chat.appendStream, Tier 4: twenty runs ending at once all show their end within seconds),
        then the stream stopped (chat.stopStream, Tier 2: those may trail by a minute)."""
        if not record.end_shown:
            try:
                await self._call(
                    state,
                    "chat.appendStream",
                    channel=record.channel,
                    ts=record.ts,
                    chunks=[*pending, _markdown_chunk(end_text(state))],
                )
            except SlackApiError as exc:
                if str(exc.response.get("error")) not in ENDED:
                    raise
                return await self._end_in_new_stream(state, record)
            record = record.model_copy(update={"end_shown": True})
            await self._save(state.run.id, record)
        if not stop:
            return True
        try:
            await self._call(state, "chat.stopStream", channel=record.channel, ts=record.ts)
        except SlackApiError as exc:
            if str(exc.response.get("error")) not in ENDED:
                raise  # the end is shown; the stop is tried again on a later sync
        await self._save(state.run.id, record.model_copy(update={"closed": True}))
        log.info("run %s: progress stream %d closed (%s)", state.run.id, record.number, state.status.value)
        return True

    async def _end_in_new_stream(self, state: RunState, record: StreamRecord) -> bool | None:
        """Closed by Slack before the end (a publisher that was down, say): show the end in a new one."""
        view = render_view(state, after_step=record.after_step)
        record = await self._open(state, record, view, after_step=record.after_step)
        if record.fallback:
            return None
        await self._call(
            state, "chat.stopStream", channel=record.channel, ts=record.ts, chunks=[_markdown_chunk(end_text(state))]
        )
        await self._save(state.run.id, record.model_copy(update={"end_shown": True, "closed": True}))
        log.info("run %s: progress stream %d closed (%s)", state.run.id, record.number, state.status.value)
        return True

    async def _roll(self, state: RunState, record: StreamRecord, view: StreamView) -> StreamRecord:
        """Stop this stream cleanly (open cards settled, "continued below") and start the next."""
        settled: list[Chunk] = []
        for card_id, card in view.tasks.items():
            if card_id not in record.tasks:
                continue  # first shown in the next stream
            if card["status"] == "in_progress":  # shown again, still running, in the next stream
                settled.append({**card, "status": "complete", "details": CONTINUED_DETAILS})
            elif record.tasks[card_id] != digest(card):  # finished since: show it finished here
                settled.append(card)
        closing: list[Chunk] = [*settled, _markdown_chunk(CONTINUED)]
        try:
            await self._call(state, "chat.stopStream", channel=record.channel, ts=record.ts, chunks=closing)
        except SlackApiError as exc:
            if str(exc.response.get("error")) not in ENDED:
                raise
        return await self._next(state, record, view)

    async def _next(self, state: RunState, record: StreamRecord, view: StreamView) -> StreamRecord:
        """The next stream of the run: it starts after the last step this one showed complete.

        More finished steps than one stream holds (a burst between two syncs) are summed up in
        one line rather than spread over several streams: each stream costs a start and a stop,
        and those are Tier 2 (about 20 a minute for the whole workspace)."""
        done = [
            _step_of(card_id)
            for card_id, card in view.tasks.items()
            if card_id in record.tasks and card["status"] == "complete"
        ]
        after = max([record.after_step, *done])
        view = render_view(state, after_step=after)
        cards = list(view.tasks)
        overflow = len(cards) - self.config.max_tasks
        if overflow > 0:  # only the last card can still be running: the skipped ones are all finished
            skipped_to = _step_of(cards[overflow]) - 1
            line = f"…and {overflow} more finished steps (searches and page reads), not shown one by one."
            view = render_view(state, after_step=skipped_to)
            view = StreamView(
                title=view.title, tasks=view.tasks, texts={f"skipped:{after}-{skipped_to}": line, **view.texts}
            )
            after = skipped_to
        return await self._open(state, record, view, after_step=after)

    async def _open(self, state: RunState, record: StreamRecord, view: StreamView, *, after_step: int) -> StreamRecord:
        """Start the next stream and register it as the run's progress message; on a refusal the
        run falls back to the edited message (the last stream message, edited in place)."""
        run = state.run
        try:
            fresh = await _start(
                self.client,
                state,
                view,
                self.stop_reaction,
                urgent=state.status.finished,
                number=record.number + 1,
            )
        except SlackApiError as exc:
            error = str(exc.response.get("error"))
            if error not in REFUSALS:
                raise
            await asyncio.to_thread(self.records.refuse, run.team, error)
            fallback = record.model_copy(update={"fallback": True})
            await self._save(run.id, fallback)
            return fallback
        fresh = fresh.model_copy(update={"after_step": after_step, "texts": sorted({*record.texts, *fresh.texts})})
        await self._save(run.id, fresh)
        # Reactions and the button on the new message find the run; a fallback edits this one.
        await asyncio.to_thread(self.runs.attach_messages, run.id, progress=fresh.ts, report=run.report_message or "")
        log.info("run %s: progress continues in stream %d", run.id, fresh.number)
        return fresh

    async def _call(self, state: RunState, method: str, **arguments: Any) -> Any:
        call = getattr(self.client, method.replace(".", "_"))
        urgent = state.status.finished or (lambda: self._ended(state.run.id))
        return await take_slots(self.client, state.run.team, method, lambda: call(**arguments), urgent=urgent)

    async def _ended(self, run_id: str) -> bool:
        return not await self.is_active(run_id)

    async def _save(self, run_id: str, record: StreamRecord) -> None:
        await asyncio.to_thread(self.records.put, run_id, record)


def _markdown_chunk(line: str) -> Chunk:
    """One line of text: appended markdown runs on from what came before, so each ends its paragraph."""
    return {"type": "markdown_text", "text": line + "\n\n"}


def _fit(pending: list[Chunk], record: StreamRecord, max_tasks: int) -> list[Chunk]:
    """Keep the newest cards that fit in the stream; the older new ones become one line."""
    new = [c for c in pending if c["type"] == "task_update" and c["id"] not in record.tasks]
    room = max(0, max_tasks - len(record.tasks))
    if len(new) <= room:
        return pending
    dropped = {c["id"] for c in new[: len(new) - room]}
    line = f"…and {len(dropped)} more finished steps (searches and page reads), not shown one by one."
    return [c for c in pending if c.get("id") not in dropped] + [_markdown_chunk(line)]


def _step_of(card_id: str) -> int:
    """The step a card starts at: "step-12" and "agents-12" are 12."""
    return int(card_id.rsplit("-", 1)[1])
