"""A stateful fake of the Slack Web API and of Socket Mode, plus builders for signed Events API requests.

Point the real client at it: `AsyncWebClient(token="xoxb-…", base_url=server.url + "/api/")`.
It answers with Slack's response shapes and error codes, enforces Slack's message limits,
and can be told to rate-limit. State is read from the test thread while the server
thread writes it, so every access goes through one lock.

Socket Mode, as Slack runs it: the app calls `apps.connections.open` with its app-level
token (`xapp-…`, in the Authorization header) and gets a one-time WebSocket URL
(`ws://127.0.0.1:PORT/socket/<ticket>` here); once connected, the server sends `hello`,
then envelopes (`{"envelope_id", "type": "events_api", "payload": <the HTTP body>, …}`) that
the app acks with `{"envelope_id": …}`; `{"type": "disconnect"}` asks it to reconnect. The
test pushes envelopes with `send_socket_event`, reads `socket_acks`, and asks for a
reconnection with `disconnect_sockets`.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import hmac
import itertools
import json
import math
import secrets
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from . import scopes, slack_files

# Slack's limits (see PLATFORM-NOTES.md); the fake enforces them so the bot's splitting is tested.
MAX_TEXT_CHARS = 40_000
MAX_BLOCKS = 50
MAX_SECTION_TEXT_CHARS = 3_000
MAX_SECTION_FIELD_CHARS = 2_000
MAX_HEADER_TEXT_CHARS = 150
MAX_MARKDOWN_TOTAL_CHARS = 12_000
# Undocumented cumulative limit on all text in a message's blocks.
MAX_BLOCKS_TOTAL_CHARS = 13_000

# Methods that take the app-level token (xapp-…) rather than the bot token.
APP_LEVEL_METHODS = frozenset({"apps.connections.open"})
# After a `disconnect` message Slack keeps the old connection open a few seconds, then closes it.
SOCKET_DISCONNECT_GRACE_SECONDS = 10.0

TEAM_ID = "T0TEST"
TEAM_NAME = "Deepthread Test"
BOT_ID = "BBOT"
APP_ID = "A0TEST"
# First ts handed out; every message gets the next 100 µs step, so ts values sort like Slack's.
_TS_BASE_MICROS = 1_700_000_000_000_000
_TS_STEP_MICROS = 100
# One sequence for the fake's messages and the event builders, so a thread sorts parent first.
_ts_lock = threading.Lock()
_ts_counter = itertools.count(1)


def new_ts() -> str:
    """A fresh message ts, greater than every ts handed out before in this process."""
    with _ts_lock:
        micros = _TS_BASE_MICROS + next(_ts_counter) * _TS_STEP_MICROS
    return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"


class SlackError(Exception):
    """Raised inside a method handler: becomes `{"ok": false, "error": code}` (HTTP 200)."""

    def __init__(self, code: str, **extra: Any) -> None:
        super().__init__(code)
        self.code = code
        self.extra = extra


@dataclass
class SlackMessage:
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]] | None = None
    thread_ts: str | None = None
    user: str = ""
    bot_id: str | None = None
    edits: int = 0
    history: list[str] = field(default_factory=list)  # previous texts, oldest first
    files: list[str] = field(default_factory=list)  # file ids shared with the message
    reactions: dict[str, list[str]] = field(default_factory=dict)  # name -> users
    deleted: bool = False
    edited_ts: str | None = None


@dataclass
class Ephemeral:
    channel: str
    user: str
    text: str
    blocks: list[dict[str, Any]] | None
    thread_ts: str | None
    message_ts: str


@dataclass
class Pin:
    channel: str
    ts: str
    created_by: str
    created: int


@dataclass
class UploadedFile:
    id: str
    filename: str
    length: int
    content: bytes | None = None
    title: str | None = None
    channel_id: str | None = None
    thread_ts: str | None = None
    initial_comment: str | None = None
    completed: bool = False
    deleted: bool = False


@dataclass
class _Failure:
    times: int
    status: int
    error: str
    retry_after: int


@dataclass
class _SocketConnection:
    """One open Socket Mode WebSocket. `outbox` belongs to the server loop: other threads
    reach it only through `loop.call_soon_threadsafe`."""

    ticket: str
    loop: asyncio.AbstractEventLoop
    outbox: asyncio.Queue[str | None]  # None: close the socket
    draining: bool = False  # told to reconnect: gets no new envelopes


Handler = Callable[[dict[str, Any]], dict[str, Any]]


class FakeSlack:
    """A Slack workspace with one bot token. See the module docstring."""

    def __init__(self, bot_user_id: str = "UBOT", *, bot_id: str = BOT_ID, team_id: str = TEAM_ID) -> None:
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.team_id = team_id
        self._lock = threading.RLock()
        self._file_counter = itertools.count(1)
        self._calls: list[tuple[str, dict[str, Any]]] = []
        self._messages: dict[str, dict[str, SlackMessage]] = {}  # channel -> ts -> message
        self._ephemerals: list[Ephemeral] = []
        self._pins: dict[str, list[Pin]] = {}
        self._statuses: list[tuple[str, str, str]] = []
        self._files: dict[str, UploadedFile] = {}
        self._failures: dict[str, deque[_Failure]] = {}
        self._limits: dict[str, tuple[int, float]] = {}  # method -> (max calls, window seconds)
        self._windows: dict[str, deque[float]] = {}
        self._count_429: dict[str, int] = {}
        self._limited_until = 0.0  # monotonic: until then every method answers 429 (rate_limit_everything)
        self._limited_retry_after = 1
        self._origin = ""  # scheme://host of the current request, for upload URLs
        # Socket Mode
        self._tickets: set[str] = set()  # issued by apps.connections.open, not yet used
        self._sockets: dict[str, _SocketConnection] = {}  # ticket -> open connection
        self._socket_backlog: deque[dict[str, Any]] = deque()  # envelopes waiting for a connection
        self._socket_sent: list[dict[str, Any]] = []  # every frame sent, hello and disconnect included
        self._socket_received: list[dict[str, Any]] = []  # every JSON frame the app sent
        self._socket_connects = 0
        self._socket_turn = itertools.count()
        self._methods: dict[str, Handler] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.delete": self._chat_delete,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.getPermalink": self._chat_get_permalink,
            "pins.add": self._pins_add,
            "pins.remove": self._pins_remove,
            "pins.list": self._pins_list,
            "reactions.add": self._reactions_add,
            "reactions.remove": self._reactions_remove,
            "conversations.replies": self._conversations_replies,
            "conversations.history": self._conversations_history,
            "assistant.threads.setStatus": self._set_status,
            "files.getUploadURLExternal": self._files_get_upload_url,
            "files.completeUploadExternal": self._files_complete_upload,
            "files.delete": self._files_delete,
            "apps.connections.open": self._apps_connections_open,
            "users.info": self._users_info,
        }
        self.admins: set[str] = set()  # users.info reports these as workspace admins
        # The bot token's scopes: what installing the app from manifest.yml grants.
        self.scopes: set[str] = scopes.manifest_bot_scopes()
        self.scope_refusals: list[tuple[str, str]] = []  # (method, needed) answered missing_scope

    # ---------------------------------------------------------------- server

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[self._oauth_scopes_header])
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_post("/upload/{file_id}", self._handle_upload)
        app.router.add_get("/socket/{ticket}", self._handle_socket)
        slack_files.register(self, app)  # files shared in threads: files.info and the private download
        app.on_shutdown.append(self._close_sockets_on_shutdown)
        return app

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _read_params(request)
        header_token = _bearer(request.headers.get("Authorization", ""))
        token = header_token or params.pop("token", None)
        params.pop("token", None)
        with self._lock:
            self._calls.append((method, copy.deepcopy(params)))
        if method not in self._methods:
            return _ok_false("unknown_method", req_method=method)
        if method in APP_LEVEL_METHODS:
            refused = _refuse_app_level_call(request.method, header_token, token)
            if refused is not None:
                return refused
        elif not token:
            return _ok_false("not_authed")
        elif not str(token).startswith("xoxb-"):
            return _ok_false("invalid_auth")
        if method not in APP_LEVEL_METHODS:
            refused = self._refuse_missing_scope(method, params)
            if refused is not None:
                return refused
        limited = self._take_failure_or_limit(method)
        if limited is not None:
            return limited
        try:
            with self._lock:
                self._origin = f"{request.scheme}://{request.host}"
                body = self._methods[method](params)
        except SlackError as e:
            return _ok_false(e.code, **e.extra)
        return web.json_response({"ok": True, **body})

    def _refuse_missing_scope(self, method: str, params: dict[str, Any]) -> web.Response | None:
        """Slack answers a call whose token lacks the method's scope with missing_scope."""
        needed = scopes.needed(method, params)
        with self._lock:
            granted = set(self.scopes)
            if not needed or granted & set(needed):
                return None
            self.scope_refusals.append((method, ",".join(needed)))
        return _ok_false("missing_scope", needed=",".join(needed), provided=",".join(sorted(granted)))

    @web.middleware
    async def _oauth_scopes_header(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Every Web API answer reports the token's scopes, as Slack does."""
        response = await handler(request)
        if request.path.startswith("/api/"):
            with self._lock:
                response.headers["x-oauth-scopes"] = ",".join(sorted(self.scopes))
        return response

    async def _handle_upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        data = await request.read()
        with self._lock:
            f = self._files.get(file_id)
            if f is None:
                return web.Response(status=404, text="file not found")
            f.content = data
        # The real upload endpoint answers plain text, which slack_sdk expects.
        return web.Response(text=f"OK - {len(data)}", content_type="text/plain")

    def _take_failure_or_limit(self, method: str) -> web.Response | None:
        with self._lock:
            if time.monotonic() < self._limited_until:
                return self._failure_response(method, 429, "ratelimited", self._limited_retry_after)
            queue = self._failures.get(method)
            if queue:
                failure = queue[0]
                failure.times -= 1
                if failure.times <= 0:
                    queue.popleft()
                return self._failure_response(method, failure.status, failure.error, failure.retry_after)
            if method in self._limits:
                cap, window = self._limits[method]
                now = time.monotonic()
                stamps = self._windows.setdefault(method, deque())
                while stamps and stamps[0] <= now - window:
                    stamps.popleft()
                if len(stamps) >= cap:
                    wait = max(1, math.ceil(stamps[0] + window - now))
                    return self._failure_response(method, 429, "ratelimited", wait)
                stamps.append(now)
        return None

    def _failure_response(self, method: str, status: int, error: str, retry_after: int) -> web.Response:
        headers = {}
        if status == 429:
            self._count_429[method] = self._count_429.get(method, 0) + 1
            headers["Retry-After"] = str(retry_after)
        return web.json_response({"ok": False, "error": error}, status=status, headers=headers)

    async def _handle_socket(self, request: web.Request) -> web.StreamResponse:
        """The Socket Mode WebSocket: hello, then envelopes; reads acks until either side closes."""
        ticket = request.match_info["ticket"]
        with self._lock:
            if ticket not in self._tickets:  # unknown, or already used: URLs are one-time
                return web.Response(status=401, text="invalid or expired ticket")
            self._tickets.discard(ticket)
        ws = web.WebSocketResponse()  # answers the client's pings, as Slack does
        await ws.prepare(request)
        conn = _SocketConnection(ticket=ticket, loop=asyncio.get_running_loop(), outbox=asyncio.Queue())
        with self._lock:
            self._sockets[ticket] = conn
            self._socket_connects += 1
            hello = {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {"host": f"applink-fake-{self._socket_connects}", "build_number": 1,
                               "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP_ID},
            }
            # In the server loop, under the lock: hello is first, then whatever waited for a connection.
            self._put(conn, hello)
            while self._socket_backlog:
                self._put(conn, self._socket_backlog.popleft())
        writer = asyncio.create_task(self._socket_writer(ws, conn))
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    self._socket_frame_in(msg.data)
                elif msg.type == WSMsgType.ERROR:
                    break
        finally:
            with self._lock:
                self._sockets.pop(ticket, None)
            writer.cancel()
            await asyncio.gather(writer, return_exceptions=True)
            await asyncio.sleep(0)  # let frames handed over by other threads before the pop land
            self._requeue_unsent(conn)
        return ws

    def _requeue_unsent(self, conn: _SocketConnection) -> None:
        """Envelopes that never left a closed connection go to the next one, as Slack redelivers."""
        with self._lock:
            while not conn.outbox.empty():
                raw = conn.outbox.get_nowait()
                frame = json.loads(raw) if raw else None
                if isinstance(frame, dict) and "envelope_id" in frame:
                    live = [c for c in self._sockets.values() if not c.draining]
                    if live:
                        self._put_threadsafe(live[next(self._socket_turn) % len(live)], frame)
                    else:
                        self._socket_backlog.append(frame)

    async def _socket_writer(self, ws: web.WebSocketResponse, conn: _SocketConnection) -> None:
        while True:
            frame = await conn.outbox.get()
            if frame is None:
                await ws.close(code=WSCloseCode.GOING_AWAY)
                return
            try:
                await ws.send_str(frame)
            except (ConnectionError, RuntimeError):
                return  # the client went away; the reader ends the connection

    def _put(self, conn: _SocketConnection, frame: dict[str, Any]) -> None:
        """Queue a frame on a connection; from the server loop only (others: call_soon_threadsafe)."""
        self._socket_sent.append(frame)
        conn.outbox.put_nowait(json.dumps(frame))

    def _put_threadsafe(self, conn: _SocketConnection, frame: dict[str, Any]) -> None:
        self._socket_sent.append(frame)
        try:
            conn.loop.call_soon_threadsafe(conn.outbox.put_nowait, json.dumps(frame))
        except RuntimeError:
            pass  # the server loop is gone: the server is stopping

    def _socket_frame_in(self, data: str) -> None:
        try:
            frame = json.loads(data)
        except json.JSONDecodeError:
            return  # Slack ignores what it cannot read
        if isinstance(frame, dict):
            with self._lock:
                self._socket_received.append(frame)

    async def _close_sockets_on_shutdown(self, _: web.Application) -> None:
        with self._lock:
            conns = list(self._sockets.values())
        for conn in conns:
            conn.outbox.put_nowait(None)

    # ------------------------------------------------------- test controls

    def fail_next(
        self,
        method: str,
        times: int = 1,
        *,
        retry_after: int = 1,
        error: str | None = None,
        status: int | None = None,
    ) -> None:
        """Make the next `times` calls of `method` fail.

        Default: HTTP 429 `ratelimited` with `Retry-After: retry_after`. With `error=` and no
        status: HTTP 200 `{"ok": false, "error": error}`, as Slack reports most errors.
        """
        if status is None:
            status = 200 if error is not None else 429
        if error is None:
            error = "ratelimited" if status == 429 else "internal_error"
        with self._lock:
            self._failures.setdefault(method, deque()).append(_Failure(times, status, error, int(retry_after)))

    def rate_limit_everything(self, seconds: float, *, retry_after: int = 1) -> None:
        """For the next `seconds`, every Web API method answers HTTP 429 `ratelimited` with
        `Retry-After: retry_after`, as Slack does when an app is limited hard; then it recovers."""
        with self._lock:
            self._limited_until = time.monotonic() + seconds
            self._limited_retry_after = int(retry_after)

    def set_rate_limit(self, method: str, per_minute: int | None, *, window: float = 60.0) -> None:
        """Cap `method` at `per_minute` calls per sliding `window` seconds (None removes the cap)."""
        with self._lock:
            if per_minute is None:
                self._limits.pop(method, None)
            else:
                self._limits[method] = (per_minute, window)
            self._windows.pop(method, None)

    def add_user_message(self, channel: str, text: str, user: str, thread_ts: str | None = None) -> str:
        """Seed a message written by a person (the bot cannot edit it); returns its ts."""
        with self._lock:
            ts = self._next_ts()
            self._store(SlackMessage(channel=channel, ts=ts, text=text, thread_ts=thread_ts, user=user))
            return ts

    def seed_event(self, envelope: dict[str, Any]) -> str:
        """Store the message an app_mention/message event carries, as Slack would hold it; returns its ts."""
        ev = envelope.get("event", envelope)
        with self._lock:
            msg = SlackMessage(channel=ev["channel"], ts=ev["ts"], text=ev.get("text", ""),
                               thread_ts=ev.get("thread_ts"), user=ev.get("user", ""), bot_id=ev.get("bot_id"))
            self._store(msg)
            return msg.ts

    def send_socket_event(
        self,
        envelope: dict[str, Any],
        *,
        retry_attempt: int = 0,
        retry_reason: str = "",
        envelope_id: str | None = None,
    ) -> str:
        """Deliver an Events API body (an `event_callback`, as `app_mention_event` builds) over Socket
        Mode, wrapped as Slack wraps it; returns the envelope_id the app must ack.

        Like Slack, one connection gets it (round robin over the connections not told to
        reconnect); with none open it waits and goes to the next connection that opens.
        A redelivery is the same body with `retry_attempt=1, retry_reason="timeout"`.
        """
        frame = {
            "envelope_id": envelope_id or str(uuid.uuid4()),
            "payload": copy.deepcopy(envelope),
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": retry_attempt,
            "retry_reason": retry_reason,
        }
        self.send_socket_frame(frame)
        return frame["envelope_id"]

    def send_socket_frame(self, frame: dict[str, Any]) -> None:
        """Deliver any frame (an interactive or slash_commands envelope…) the way send_socket_event does."""
        with self._lock:
            live = [c for c in self._sockets.values() if not c.draining]
            if not live:
                self._socket_backlog.append(frame)
                return
            self._put_threadsafe(live[next(self._socket_turn) % len(live)], frame)

    def disconnect_sockets(self, reason: str = "refresh_requested", *,
                           close_after: float | None = SOCKET_DISCONNECT_GRACE_SECONDS) -> int:
        """Send `{"type": "disconnect", "reason": reason}` on every open connection, as Slack does
        before it retires one; new envelopes then wait for a fresh connection. Each old
        connection is closed `close_after` seconds later (None: left for the app to close).
        Returns how many connections were told."""
        with self._lock:
            conns = [c for c in self._sockets.values() if not c.draining]
            for conn in conns:
                conn.draining = True
                self._put_threadsafe(conn, {"type": "disconnect", "reason": reason,
                                            "debug_info": {"host": "applink-fake"}})
                if close_after is not None:
                    delay = max(0.0, close_after)
                    try:
                        conn.loop.call_soon_threadsafe(conn.loop.call_later, delay, conn.outbox.put_nowait, None)
                    except RuntimeError:
                        pass
            return len(conns)

    @property
    def socket_connections(self) -> int:
        """Socket Mode connections open now (those told to reconnect included, until they close)."""
        with self._lock:
            return len(self._sockets)

    @property
    def socket_connects(self) -> int:
        """Socket Mode connections ever accepted (a reconnection adds one)."""
        with self._lock:
            return self._socket_connects

    @property
    def socket_acks(self) -> list[str]:
        """envelope_ids the app acknowledged, in order (repeats kept)."""
        with self._lock:
            return [str(f["envelope_id"]) for f in self._socket_received if "envelope_id" in f]

    @property
    def socket_received(self) -> list[dict[str, Any]]:
        """Every JSON frame the app sent over Socket Mode (acks, with any response payload)."""
        with self._lock:
            return copy.deepcopy(self._socket_received)

    @property
    def socket_sent(self) -> list[dict[str, Any]]:
        """Every frame queued for the app: hello, envelopes, disconnect; in order."""
        with self._lock:
            return copy.deepcopy(self._socket_sent)

    @property
    def socket_backlog(self) -> int:
        """Envelopes waiting for a connection."""
        with self._lock:
            return len(self._socket_backlog)

    # -------------------------------------------------------- introspection

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        """Every request to /api/*, in order, including refused and rate-limited ones."""
        with self._lock:
            return list(self._calls)

    def calls_of(self, method: str) -> list[dict[str, Any]]:
        with self._lock:
            return [p for m, p in self._calls if m == method]

    def messages(self, channel: str) -> list[SlackMessage]:
        """All live messages of a channel (threads included), oldest first."""
        with self._lock:
            msgs = self._messages.get(channel, {})
            return [m for m in sorted(msgs.values(), key=lambda m: _ts_key(m.ts)) if not m.deleted]

    def message(self, channel: str, ts: str) -> SlackMessage | None:
        with self._lock:
            m = self._messages.get(channel, {}).get(ts)
            return None if m is None or m.deleted else m

    def thread(self, channel: str, thread_ts: str) -> list[SlackMessage]:
        """The parent (when known) then its replies, oldest first."""
        with self._lock:
            msgs = self.messages(channel)
            parent = [m for m in msgs if m.ts == thread_ts]
            return parent + [m for m in msgs if m.thread_ts == thread_ts and m.ts != thread_ts]

    def pins(self, channel: str) -> list[SlackMessage]:
        with self._lock:
            out = []
            for pin in self._pins.get(channel, []):
                m = self.message(channel, pin.ts)
                if m is not None:
                    out.append(m)
            return out

    def ephemerals(self, channel: str | None = None) -> list[Ephemeral]:
        with self._lock:
            return [e for e in self._ephemerals if channel is None or e.channel == channel]

    @property
    def statuses(self) -> list[tuple[str, str, str]]:
        """(channel_id, thread_ts, status) for every assistant.threads.setStatus call."""
        with self._lock:
            return list(self._statuses)

    def status_of(self, channel: str, thread_ts: str) -> str | None:
        with self._lock:
            for c, t, s in reversed(self._statuses):
                if c == channel and t == thread_ts:
                    return s
            return None

    def files(self) -> list[UploadedFile]:
        with self._lock:
            return [f for f in self._files.values() if not f.deleted]

    @property
    def count_429(self) -> dict[str, int]:
        """Per method: how many 429 answers were served."""
        with self._lock:
            return dict(self._count_429)

    # ----------------------------------------------------------- internals

    def _next_ts(self) -> str:
        return new_ts()

    def _store(self, msg: SlackMessage) -> None:
        self._messages.setdefault(msg.channel, {})[msg.ts] = msg

    def _find(self, channel: str, ts: str) -> SlackMessage:
        m = self._messages.get(channel, {}).get(ts)
        if m is None or m.deleted:
            raise SlackError("message_not_found")
        return m

    def _render(self, m: SlackMessage) -> dict[str, Any]:
        """A message as Slack returns it in API responses."""
        out: dict[str, Any] = {"type": "message", "ts": m.ts, "user": m.user, "text": m.text, "team": self.team_id}
        if m.bot_id:
            out.update(bot_id=m.bot_id, app_id=APP_ID)
        if m.blocks is not None:
            out["blocks"] = copy.deepcopy(m.blocks)
        if m.thread_ts:
            out["thread_ts"] = m.thread_ts
            if m.thread_ts != m.ts:
                parent = self._messages.get(m.channel, {}).get(m.thread_ts)
                if parent is not None:
                    out["parent_user_id"] = parent.user
        replies = [r for r in self._messages.get(m.channel, {}).values()
                   if r.thread_ts == m.ts and r.ts != m.ts and not r.deleted]
        if replies:
            replies.sort(key=lambda r: _ts_key(r.ts))
            users = list(dict.fromkeys(r.user for r in replies))
            out.update(thread_ts=m.ts, reply_count=len(replies), reply_users_count=len(users),
                       latest_reply=replies[-1].ts, reply_users=users)
        if m.edited_ts:
            out["edited"] = {"user": m.user, "ts": m.edited_ts}
        if m.files:
            out["files"] = [slack_files.message_file(self, fid) for fid in m.files]  # full objects, as Slack
        if m.reactions:
            out["reactions"] = [{"name": n, "users": list(u), "count": len(u)} for n, u in m.reactions.items()]
        if any(p.ts == m.ts for p in self._pins.get(m.channel, [])):
            out["pinned_to"] = [m.channel]
        return out

    # -------------------------------------------------------------- methods

    def _users_info(self, p: dict[str, Any]) -> dict[str, Any]:
        user = _str(p.get("user"))
        if not user:
            raise SlackError("user_not_found")
        admin = user in self.admins
        return {"user": {"id": user, "team_id": self.team_id, "name": user.lower(), "deleted": False,
                         "is_admin": admin, "is_owner": False, "is_bot": user == self.bot_user_id}}

    def _auth_test(self, p: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://deepthread-test.slack.com/",
            "team": TEAM_NAME,
            "user": "deepthread",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _chat_post_message(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = _str(p.get("channel"))
        if not channel:
            raise SlackError("channel_not_found")
        text, blocks = _text_and_blocks(p)
        if not text and not blocks and not p.get("attachments"):
            raise SlackError("no_text")
        thread_ts = _str(p.get("thread_ts")) or None
        if thread_ts is not None:
            # The parent need not be seeded (events arrive without it); a reply's ts means its thread.
            parent = self._messages.get(channel, {}).get(thread_ts)
            if parent is not None and parent.thread_ts and parent.thread_ts != parent.ts:
                thread_ts = parent.thread_ts
        msg = SlackMessage(channel=channel, ts=self._next_ts(), text=text, blocks=blocks,
                           thread_ts=thread_ts, user=self.bot_user_id, bot_id=self.bot_id)
        self._store(msg)
        return {"channel": channel, "ts": msg.ts, "message": self._render(msg)}

    def _chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = _str(p.get("channel")), _str(p.get("ts"))
        if not channel:
            raise SlackError("channel_not_found")
        msg = self._find(channel, ts)
        if msg.user != self.bot_user_id:
            raise SlackError("cant_update_message")
        has_text, has_blocks = "text" in p, "blocks" in p
        if not has_text and not has_blocks and not p.get("attachments"):
            raise SlackError("no_text")
        text, blocks = _text_and_blocks(p)
        msg.history.append(msg.text)
        msg.edits += 1
        msg.edited_ts = self._next_ts()
        if has_text:
            msg.text = text
        if has_blocks:
            # An empty list removes the blocks; omitting the field keeps them (Slack's rule).
            msg.blocks = blocks or None
        return {"channel": channel, "ts": ts, "text": msg.text, "message": self._render(msg)}

    def _chat_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = _str(p.get("channel")), _str(p.get("ts"))
        msg = self._find(channel, ts)
        if msg.user != self.bot_user_id:
            raise SlackError("cant_delete_message")
        msg.deleted = True
        return {"channel": channel, "ts": ts}

    def _chat_post_ephemeral(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, user = _str(p.get("channel")), _str(p.get("user"))
        if not channel:
            raise SlackError("channel_not_found")
        if not user:
            raise SlackError("user_not_found")
        text, blocks = _text_and_blocks(p)
        if not text and not blocks and not p.get("attachments"):
            raise SlackError("no_text")
        ts = self._next_ts()
        self._ephemerals.append(Ephemeral(channel, user, text, blocks, _str(p.get("thread_ts")) or None, ts))
        return {"message_ts": ts}

    def _chat_get_permalink(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = _str(p.get("channel")), _str(p.get("message_ts"))
        self._find(channel, ts)
        link = f"https://deepthread-test.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        return {"channel": channel, "permalink": link}

    def _pins_add(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = _str(p.get("channel")), _str(p.get("timestamp"))
        if not channel:
            raise SlackError("channel_not_found")
        if not ts:
            raise SlackError("no_item_specified")
        self._find(channel, ts)
        pins = self._pins.setdefault(channel, [])
        if any(pin.ts == ts for pin in pins):
            raise SlackError("already_pinned")
        pins.append(Pin(channel, ts, self.bot_user_id, int(time.time())))
        return {}

    def _pins_remove(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = _str(p.get("channel")), _str(p.get("timestamp"))
        pins = self._pins.get(channel, [])
        for pin in pins:
            if pin.ts == ts:
                pins.remove(pin)
                return {}
        raise SlackError("no_pin")

    def _pins_list(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = _str(p.get("channel"))
        if not channel:
            raise SlackError("channel_not_found")
        items = []
        for pin in self._pins.get(channel, []):
            m = self._messages.get(channel, {}).get(pin.ts)
            if m is None or m.deleted:
                continue
            items.append({"type": "message", "created": pin.created, "created_by": pin.created_by,
                          "channel": channel, "message": self._render(m)})
        return {"items": items}

    def _reactions_add(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts, name = _str(p.get("channel")), _str(p.get("timestamp")), _str(p.get("name"))
        if not name:
            raise SlackError("invalid_name")
        msg = self._find(channel, ts)
        users = msg.reactions.setdefault(name, [])
        if self.bot_user_id in users:
            raise SlackError("already_reacted")
        users.append(self.bot_user_id)
        return {}

    def _reactions_remove(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts, name = _str(p.get("channel")), _str(p.get("timestamp")), _str(p.get("name"))
        msg = self._find(channel, ts)
        users = msg.reactions.get(name, [])
        if self.bot_user_id not in users:
            raise SlackError("no_reaction")
        users.remove(self.bot_user_id)
        if not users:
            del msg.reactions[name]
        return {}

    def _conversations_replies(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = _str(p.get("channel")), _str(p.get("ts"))
        if not channel:
            raise SlackError("channel_not_found")
        root = self._messages.get(channel, {}).get(ts)
        if root is not None and root.thread_ts and root.thread_ts != root.ts:
            ts = root.thread_ts  # a reply's ts names its whole thread
        msgs = [self._render(m) for m in self.thread(channel, ts)]
        if not msgs:
            raise SlackError("thread_not_found")
        return _paginate(msgs, p, "messages")

    def _conversations_history(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = _str(p.get("channel"))
        if not channel:
            raise SlackError("channel_not_found")
        # Top-level messages only, newest first, like Slack.
        top = [m for m in self.messages(channel) if not m.thread_ts or m.thread_ts == m.ts]
        return _paginate([self._render(m) for m in reversed(top)], p, "messages")

    def _set_status(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, thread_ts = _str(p.get("channel_id")), _str(p.get("thread_ts"))
        if not channel or not thread_ts or "status" not in p:
            raise SlackError("invalid_arguments")
        self._statuses.append((channel, thread_ts, _str(p.get("status"))))
        return {}

    def _files_get_upload_url(self, p: dict[str, Any]) -> dict[str, Any]:
        filename = _str(p.get("filename"))
        try:
            length = int(p.get("length", ""))
        except ValueError:
            raise SlackError("invalid_arguments") from None
        if not filename or length < 0:
            raise SlackError("invalid_arguments")
        file_id = f"F{next(self._file_counter):08d}"
        self._files[file_id] = UploadedFile(id=file_id, filename=filename, length=length)
        return {"upload_url": f"{self._origin}/upload/{file_id}", "file_id": file_id}

    def _files_complete_upload(self, p: dict[str, Any]) -> dict[str, Any]:
        raw = p.get("files")
        try:
            entries = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            raise SlackError("invalid_arguments") from None
        if not isinstance(entries, list) or not entries:
            raise SlackError("invalid_arguments")
        channel = _str(p.get("channel_id")) or None
        thread_ts = _str(p.get("thread_ts")) or None
        comment = _str(p.get("initial_comment")) or None
        done = []
        for entry in entries:
            f = self._files.get(str(entry.get("id", "")))
            if f is None or f.deleted or f.content is None:
                raise SlackError("file_not_found")
            f.title = entry.get("title") or f.filename
            f.channel_id, f.thread_ts, f.initial_comment, f.completed = channel, thread_ts, comment, True
            done.append(f)
        if channel is not None:
            # Sharing a file posts a message carrying it, like Slack does.
            msg = SlackMessage(channel=channel, ts=self._next_ts(), text=comment or "", thread_ts=thread_ts,
                               user=self.bot_user_id, bot_id=self.bot_id, files=[f.id for f in done])
            self._store(msg)
        return {"files": [{"id": f.id, "title": f.title, "name": f.filename, "size": len(f.content or b"")}
                          for f in done]}

    def _files_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        f = self._files.get(_str(p.get("file")))
        if f is None or f.deleted:
            raise SlackError("file_not_found")
        f.deleted = True
        return {}

    def _apps_connections_open(self, p: dict[str, Any]) -> dict[str, Any]:
        ticket = secrets.token_hex(16)
        self._tickets.add(ticket)
        ws_origin = "ws" + self._origin[len("http"):]  # http://… -> ws://…, https://… -> wss://…
        return {"url": f"{ws_origin}/socket/{ticket}"}


# ------------------------------------------------------------------ helpers


async def _read_params(request: web.Request) -> dict[str, Any]:
    """Merge query string, form body and JSON body, as Slack does."""
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if isinstance(body, dict):
            params.update(body)
    elif request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.post()
        for k, v in form.items():
            params[k] = v if isinstance(v, str) else v.file.read()  # a multipart file part
    return params


def _refuse_app_level_call(http_method: str, header_token: str | None, token: Any) -> web.Response | None:
    """apps.connections.open: POST, with an app-level token in the Authorization header."""
    if http_method != "POST":
        return _ok_false("insecure_request")
    if not token:
        return _ok_false("not_authed")
    if not header_token:
        # Slack's docs: passing the token as a POST parameter "will result in an error" (no code given).
        return _ok_false("not_authed")
    if header_token.startswith("xapp-"):
        return None
    if header_token.startswith("xox"):
        return _ok_false("not_allowed_token_type")  # a bot/user token where an app-level one is needed
    return _ok_false("invalid_auth")


def _bearer(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


def _ok_false(error: str, **extra: Any) -> web.Response:
    return web.json_response({"ok": False, "error": error, **extra})


def _str(v: Any) -> str:
    return "" if v is None else str(v)


def _ts_key(ts: str) -> tuple[int, int]:
    sec, _, frac = ts.partition(".")
    return int(sec), int(frac or 0)


def _paginate(items: list[dict[str, Any]], p: dict[str, Any], key: str) -> dict[str, Any]:
    """Cursor pagination: the cursor is just the offset of the next page."""
    try:
        limit = max(1, min(1000, int(p.get("limit") or 1000)))
        start = int(p.get("cursor") or 0)
    except ValueError:
        raise SlackError("invalid_cursor") from None
    page = items[start:start + limit]
    more = start + limit < len(items)
    return {key: page, "has_more": more, "response_metadata": {"next_cursor": str(start + limit) if more else ""}}


def _text_and_blocks(p: dict[str, Any]) -> tuple[str, list[dict[str, Any]] | None]:
    """Read and check text and blocks against Slack's limits."""
    text = _str(p.get("text"))
    if len(text) > MAX_TEXT_CHARS:
        raise SlackError("msg_too_long")
    raw = p.get("blocks")
    if raw is None or raw == "":
        return text, None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise SlackError("invalid_blocks_format") from None
    if not isinstance(raw, list) or not all(isinstance(b, dict) and b.get("type") for b in raw):
        raise SlackError("invalid_blocks_format")
    _check_blocks(raw)
    return text, raw


def _invalid(why: str) -> SlackError:
    return SlackError("invalid_blocks", response_metadata={"messages": [f"[ERROR] {why}"]})


def _check_blocks(blocks: list[dict[str, Any]]) -> None:
    if len(blocks) > MAX_BLOCKS:
        raise _invalid(f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]")
    markdown_total = 0
    for i, b in enumerate(blocks):
        kind = b["type"]
        if kind == "section":
            t = b.get("text")
            if isinstance(t, dict) and len(_str(t.get("text"))) > MAX_SECTION_TEXT_CHARS:
                raise _invalid(f"must be less than {MAX_SECTION_TEXT_CHARS + 1} characters "
                               f"[json-pointer:/blocks/{i}/text/text]")
            for j, f in enumerate(b.get("fields") or []):
                if isinstance(f, dict) and len(_str(f.get("text"))) > MAX_SECTION_FIELD_CHARS:
                    raise _invalid(f"must be less than {MAX_SECTION_FIELD_CHARS + 1} characters "
                                   f"[json-pointer:/blocks/{i}/fields/{j}/text]")
            if t is None and not b.get("fields"):
                raise _invalid(f"must provide either text or fields [json-pointer:/blocks/{i}]")
        elif kind == "header":
            t = b.get("text")
            if isinstance(t, dict) and len(_str(t.get("text"))) > MAX_HEADER_TEXT_CHARS:
                raise _invalid(f"must be less than {MAX_HEADER_TEXT_CHARS + 1} characters "
                               f"[json-pointer:/blocks/{i}/text/text]")
        elif kind == "markdown":
            markdown_total += len(_str(b.get("text")))
    if markdown_total > MAX_MARKDOWN_TOTAL_CHARS:
        raise _invalid(f"markdown blocks exceed {MAX_MARKDOWN_TOTAL_CHARS} characters in total")
    if sum(len(s) for s in _texts(blocks)) > MAX_BLOCKS_TOTAL_CHARS:
        raise SlackError("msg_blocks_too_long")


def _texts(node: Any) -> list[str]:
    """Every string under a "text" key, at any depth (section, markdown, context, rich_text…)."""
    out: list[str] = []
    if isinstance(node, list):
        for item in node:
            out.extend(_texts(item))
    elif isinstance(node, dict):
        for k, v in node.items():
            if k == "text" and isinstance(v, str):
                out.append(v)
            else:
                out.extend(_texts(v))
    return out


# ------------------------------------------------- requests *to* a Bolt app

_event_counter = itertools.count(1)


def sign(secret: str, body: bytes | str, timestamp: int | None = None) -> dict[str, str]:
    """Headers Slack sends with an Events API request: `v0=` HMAC-SHA256 of `v0:{ts}:{body}`."""
    raw = body.encode() if isinstance(body, str) else body
    ts = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"v0:{ts}:".encode() + raw, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": str(ts),
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/json",
    }


def _event_id() -> str:
    return f"Ev{next(_event_counter):04d}{secrets.token_hex(4).upper()}"


def _envelope(event: dict[str, Any], *, event_id: str | None, team_id: str, bot_user_id: str) -> dict[str, Any]:
    return {
        "token": "verification-token",
        "team_id": team_id,
        "context_team_id": team_id,
        "context_enterprise_id": None,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": event_id or _event_id(),
        "event_time": int(time.time()),
        "authorizations": [
            {"enterprise_id": None, "team_id": team_id, "user_id": bot_user_id, "is_bot": True,
             "is_enterprise_install": False}
        ],
        "is_ext_shared_channel": False,
        "event_context": f"4-{secrets.token_hex(16)}",
    }


def app_mention_event(
    text: str,
    *,
    channel: str = "C0TEST",
    user: str = "U0ANA",
    ts: str | None = None,
    thread_ts: str | None = None,
    event_id: str | None = None,
    bot_user_id: str = "UBOT",
    team_id: str = TEAM_ID,
) -> dict[str, Any]:
    """An `event_callback` envelope for an app_mention; text gets a leading `<@bot>` unless it has one."""
    ts = ts or new_ts()
    mention = f"<@{bot_user_id}>"
    full = text if mention in text else f"{mention} {text}"
    event: dict[str, Any] = {
        "type": "app_mention",
        "user": user,
        "text": full,
        "ts": ts,
        "team": team_id,
        "channel": channel,
        "event_ts": ts,
        "client_msg_id": secrets.token_hex(16),
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return _envelope(event, event_id=event_id, team_id=team_id, bot_user_id=bot_user_id)


def message_event(
    text: str,
    *,
    channel: str = "C0TEST",
    user: str | None = "U0ANA",
    ts: str | None = None,
    thread_ts: str | None = None,
    subtype: str | None = None,
    bot_id: str | None = None,
    channel_type: str = "channel",
    event_id: str | None = None,
    bot_user_id: str = "UBOT",
    team_id: str = TEAM_ID,
) -> dict[str, Any]:
    """An `event_callback` envelope for a `message` event (a reply, a bot's message, a subtype…)."""
    ts = ts or new_ts()
    event: dict[str, Any] = {
        "type": "message",
        "text": text,
        "ts": ts,
        "team": team_id,
        "channel": channel,
        "event_ts": ts,
        "channel_type": channel_type,
    }
    if user is not None:
        event["user"] = user
    if subtype:
        event["subtype"] = subtype
    if bot_id:
        event["bot_id"] = bot_id
    elif user is not None and not subtype:
        event["client_msg_id"] = secrets.token_hex(16)
    if thread_ts:
        event["thread_ts"] = thread_ts
    return _envelope(event, event_id=event_id, team_id=team_id, bot_user_id=bot_user_id)


def reaction_added_event(
    reaction: str,
    *,
    user: str = "U0ANA",
    item_channel: str = "C0TEST",
    item_ts: str,
    item_user: str = "UBOT",
    event_id: str | None = None,
    bot_user_id: str = "UBOT",
    team_id: str = TEAM_ID,
) -> dict[str, Any]:
    """An `event_callback` envelope for reaction_added on a message."""
    event = {
        "type": "reaction_added",
        "user": user,
        "reaction": reaction,
        "item_user": item_user,
        "item": {"type": "message", "channel": item_channel, "ts": item_ts},
        "event_ts": new_ts(),
    }
    return _envelope(event, event_id=event_id, team_id=team_id, bot_user_id=bot_user_id)
