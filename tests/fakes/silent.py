"""A model endpoint that accepts every connection, reads the request, and never answers.

Not an HTTP server at all: a socket that is listened on and then left silent, the way a wedged
gateway, a firewall that swallows packets after the handshake, or a paused process looks to a
client. What it saw (connections, the request lines) is kept for the test to read.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType

HOST = "127.0.0.1"
# Each read waits this long at most, so stop() is noticed promptly.
POLL_SECONDS = 0.2


class SilentServer:
    """Listen on 127.0.0.1, accept, read, answer nothing; use as a context manager."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((HOST, 0))
        self._listener.listen(64)
        self._listener.settimeout(POLL_SECONDS)
        self.port = int(self._listener.getsockname()[1])
        self.url = f"http://{HOST}:{self.port}"
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._connections: list[socket.socket] = []
        self._request_lines: list[str] = []
        self._thread = threading.Thread(target=self._serve, name="silent-server", daemon=True)

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._connections)

    @property
    def request_lines(self) -> list[str]:
        """The first line of every request received ("POST /v1/messages HTTP/1.1")."""
        with self._lock:
            return list(self._request_lines)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connection.settimeout(POLL_SECONDS)
            with self._lock:
                self._connections.append(connection)
            threading.Thread(target=self._read, args=(connection,), daemon=True).start()

    def _read(self, connection: socket.socket) -> None:
        """Read whatever comes (so the client's send never blocks), keep the request lines, say nothing."""
        pending = b""
        while not self._stop.is_set():
            try:
                chunk = connection.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not chunk:
                return
            *lines, pending = (pending + chunk).split(b"\r\n")  # the last piece may be a line cut short
            for line in lines:
                if line.startswith((b"POST ", b"GET ")):  # a JSON body never holds a raw line break
                    with self._lock:
                        self._request_lines.append(line.decode("latin-1"))

    def __enter__(self) -> SilentServer:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(5)
        with self._lock:
            for connection in self._connections:
                connection.close()
