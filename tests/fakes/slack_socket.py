"""The fake Slack's Socket Mode, as Slack runs it.

The app calls `apps.connections.open` with its app-level token (`xapp-…`, in the Authorization
header) and gets a one-time WebSocket URL (`ws://127.0.0.1:PORT/socket/<ticket>` here); once
connected, the server sends `hello`, then envelopes (`{"envelope_id", "type": "events_api",
"payload": <the HTTP body>, …}`) that the app acks with `{"envelope_id": …}`;
`{"type": "disconnect"}` asks it to reconnect. The test pushes envelopes with
`send_socket_event`, reads `socket_acks`, and asks for a reconnection with `disconnect_sockets`.

A mixin of FakeSlack (slack.py), which owns the lock and the socket bookkeeping fields."""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import WSCloseCode, WSMsgType, web

from tests.fakes.slack_records import APP_ID, _ok_false

if TYPE_CHECKING:
    from tests.fakes.slack import FakeSlack

    _Base = FakeSlack
else:
    _Base = object

# After a `disconnect` message Slack keeps the old connection open a few seconds, then closes it.
SOCKET_DISCONNECT_GRACE_SECONDS = 10.0


@dataclass
class _SocketConnection:
    """One open Socket Mode WebSocket. `outbox` belongs to the server loop: other threads
    reach it only through `loop.call_soon_threadsafe`."""

    ticket: str
    loop: asyncio.AbstractEventLoop
    outbox: asyncio.Queue[str | None]  # None: close the socket
    draining: bool = False  # told to reconnect: gets no new envelopes


class SocketMode(_Base):
    """The WebSocket server side, the test's controls over it, and apps.connections.open."""

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

    # -------------------------------------------------------------- methods

    def _apps_connections_open(self, p: dict[str, Any]) -> dict[str, Any]:
        ticket = secrets.token_hex(16)
        self._tickets.add(ticket)
        ws_origin = "ws" + self._origin[len("http"):]  # http://… -> ws://…, https://… -> wss://…
        return {"url": f"{ws_origin}/socket/{ticket}"}


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
