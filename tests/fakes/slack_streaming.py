"""The fake Slack's chat streaming methods: chat.startStream, chat.appendStream, chat.stopStream.

Argument rules and error codes from each method's page in Slack's reference (the errors
lists, the 12,000-character markdown_text limit, the 50 blocks sent through `chunks`,
recipient_user_id and recipient_team_id required outside DMs, markdown_text and chunks not
both in one call, the mode a stream started in kept for its appends). What the pages leave
out is the fake's assumption, named as such below:

- ASSUMED: a stream stops accepting appends STREAM_LIFETIME_SECONDS after it started, or
  STREAM_IDLE_SECONDS after its last call (apps report both at "about five minutes"); Slack
  then answers `message_not_in_streaming_state`.
- ASSUMED: a workspace without the feature answers chat.startStream with `feature_not_enabled`
  (`refuse_streaming()` turns that on; the docs name no such error).
- ASSUMED: every task card counts as one of the 50 blocks a message may get through `chunks`,
  the streamed text is limited like any message's (40,000 characters, `msg_too_long`), and a
  message still streaming cannot be edited with chat.update (`cant_update_message`).

`register(fake)` adds the methods to a FakeSlack; what a user sees is kept per stream
(`Stream`: the plan title, each task card as last sent, the text, the blocks) and mirrored into
the thread as an ordinary message, so the tests read streams like any other reply.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.fakes.slack_records import MAX_BLOCKS, MAX_TEXT_CHARS, SlackError, SlackMessage, _str

if TYPE_CHECKING:
    from tests.fakes.slack import FakeSlack

__all__ = ["STREAM_IDLE_SECONDS", "STREAM_LIFETIME_SECONDS", "Stream", "register"]

MARKDOWN_TEXT_CHARS = 12_000  # one call's markdown_text (documented)
STREAM_LIFETIME_SECONDS = 300.0  # ASSUMED, see the module docstring
STREAM_IDLE_SECONDS = 300.0  # ASSUMED
DISPLAY_MODES = frozenset({"timeline", "plan", "dense"})
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
CHUNK_TYPES = frozenset({"markdown_text", "task_update", "plan_update", "blocks"})
REFUSAL = "feature_not_enabled"  # ASSUMED


@dataclass
class Stream:
    """One streamed message as a user sees it."""

    channel: str
    ts: str
    thread_ts: str | None
    recipient_user_id: str | None
    recipient_team_id: str | None
    display_mode: str
    mode: str  # "chunks" or "markdown_text": what the stream started with; appends must match
    started_at: float  # monotonic
    last_call_at: float
    streaming: bool = True
    expired: bool = False  # closed by the (fake) platform, not by the app
    stopped_by_user: bool = False  # stopped by a person's click on the session's stop button
    title: str = ""  # the plan title as last sent
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> the card as last sent
    text: str = ""  # every markdown text appended, in order
    blocks: list[dict[str, Any]] = field(default_factory=list)  # blocks sent through chunks
    final_blocks: list[dict[str, Any]] = field(default_factory=list)  # chat.stopStream's `blocks`
    calls: int = 0

    def plain(self) -> str:
        """The message as text: title, one line per card, the text."""
        lines = [self.title] if self.title else []
        for card in self.tasks.values():
            urls = " ".join(s["url"] for s in card.get("sources") or [])
            lines.append(f"[{card['status']}] {card['title']}" + (f" ({urls})" if urls else ""))
        if self.text:
            lines.append(self.text)
        return "\n".join(lines)


def register(fake: FakeSlack) -> None:
    """Teach `fake` the three streaming methods (idempotent)."""
    if getattr(fake, "streams", None) is not None:
        return
    fake.streams = {}  # type: ignore[attr-defined]  # ts -> Stream
    fake.streaming_refused = False  # type: ignore[attr-defined]
    fake.stream_lifetime_seconds = STREAM_LIFETIME_SECONDS  # type: ignore[attr-defined]
    fake.stream_idle_seconds = STREAM_IDLE_SECONDS  # type: ignore[attr-defined]
    methods = _Methods(fake)
    update = fake._methods["chat.update"]

    def chat_update(p: dict[str, Any]) -> dict[str, Any]:
        stream = fake.streams.get(_str(p.get("ts")))  # type: ignore[attr-defined]
        if stream is not None and methods.live(stream):
            raise SlackError("cant_update_message")
        return update(p)

    fake._methods.update(
        {
            "chat.startStream": methods.start,
            "chat.appendStream": methods.append,
            "chat.stopStream": methods.stop,
            "chat.update": chat_update,
        }
    )


def refuse_streaming(fake: FakeSlack, refused: bool = True) -> None:
    """This workspace lacks the feature: chat.startStream answers the refusal."""
    register(fake)
    fake.streaming_refused = refused  # type: ignore[attr-defined]


def expire(fake: FakeSlack, ts: str) -> None:
    """Slack closes this stream now (as it does after a few minutes)."""
    with fake._lock:
        stream = fake.streams[ts]  # type: ignore[attr-defined]
        stream.streaming, stream.expired = False, True


def streams_in(fake: FakeSlack, channel: str, thread_ts: str) -> list[Stream]:
    """The thread's streams, oldest first."""
    with fake._lock:
        found = [s for s in fake.streams.values() if s.channel == channel and s.thread_ts == thread_ts]  # type: ignore[attr-defined]
        return sorted(found, key=lambda s: s.started_at)


class _Methods:
    def __init__(self, fake: FakeSlack) -> None:
        self.fake = fake

    # --- the rules shared by the three methods -----------------------------------------

    def live(self, stream: Stream) -> bool:
        """Still streaming: not stopped, and not past the platform's lifetime or idle limit."""
        if not stream.streaming:
            return False
        now = time.monotonic()
        fake: Any = self.fake
        if now - stream.started_at > fake.stream_lifetime_seconds or now - stream.last_call_at > fake.stream_idle_seconds:
            stream.streaming, stream.expired = False, True
        return stream.streaming

    def _content(self, p: dict[str, Any], *, required: bool) -> tuple[str, str | None, list[dict[str, Any]] | None]:
        markdown = p.get("markdown_text")
        chunks = p.get("chunks")
        if markdown is not None and chunks is not None:
            raise SlackError("cannot_provide_both_markdown_text_and_chunks")
        if required and markdown is None and chunks is None:
            raise SlackError("markdown_text_or_chunks_required")
        if markdown is not None:
            markdown = _str(markdown)
            if len(markdown) > MARKDOWN_TEXT_CHARS:
                raise SlackError("msg_too_long")
            return "markdown_text", markdown, None
        if chunks is None:
            return "", None, None
        if not isinstance(chunks, list):
            raise SlackError("invalid_chunks")
        for chunk in chunks:
            _check_chunk(chunk)
        return "chunks", None, chunks

    def _stream(self, p: dict[str, Any]) -> Stream:
        channel, ts = _str(p.get("channel")), _str(p.get("ts"))
        if not channel:
            raise SlackError("channel_not_found")
        stream = self.fake.streams.get(ts) if ts else None  # type: ignore[attr-defined]
        if stream is None or stream.channel != channel:
            raise SlackError("message_not_found")
        if not self.live(stream):
            raise SlackError("stopped_by_user" if stream.stopped_by_user else "message_not_in_streaming_state")
        return stream

    def _apply(self, stream: Stream, markdown: str | None, chunks: list[dict[str, Any]] | None) -> None:
        """Check the message's limits with this call's content, then show it."""
        after = copy.deepcopy(stream)
        if markdown is not None:
            after.text += markdown
        for chunk in chunks or []:
            kind = chunk["type"]
            if kind == "markdown_text":
                after.text += chunk["text"]
            elif kind == "plan_update":
                after.title = chunk["title"]
            elif kind == "task_update":
                after.tasks[chunk["id"]] = copy.deepcopy(chunk)
            else:
                after.blocks += copy.deepcopy(chunk["blocks"])
        if len(after.tasks) + len(after.blocks) > MAX_BLOCKS:
            raise SlackError("msg_blocks_too_many")
        if len(after.plain()) > MAX_TEXT_CHARS:
            raise SlackError("msg_too_long")
        stream.text, stream.title, stream.tasks, stream.blocks = after.text, after.title, after.tasks, after.blocks
        stream.calls += 1
        stream.last_call_at = time.monotonic()
        message = self.fake._messages[stream.channel][stream.ts]
        message.text = stream.plain()
        message.blocks = copy.deepcopy(stream.blocks + stream.final_blocks) or None

    # --- the methods -----------------------------------------------------------------

    def start(self, p: dict[str, Any]) -> dict[str, Any]:
        fake: Any = self.fake
        channel = _str(p.get("channel"))
        if not channel:
            raise SlackError("channel_not_found")
        if fake.streaming_refused:
            raise SlackError(REFUSAL)
        if not channel.startswith("D"):  # outside a DM the stream is for one user of one team
            if not _str(p.get("recipient_team_id")):
                raise SlackError("missing_recipient_team_id")
            if not _str(p.get("recipient_user_id")):
                raise SlackError("missing_recipient_user_id")
        mode = _str(p.get("task_display_mode")) or "timeline"
        if mode not in DISPLAY_MODES:
            raise SlackError("invalid_arguments")
        kind, markdown, chunks = self._content(p, required=False)
        thread_ts = _str(p.get("thread_ts")) or None
        now = time.monotonic()
        ts = fake._next_ts()
        stream = Stream(
            channel=channel,
            ts=ts,
            thread_ts=thread_ts,
            recipient_user_id=_str(p.get("recipient_user_id")) or None,
            recipient_team_id=_str(p.get("recipient_team_id")) or None,
            display_mode=mode,
            mode=kind or "chunks",
            started_at=now,
            last_call_at=now,
        )
        fake._store(
            SlackMessage(channel=channel, ts=ts, text="", thread_ts=thread_ts, user=fake._caller.bot_user_id, bot_id=fake._caller.bot_id)
        )
        try:
            self._apply(stream, markdown, chunks)
        except SlackError:
            del fake._messages[channel][ts]  # refused: nothing was posted
            raise
        fake.streams[ts] = stream
        return {"channel": channel, "ts": ts}

    def append(self, p: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(p)
        kind, markdown, chunks = self._content(p, required=True)
        if stream.calls > 0 and kind != stream.mode:
            raise SlackError("streaming_mode_mismatch")
        self._apply(stream, markdown, chunks)
        return {"channel": stream.channel, "ts": stream.ts}

    def stop(self, p: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(p)
        kind, markdown, chunks = self._content(p, required=False)
        if kind and kind != stream.mode:
            raise SlackError("streaming_mode_mismatch")
        blocks = p.get("blocks")
        if blocks is not None:
            if not isinstance(blocks, list):
                raise SlackError("invalid_blocks")
            if len(blocks) > MAX_BLOCKS:
                raise SlackError("msg_blocks_too_many")
            stream.final_blocks = copy.deepcopy(blocks)
        self._apply(stream, markdown, chunks)
        stream.streaming = False
        message = self.fake._messages[stream.channel][stream.ts]
        return {"channel": stream.channel, "ts": stream.ts, "message": self.fake._render(message)}


def _check_chunk(chunk: Any) -> None:
    """Slack's chunk shapes; anything else is `invalid_chunks`."""
    if not isinstance(chunk, dict) or chunk.get("type") not in CHUNK_TYPES:
        raise SlackError("invalid_chunks")
    kind = chunk["type"]
    if kind == "markdown_text":
        if not isinstance(chunk.get("text"), str):
            raise SlackError("invalid_chunks")
        if len(chunk["text"]) > MARKDOWN_TEXT_CHARS:
            raise SlackError("msg_too_long")
    elif kind == "plan_update":
        if not _str(chunk.get("title")):
            raise SlackError("invalid_chunks")
    elif kind == "task_update":
        if not _str(chunk.get("id")) or not _str(chunk.get("title")) or chunk.get("status") not in TASK_STATUSES:
            raise SlackError("invalid_chunks")
        for source in chunk.get("sources") or []:
            if not isinstance(source, dict) or source.get("type") != "url" or not source.get("url") or not source.get("text"):
                raise SlackError("invalid_chunks")
    elif not isinstance(chunk.get("blocks"), list):
        raise SlackError("invalid_chunks")
