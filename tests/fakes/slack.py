"""A stateful fake of the Slack Web API and of Socket Mode, plus builders for signed Events API requests.

Point the real client at it: `AsyncWebClient(token="xoxb-…", base_url=server.url + "/api/")`.
It answers with Slack's response shapes and error codes, enforces Slack's message limits,
and can be told to rate-limit. State is read from the test thread while the server
thread writes it, so every access goes through one lock.

Where things are: the server, failure injection and what tests read live here; the Web API
methods in slack_web.py; Socket Mode in slack_socket.py; records and limits in
slack_records.py; event builders in slack_events.py (re-exported here); more workspaces than
one and the OAuth install flow in slack_oauth.py.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.fakes import (
    scopes,
    slack_canvases,
    slack_events,
    slack_files,
    slack_search,
    slack_sessions,
    slack_streaming,
    slack_views,
)
from tests.fakes.slack_events import (
    app_mention_event,
    app_uninstalled_event,
    message_event,
    reaction_added_event,
    sign,
    tokens_revoked_event,
)
from tests.fakes.slack_oauth import FakeWorkspace, Workspaces, basic_credentials
from tests.fakes.slack_records import (
    APP_ID,
    BOT_ID,
    MAX_TEXT_CHARS,
    TEAM_ID,
    TEAM_NAME,
    TIERS,
    Ephemeral,
    Pin,
    SlackError,
    SlackMessage,
    UploadedFile,
    _ok_false,
    _ts_key,
    new_ts,
)
from tests.fakes.slack_socket import (
    SOCKET_DISCONNECT_GRACE_SECONDS,
    SocketMode,
    _refuse_app_level_call,
    _SocketConnection,
)
from tests.fakes.slack_web import WebApiMethods

__all__ = [
    "APP_ID",
    "BOT_ID",
    "MAX_TEXT_CHARS",
    "SOCKET_DISCONNECT_GRACE_SECONDS",
    "TEAM_ID",
    "TEAM_NAME",
    "Ephemeral",
    "FakeSlack",
    "FakeWorkspace",
    "Pin",
    "SlackError",
    "SlackMessage",
    "UploadedFile",
    "app_mention_event",
    "app_uninstalled_event",
    "message_event",
    "new_ts",
    "reaction_added_event",
    "sign",
    "tokens_revoked_event",
]

# Methods that take the app-level token (xapp-…) rather than the bot token.
APP_LEVEL_METHODS = frozenset({"apps.connections.open"})
# Methods that take the app's client credentials, no token (the install flow's code exchange).
CLIENT_CREDENTIAL_METHODS = frozenset({"oauth.v2.access"})


# Slack's rate-limit page: what an app distributed outside the Marketplace may read of a conversation.
HISTORY_METHODS = ("conversations.replies", "conversations.history")
DISTRIBUTED_HISTORY_OBJECTS = 15


@dataclass
class _Failure:
    times: int
    status: int
    error: str
    retry_after: int


@dataclass
class _Late:
    """A call that succeeds but whose answer is slow (`delay`) or never arrives (`reset`)."""

    times: int
    delay: float
    reset: bool


Handler = Callable[[dict[str, Any]], dict[str, Any]]


class FakeSlack(WebApiMethods, SocketMode, Workspaces):
    """A Slack workspace with one bot token, or several workspaces one app is installed in
    (slack_oauth.py). See the module docstring."""

    def __init__(self, bot_user_id: str = "UBOT", *, bot_id: str = BOT_ID, team_id: str = TEAM_ID) -> None:
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.team_id = team_id
        self._lock = threading.RLock()
        self._file_counter = itertools.count(1)
        self._calls: list[tuple[str, dict[str, Any]]] = []
        self._call_teams: list[str | None] = []  # the workspace each call's token acts in
        self.refused: list[tuple[str, str]] = []  # (method, error) of every ok:false answer, in order
        self._messages: dict[str, dict[str, SlackMessage]] = {}  # channel -> ts -> message
        self._ephemerals: list[Ephemeral] = []
        self._pins: dict[str, list[Pin]] = {}
        self._statuses: list[tuple[str, str, str]] = []
        self._files: dict[str, UploadedFile] = {}
        self._failures: dict[str, deque[_Failure]] = {}
        self._late: dict[str, deque[_Late]] = {}
        self._limits: dict[str, tuple[int, float]] = {}  # method -> (max calls, window seconds)
        self._windows: dict[tuple[str | None, str], deque[float]] = {}  # (workspace, method): Slack counts per workspace
        self._count_429: dict[str, int] = {}
        self._limited_until = 0.0  # monotonic: until then every method answers 429 (rate_limit_everything)
        self._limited_retry_after = 1
        # An app distributed outside the Marketplace (distributed_app): messages a history read returns at most.
        self.history_cap: int | None = None
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
            "conversations.info": self._conversations_info,
            "conversations.members": self._conversations_members,
        }
        self.admins: set[str] = set()  # users.info reports these as workspace admins
        # People and conversations tests describe (slack_web.py answers users.info, conversations.info and
        # conversations.members from them; anyone else is a member of this workspace, any channel public).
        self.users: dict[str, dict[str, Any]] = {}
        self.conversations: dict[str, dict[str, Any]] = {}
        # The bot token's scopes: what installing the app from manifest.yml grants.
        self.scopes: set[str] = scopes.manifest_bot_scopes()
        self.scope_refusals: list[tuple[str, str]] = []  # (method, needed) answered missing_scope
        slack_streaming.register(self)  # chat.startStream / appendStream / stopStream
        slack_sessions.register(self)  # agents.sessions.setStatus / rename, the stop button
        slack_search.register(self)  # assistant.search.context, as the acting user
        slack_views.register(self)  # views.publish: each person's Home tab
        self._init_workspaces(team_id, TEAM_NAME, bot_user_id, bot_id)

    # ---------------------------------------------------------------- server

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[self._oauth_scopes_header])
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_post("/upload/{file_id}", self._handle_upload)
        app.router.add_get("/socket/{ticket}", self._handle_socket)
        slack_files.register(self, app)  # files shared in threads: files.info and the private download
        self._register_oauth(app)  # /oauth/v2/authorize and oauth.v2.access
        slack_canvases.register(self)  # canvases.create / edit / sections.lookup / access.set (files.info too)
        app.on_shutdown.append(self._close_sockets_on_shutdown)
        return app

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _read_params(request)
        authorization = request.headers.get("Authorization", "")
        header_token = _bearer(authorization)
        token = header_token or params.pop("token", None)
        params.pop("token", None)
        caller: FakeWorkspace | None = None
        caller_error: SlackError | None = None
        if method not in APP_LEVEL_METHODS and method not in CLIENT_CREDENTIAL_METHODS and token:
            with self._lock:
                try:
                    caller = self._workspace_of_token(str(token), params) if str(token).startswith("xoxb-") else None
                except SlackError as e:
                    caller_error = e
        with self._lock:
            self._calls.append((method, copy.deepcopy(params)))
            self._call_teams.append(caller.team_id if caller is not None else None)
        if method not in self._methods:
            return _ok_false("unknown_method", req_method=method)
        if method in CLIENT_CREDENTIAL_METHODS:
            credentials = basic_credentials(authorization)
            if credentials is not None:
                params["client_id"], params["client_secret"] = credentials
        elif method in APP_LEVEL_METHODS:
            refused = _refuse_app_level_call(request.method, header_token, token)
            if refused is not None:
                return refused
        elif not token:
            return _ok_false("not_authed")
        elif not str(token).startswith("xoxb-"):
            return _ok_false("invalid_auth")
        elif caller_error is not None:
            return self._refuse(method, caller_error.code)
        if method not in APP_LEVEL_METHODS:
            refused = self._refuse_missing_scope(method, params)
            if refused is not None:
                return refused
        limited = self._take_failure_or_limit(method, caller.team_id if caller is not None else None)
        if limited is not None:
            return limited
        try:
            with self._lock:
                self._origin = f"{request.scheme}://{request.host}"
                self._caller = caller or self.default_workspace
                if caller is not None:
                    self._refuse_foreign_channel(caller, params)
                body = self._methods[method](params)
                late = self._take_late(method)
        except SlackError as e:
            return self._refuse(method, e.code, **e.extra)
        if late is not None:
            if late.delay:
                await asyncio.sleep(late.delay)
            if late.reset:  # done, but the answer never reaches the caller
                assert request.transport is not None
                request.transport.abort()
                return web.Response(status=500)  # written to a closed connection: nobody reads it
        return web.json_response({"ok": True, **body})

    def _take_late(self, method: str) -> _Late | None:
        queue = self._late.get(method)
        if not queue:
            return None
        late = queue[0]
        late.times -= 1
        if late.times <= 0:
            queue.popleft()
        return late

    def _refuse(self, method: str, error: str, **extra: Any) -> web.Response:
        with self._lock:
            self.refused.append((method, error))
        return _ok_false(error, **extra)

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

    def _take_failure_or_limit(self, method: str, team: str | None = None) -> web.Response | None:
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
                stamps = self._windows.setdefault((team, method), deque())
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

    def answer_late(self, method: str, times: int = 1, *, delay: float = 0.0, reset: bool = False) -> None:
        """The next `times` calls of `method` take effect (a message is stored, a pin made), then the
        answer waits `delay` seconds and, with `reset`, is never sent: the connection is dropped,
        as when the network fails after Slack did the work. A caller that retries blindly posts twice."""
        with self._lock:
            self._late.setdefault(method, deque()).append(_Late(times, delay, reset))

    def rate_limit_everything(self, seconds: float, *, retry_after: int = 1) -> None:
        """For the next `seconds`, every Web API method answers HTTP 429 `ratelimited` with
        `Retry-After: retry_after`, as Slack does when an app is limited hard; then it recovers."""
        with self._lock:
            self._limited_until = time.monotonic() + seconds
            self._limited_retry_after = int(retry_after)

    def enforce_tiers(self, *, window: float = 60.0) -> None:
        """Cap every method at its published tier (slack_records.TIERS): 429 with Retry-After past it."""
        for method, per_minute in TIERS.items():
            self.set_rate_limit(method, per_minute, window=window)

    def distributed_app(self, *, window: float = 60.0) -> None:
        """Answer as Slack answers an app distributed to other organizations outside the Marketplace
        (created since 29 May 2025): conversations.replies and conversations.history once per `window`
        (a minute) per workspace, each 429 with the Retry-After left, and at most 15 messages an answer
        whatever `limit` asks (a cursor for the rest)."""
        for method in HISTORY_METHODS:
            self.set_rate_limit(method, 1, window=window)
        with self._lock:
            self.history_cap = DISTRIBUTED_HISTORY_OBJECTS

    def set_rate_limit(self, method: str, per_minute: int | None, *, window: float = 60.0) -> None:
        """Cap `method` at `per_minute` calls per sliding `window` seconds (None removes the cap)."""
        with self._lock:
            if per_minute is None:
                self._limits.pop(method, None)
            else:
                self._limits[method] = (per_minute, window)
            for bucket in [b for b in self._windows if b[1] == method]:
                del self._windows[bucket]

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
            self._claim_channel(ev["channel"], envelope.get("team_id"))
            msg = SlackMessage(channel=ev["channel"], ts=ev["ts"], text=ev.get("text", ""),
                               thread_ts=ev.get("thread_ts"), user=ev.get("user", ""), bot_id=ev.get("bot_id"))
            self._store(msg)
            return msg.ts

    def deletion_event(self, channel: str, ts: str) -> dict[str, Any]:
        """A person deletes the message (theirs, or as an admin the bot's): it goes (a thread's first
        message with replies becomes a tombstone), and the returned event is the one Slack sends about
        it, its `previous_message` the message as Slack held it (a bot's with its user and bot id)."""
        with self._lock:
            message = self._find(channel, ts)
            previous = self._render(message)
            replies = bool(previous.get("reply_count"))
            for name in ("reply_count", "reply_users_count", "latest_reply", "reply_users", "pinned_to"):
                previous.pop(name, None)
            if not replies:
                message.deleted = True
            return slack_events.message_deleted_event(ts, channel=channel, replies=replies, previous=previous,
                                                      team_id=message.team or self.team_id,
                                                      bot_user_id=self.bot_user_id)

    # -------------------------------------------------------- introspection

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        """Every request to /api/*, in order, including refused and rate-limited ones."""
        with self._lock:
            return list(self._calls)

    def calls_of(self, method: str) -> list[dict[str, Any]]:
        with self._lock:
            return [p for m, p in self._calls if m == method]

    def add_user(self, user: str, *, name: str | None = None, team_id: str | None = None, admin: bool = False,
                 owner: bool = False, enterprise_id: str | None = None, guest: bool = False) -> None:
        """A person as users.info reports them: `team_id` another workspace's for a Slack Connect guest,
        whose `is_admin` is about their own organization; `guest` a guest account of this workspace
        (`is_restricted`: they see only the channels they are in)."""
        with self._lock:
            self.users[user] = {"name": name or user.lower(), "team_id": team_id or self.team_id, "is_admin": admin,
                                "is_owner": owner, "enterprise_id": enterprise_id, "guest": guest}

    def add_conversation(self, channel: str, *, name: str | None = None, private: bool | None = None,
                         members: list[str] | None = None, ext_shared: bool = False) -> None:
        """A conversation as conversations.info / conversations.members report it. Ids keep Slack's
        convention: C… a channel (public unless `private`), G… a private channel, D… a direct message."""
        with self._lock:
            self.conversations[channel] = {
                "name": name or channel.lower(), "private": private if private is not None else channel[:1] in "GD",
                "members": list(members or []), "ext_shared": ext_shared,
            }

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
        msg.team = msg.team or self.team_of_channel(msg.channel)
        self._messages.setdefault(msg.channel, {})[msg.ts] = msg

    def _find(self, channel: str, ts: str) -> SlackMessage:
        m = self._messages.get(channel, {}).get(ts)
        if m is None or m.deleted:
            raise SlackError("message_not_found")
        return m

    def _render(self, m: SlackMessage, *, with_metadata: bool = False) -> dict[str, Any]:
        """A message as Slack returns it in API responses (its metadata only when asked for)."""
        out: dict[str, Any] = {"type": "message", "ts": m.ts, "user": m.user, "text": m.text,
                               "team": m.team or self.team_id}
        if with_metadata and m.metadata is not None:
            out["metadata"] = copy.deepcopy(m.metadata)
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


def _bearer(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


