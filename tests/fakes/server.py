"""Run an aiohttp application in a background thread, for tests.

The server has its own event loop in a daemon thread, so it serves sync tests and
async tests alike (an async test's loop never has to drive the server).
"""

from __future__ import annotations

import asyncio
import socket
import threading
from types import TracebackType

from aiohttp import web

HOST = "127.0.0.1"
# How long start() waits for the socket to accept connections.
START_TIMEOUT = 10.0
# Handlers still running at stop() (a /slow page, a stream) get this long before cancellation.
SHUTDOWN_TIMEOUT = 1.0


def free_port() -> int:
    """A TCP port that was free a moment ago (prefer ServerThread(port=0), which has no race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class ServerThread:
    """Serve `app` on 127.0.0.1 from a daemon thread; use as a context manager."""

    def __init__(self, app: web.Application, *, port: int = 0) -> None:
        self.app = app
        self.port = port
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> ServerThread:
        """Start serving; return once the port accepts connections."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        self._thread = threading.Thread(target=self._run, name=f"fake-server-{id(self):x}", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            raise RuntimeError("fake server did not start in time")
        if self._error is not None:
            raise RuntimeError(f"fake server failed to start: {self._error!r}") from self._error
        # The site is listening once setup finished, but prove it the way a client would.
        with socket.create_connection((HOST, self.port), timeout=START_TIMEOUT):
            pass
        return self

    def stop(self) -> None:
        """Stop serving and join the thread; safe to call twice."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or self._stopped.is_set():
            return
        self._stopped.set()
        if self._runner is not None and loop.is_running():
            fut = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop)
            try:
                fut.result(timeout=SHUTDOWN_TIMEOUT + 5)
            except Exception:
                pass  # best effort: the thread is a daemon either way
        try:
            loop.call_soon_threadsafe(loop.stop)
        except RuntimeError:
            pass  # the loop already closed (the server failed to start)
        thread.join(timeout=5)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._setup())
        except BaseException as e:  # report to start(), which is waiting
            self._error = e
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            # Cancel whatever is left (handlers that outlived cleanup) before closing.
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _setup(self) -> None:
        # handler_cancellation: a client that gives up (timeout tests) cancels its handler.
        runner = web.AppRunner(
            self.app,
            handler_cancellation=True,
            shutdown_timeout=SHUTDOWN_TIMEOUT,
            access_log=None,
        )
        await runner.setup()
        site = web.TCPSite(runner, HOST, self.port)
        await site.start()
        self._runner = runner
        # Port 0 means "any": read back the one the OS chose.
        self.port = int(runner.addresses[0][1])
        self.url = f"http://{HOST}:{self.port}"
