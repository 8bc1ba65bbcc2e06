"""The run's Slack thread as the engine's ThreadWorkspace: its files and its earlier messages.

Files are listed from the thread's messages (`conversations.replies`), described by
`files.info`, and downloaded from the file's own `url_private_download` with the bot token as
a Bearer header (Slack requires it, with the `files:read` scope). Only files of this thread are
downloaded, and only from Slack's file host: nothing a user or a page writes can point this
path at another URL. Without a valid token Slack does not refuse with an error status: it
sends its sign-in page (HTML, 200), so an HTML answer for a non-HTML file is a refusal.

The bot's own messages (any with a `bot_id`, or from the bot's user) are read but marked
`is_bot`: they echo model-chosen text, so none of their links becomes fetchable
(agent/tools/read_thread.py). Files the bot uploaded itself (a spilled report, a chart) are not
the thread's files: they are the model's own output, not material people shared, so read_thread
lists none, read_file and find_in_files open none, and no citation of one makes its address seen.

An app distributed outside the Slack Marketplace (DEEPTHREAD_SLACK_DISTRIBUTED) may read a thread
once a minute, 15 messages at a time: its thread is the messages serve kept from their events
(thread_log.py) with what `conversations.replies` gave so far, one page of 15 a minute at most, the
oldest first; a 429 waits for its Retry-After. Numbers count the messages known so far, by time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from agent import MAX_FILE_BYTES, FileInfo, FileUnavailable, ThreadMessage, WorkspaceError, too_large
from bot import limits

from .mrkdwn_escaping import escape_text
from .ratelimit import retry_after_seconds
from .thread_log import ThreadLog

__all__ = ["SLACK_FILES_ORIGIN", "PacedReading", "SlackWorkspace", "files_origin_for"]

SLACK_FILES_ORIGIN = "https://files.slack.com"
# The thread is read once per this many seconds however many tools ask: a run's parallel calls
# cost one conversations.replies, and a file shared a moment ago is seen at the next look.
THREAD_CACHE_SECONDS = 5.0
# Messages read from one thread (pages of REPLIES_PAGE); longer threads are read to here.
MAX_THREAD_MESSAGES = 1_000
REPLIES_PAGE = 200
DOWNLOAD_TIMEOUT_SECONDS = 60.0
# Slack marks a file gone or beyond a free workspace's history with these modes.
UNAVAILABLE_MODES = ("tombstone", "hidden_by_limit")


def files_origin_for(api_url: str) -> str:
    """Where this workspace's files are served: files.slack.com for Slack itself, the API's own
    origin for a test double or proxy named by SLACK_API_URL."""
    parts = urlsplit(api_url)
    if parts.hostname in ("slack.com", "www.slack.com"):
        return SLACK_FILES_ORIGIN
    return f"{parts.scheme}://{parts.netloc}"


def _refusal(exc: SlackApiError, what: str, name: str = "") -> WorkspaceError:
    """Slack's refusal as the model is told it, and, when a person in the thread can fix it, as they are."""
    error = str(exc.response.get("error", "unknown_error"))
    shown = escape_text(name or what)
    if error == "missing_scope":
        needed = exc.response.get("needed", "files:read")
        return FileUnavailable(
            f"the bot's Slack token lacks the {needed} scope, so it cannot read {what}. Ask a "
            f"workspace admin to reinstall Deepthread with {needed} (it is in manifest.yml); "
            "meanwhile ask the requester to paste the relevant part into the thread",
            for_people=(
                f"I can't open {shown}: my Slack app lacks the {escape_text(needed)} permission. A workspace "
                "admin can reinstall Deepthread to add it; meanwhile paste the part that matters into this thread."
            ),
        )
    if error in ("file_not_found", "file_deleted"):
        return FileUnavailable(
            f"Slack says {what} does not exist or the bot cannot see it ({error}): it was "
            "deleted or shared where the bot is not a member. Ask the requester to share it "
            "again in this thread",
            for_people=(
                f"I can't open {shown}: it was deleted, or shared where I'm not a member. "
                "Share it again in this thread."
            ),
        )
    if error in ("not_in_channel", "channel_not_found") and not what.startswith("file "):
        return WorkspaceError(
            f"the bot is not a member of this channel, so it cannot read {what} ({error}); "
            "ask the requester to invite it"
        )
    if error in ("not_in_channel", "channel_not_found"):
        return FileUnavailable(
            f"the bot is not a member of the channel, so it cannot read {what} ({error}); "
            "ask the requester to invite it or to share the file again in this thread",
            for_people=(
                f"I can't open {shown}: I'm not a member of the channel it is in. Invite me there, "
                "or share it again in this thread."
            ),
        )
    return WorkspaceError(f"Slack refused to give {what} ({error}); try again later")


def _too_large(name: str, size: int, cap: int) -> FileUnavailable:
    return FileUnavailable(
        too_large(name, size, cap),
        for_people=(
            f"I can't open {escape_text(name)}: it is {size / 1_048_576:.1f} MB, over my {cap / 1_048_576:.0f} MB "
            "limit. Share a smaller export (one sheet, or the pages that matter) in this thread."
        ),
    )


@dataclass
class PacedReading:
    """How a distributed app reads its thread: the messages its events brought (`log`), then
    `conversations.replies` one page of `page` messages per `pace_seconds` at most."""

    log: ThreadLog
    team: str | None
    page: int = limits.DISTRIBUTED_HISTORY_OBJECTS
    pace_seconds: float = limits.DISTRIBUTED_HISTORY_SECONDS
    clock: Callable[[], float] = time.monotonic
    # What paging found so far, and where it goes on.
    paged: dict[str, dict[str, Any]] = field(default_factory=dict)
    cursor: str | None = None
    done: bool = False
    next_page_at: float = float("-inf")


class SlackWorkspace:
    """One thread of one channel, read with the bot's client."""

    def __init__(
        self,
        client: AsyncWebClient,
        channel: str,
        thread_ts: str,
        *,
        bot_user_id: str | None = None,
        http: httpx.AsyncClient | None = None,
        files_origin: str | None = None,
        paced: PacedReading | None = None,
        cache_seconds: float = THREAD_CACHE_SECONDS,
    ) -> None:
        self._client = client
        self._paced = paced
        self._cache_seconds = cache_seconds
        self.channel = channel
        self.thread_ts = thread_ts
        # The bot's own user id; None until known (auth.test is asked when a file's uploader matters).
        self._bot_user_id = bot_user_id
        self._http = http
        self._files_origin = (files_origin or files_origin_for(client.base_url)).rstrip("/")
        self._replies: list[dict[str, Any]] = []
        self._read_at = float("-inf")
        self._infos: dict[str, FileInfo] = {}
        # Files Slack refused for good (gone, not shared with us, a scope we lack): asked once,
        # however many tools and turns ask again.
        self._refused: dict[str, FileUnavailable] = {}
        self._own_files: set[str] = set()  # files the bot uploaded itself: never the thread's

    # ------------------------------------------------------------ messages

    async def _thread(self) -> list[dict[str, Any]]:
        if time.monotonic() - self._read_at < self._cache_seconds:
            return self._replies
        if self._paced is not None:
            return await self._paced_thread(self._paced)
        messages: list[dict[str, Any]] = []
        cursor = None
        try:
            while len(messages) < MAX_THREAD_MESSAGES:
                response = await self._client.conversations_replies(
                    channel=self.channel, ts=self.thread_ts, limit=REPLIES_PAGE, cursor=cursor
                )
                messages += response.get("messages", [])
                cursor = (response.get("response_metadata") or {}).get("next_cursor")
                if not cursor:
                    break
        except SlackApiError as exc:
            raise _refusal(exc, "this thread's messages") from None
        self._replies, self._read_at = messages[:MAX_THREAD_MESSAGES], time.monotonic()
        return self._replies

    async def _paced_thread(self, paced: PacedReading) -> list[dict[str, Any]]:
        """The messages kept from events, and one more page of the thread when the pace allows one."""
        kept = await asyncio.to_thread(paced.log.messages, paced.team, self.channel, self.thread_ts)
        if not paced.done and paced.clock() >= paced.next_page_at:
            try:
                response = await self._client.conversations_replies(
                    channel=self.channel, ts=self.thread_ts, limit=paced.page, cursor=paced.cursor
                )
            except SlackApiError as exc:
                if exc.response.status_code != 429 and exc.response.get("error") != "ratelimited":
                    raise _refusal(exc, "this thread's messages") from None
                # Another run of this workspace took the minute: go on with what is known, ask again later.
                paced.next_page_at = paced.clock() + retry_after_seconds(exc.response.headers)
            else:
                page: list[dict[str, Any]] = response.get("messages") or []
                paced.paged.update({str(m["ts"]): m for m in page if m.get("ts")})
                paced.cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
                paced.done = paced.cursor is None
                paced.next_page_at = paced.clock() + paced.pace_seconds
        merged = {str(m["ts"]): m for m in kept} | paced.paged  # Slack's own copy wins (an edit)
        self._replies = sorted(merged.values(), key=lambda m: float(m["ts"]))[:MAX_THREAD_MESSAGES]
        self._read_at = time.monotonic()
        return self._replies

    def _is_own(self, raw: dict[str, Any]) -> bool:
        """A message no person wrote: any app's (a `bot_id`), or the bot's own user's. Any app, not only
        this one: another app's message is not what people wrote either (docs/security.md)."""
        return bool(raw.get("bot_id")) or (bool(self._bot_user_id) and raw.get("user") == self._bot_user_id)

    def _is_own_file(self, item: dict[str, Any]) -> bool:
        """A file the bot uploaded (its `user` is the bot's), wherever it is shared from."""
        return bool(self._bot_user_id) and item.get("user") == self._bot_user_id

    def _message(self, number: int, raw: dict[str, Any]) -> ThreadMessage:
        is_bot = self._is_own(raw)
        return ThreadMessage(
            number=number,
            ts=str(raw["ts"]),
            author=str(raw.get("user") or raw.get("bot_id") or ""),
            text=str(raw.get("text", "")),
            is_bot=is_bot,
            # The bot's own uploads are not the thread's files: not listed as something to open.
            files=[]
            if is_bot
            else [str(f["id"]) for f in raw.get("files", []) if f.get("id") and not self._is_own_file(f)],
        )

    async def messages(self, start: int, end: int) -> list[ThreadMessage]:
        thread = await self._thread()
        if any(raw.get("files") for raw in thread):
            await self._own_user()  # which files are the bot's own is known only by user id
        return [self._message(n, raw) for n, raw in enumerate(thread, start=1) if start <= n <= end]

    async def message_count(self) -> int:
        return len(await self._thread())

    # --------------------------------------------------------------- files

    async def _own_user(self) -> str:
        """The bot's user id: given, else asked of auth.test once ("" when Slack will not say)."""
        if self._bot_user_id is None:
            try:
                self._bot_user_id = str((await self._client.auth_test()).get("user_id") or "")
            except SlackApiError:
                self._bot_user_id = ""
        return self._bot_user_id

    async def files(self) -> list[FileInfo]:
        thread = await self._thread()
        if any(raw.get("files") for raw in thread):
            await self._own_user()  # a file's uploader is known only by user id
        shared: list[FileInfo] = []
        for raw in thread:
            own_message = self._is_own(raw)
            for item in raw.get("files", []):
                file_id = str(item.get("id", ""))
                if not file_id or item.get("mode") in UNAVAILABLE_MODES or any(f.id == file_id for f in shared):
                    continue
                if own_message or self._is_own_file(item):
                    self._own_files.add(file_id)
                    continue
                if file_id not in self._infos:
                    # Messages carry full file objects on Slack; when one is thin, ask files.info.
                    info = self._info_of(item, raw) if item.get("name") else await self._listed(file_id, item, raw)
                    if info.size > MAX_FILE_BYTES and not info.unavailable:  # said now, not only when read
                        info = info.model_copy(
                            update={"unavailable": _too_large(info.name, info.size, MAX_FILE_BYTES).for_people}
                        )
                    self._infos[file_id] = info
                if self._bot_user_id and self._infos[file_id].shared_by == self._bot_user_id:
                    self._own_files.add(file_id)  # a thin object whose files.info names the bot as uploader
                    continue
                shared.append(self._infos[file_id])
        return shared

    def _info_of(self, item: dict[str, Any], message: dict[str, Any]) -> FileInfo:
        return FileInfo(
            id=str(item["id"]),
            name=str(item.get("name") or item.get("title") or item["id"]),
            title=str(item.get("title", "")),
            mimetype=str(item.get("mimetype", "")),
            filetype=str(item.get("filetype", "")),
            size=int(item.get("size") or 0),
            shared_by=str(item.get("user") or message.get("user") or ""),
            shared_ts=str(message.get("ts", "")),
            permalink=str(item.get("permalink", "")),
            version=str(item.get("updated") or item.get("created") or item.get("timestamp") or ""),
        )

    async def _listed(self, file_id: str, item: dict[str, Any], message: dict[str, Any]) -> FileInfo:
        """A thin file object, described by files.info; one Slack refuses is still listed (so the
        model can name it and the thread be told), and reading it answers the refusal."""
        try:
            return self._info_of(await self._file_object(file_id), message)
        except FileUnavailable as exc:
            info = self._info_of({**item, "name": item.get("title") or file_id}, message)
            return info.model_copy(update={"unavailable": exc.for_people})

    async def _file_object(self, file_id: str) -> dict[str, Any]:
        refused = self._refused.get(file_id)
        if refused is not None:
            raise refused
        try:
            response = await self._client.files_info(file=file_id)
        except SlackApiError as exc:
            known = self._infos.get(file_id)
            refusal = _refusal(exc, f"file {file_id}", known.name if known else "")
            if isinstance(refusal, FileUnavailable):
                self._refused[file_id] = refusal  # for good: Slack is not asked again in this run
            raise refusal from None
        return dict(response.get("file") or {})

    async def download(self, file_id: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
        if file_id not in {f.id for f in await self.files()}:
            if file_id in self._own_files:
                raise FileUnavailable(
                    f"file {file_id} is one the bot uploaded itself (a spilled report or a chart: this "
                    "research's own output, not material people shared), so read_file does not open it; "
                    "use open_section or open_source for what the report already says"
                )
            raise FileUnavailable(
                f"file {file_id} was not shared in this thread; read_file opens only this thread's files"
            )
        try:
            return await self._download(file_id, max_bytes)
        except FileUnavailable as exc:
            if exc.for_people:  # a refusal only a person can fix: not asked again in this run
                self._refused[file_id] = exc
            raise

    async def _download(self, file_id: str, max_bytes: int) -> bytes:
        # Fresh (not the listing's object): access may have changed since the file was listed.
        raw = await self._file_object(file_id)
        info = self._info_of(raw, {})
        if info.size > max_bytes:
            raise _too_large(info.name, info.size, max_bytes)
        url = str(raw.get("url_private_download") or raw.get("url_private") or "")
        if not url.startswith(self._files_origin + "/"):
            # Never follow a download address that is not Slack's file host.
            raise FileUnavailable(
                f"Slack gave no downloadable address for {info.name} (it may be an external "
                "link or a Slack post); ask the requester to upload the file itself",
                for_people=(
                    f"I can't open {escape_text(info.name)}: it is a link to a file outside Slack, or a Slack "
                    "post. Upload the file itself to this thread."
                ),
            )
        return await self._fetch(url, info, max_bytes)

    async def _fetch(self, url: str, info: FileInfo, max_bytes: int) -> bytes:
        headers = {"Authorization": f"Bearer {self._client.token}"}
        own = self._http is None
        http = self._http or httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT_SECONDS)
        try:
            # httpx drops the Authorization header on a redirect to another host (Slack's CDN signs its URLs).
            async with http.stream(
                "GET", url, headers=headers, follow_redirects=True, timeout=DOWNLOAD_TIMEOUT_SECONDS
            ) as response:
                if response.status_code != 200:
                    raise FileUnavailable(
                        f"Slack answered HTTP {response.status_code} for {info.name}; try again "
                        "later or ask the requester to share it again"
                    )
                served = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if served == "text/html" and not info.name.lower().endswith((".html", ".htm")):
                    raise FileUnavailable(
                        f"Slack sent its sign-in page instead of {info.name}: the bot's token may not download "
                        "files. Ask a workspace admin to check that Deepthread has the files:read scope and "
                        "reinstall it",
                        for_people=(
                            f"I can't open {escape_text(info.name)}: Slack won't let my app download files. A "
                            "workspace admin can check that Deepthread has the files:read permission and reinstall it."
                        ),
                    )
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > max_bytes:
                        raise _too_large(info.name, len(body), max_bytes)
                return bytes(body)
        except httpx.HTTPError as exc:
            raise FileUnavailable(f"downloading {info.name} failed ({type(exc).__name__}); try again later") from None
        finally:
            if own:
                await http.aclose()
