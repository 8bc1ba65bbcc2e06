"""A model service that sends nothing is given up on in seconds, not minutes.

The SDK's timeout is one number for every read, so a service that accepts the connection and never
answers held a run for REQUEST_TIMEOUT_SECONDS times the retries. Here the model client's HTTP client
waits `first_byte` seconds for the answer's headers and then `between_events` seconds for each next
chunk of the stream (events and pings alike); past either it raises ModelSilent, an httpx2 read
timeout, so the SDK retries it as it retries any timeout and the caller sees APITimeoutError with
ModelSilent as its cause (agent/model.py names the endpoint from it). Every model request is streamed,
so a healthy service's headers come at once, before the model starts.

A ModelWatch, when given, is told of every request in flight, so the terminal can say what a run
is waiting on (bot/cli/progress_line.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
from anthropic import DefaultAsyncHttpxClient

from .provider_config import Silence

__all__ = ["ModelSilent", "ModelWatch", "Silence", "Waiting", "endpoint", "silence_guarded_client"]

Awaited = Literal["the first byte", "the next stream event"]


def endpoint(url: httpx2.URL | str) -> str:
    """The address a request went to, without its query or any credentials in it (safe to show)."""
    parsed = httpx2.URL(str(url))
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}{parsed.path}"


class ModelSilent(httpx2.ReadTimeout):
    """The model service sent nothing for `waited` seconds while a request waited for `awaited`."""

    def __init__(self, request: httpx2.Request, *, waited: float, awaited: Awaited) -> None:
        self.url = endpoint(request.url)
        self.waited = waited
        self.awaited = awaited
        super().__init__(f"{self.url} sent nothing for {waited:g} s (waiting for {awaited})", request=request)


@dataclass
class Waiting:
    """One model request in flight: where it went, when it was sent, when its last byte came."""

    url: str
    sent: float
    last_byte: float | None = None

    def quiet_for(self, now: float) -> float:
        """Seconds since the service last sent anything for this request (or since it was sent)."""
        return now - (self.last_byte if self.last_byte is not None else self.sent)


@dataclass
class ModelWatch:
    """The model requests in flight, for a progress line that says what a run waits on."""

    clock: Callable[[], float] = time.monotonic
    _waiting: list[Waiting] = field(default_factory=list)

    def begin(self, url: str) -> Waiting:
        waiting = Waiting(url=url, sent=self.clock())
        self._waiting.append(waiting)
        return waiting

    def heard(self, waiting: Waiting) -> None:
        waiting.last_byte = self.clock()

    def end(self, waiting: Waiting) -> None:
        if waiting in self._waiting:
            self._waiting.remove(waiting)

    def quietest(self) -> Waiting | None:
        """The request the service has been silent on longest, if any is in flight."""
        now = self.clock()
        return max(self._waiting, key=lambda w: w.quiet_for(now), default=None)


class _WatchedStream(httpx2.AsyncByteStream):
    """A response body whose every next chunk must come within `idle` seconds."""

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        request: httpx2.Request,
        idle: float,
        heard: Callable[[], None],
        ended: Callable[[], None],
    ) -> None:
        self._inner = inner
        self._request = request
        self._idle = idle
        self._heard = heard
        self._ended = ended

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._inner.__aiter__()
        while True:
            try:
                async with asyncio.timeout(self._idle) as scope:
                    chunk = await chunks.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError:
                if scope.expired():
                    raise ModelSilent(self._request, waited=self._idle, awaited="the next stream event") from None
                raise
            self._heard()
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._ended()


class _SilenceGuardedClient(DefaultAsyncHttpxClient):
    """The SDK's own HTTP client (its connection pool, keep-alive and proxy settings), with the waits above."""

    def __init__(self, silence: Silence, watch: ModelWatch | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._silence = silence
        self._watch = watch or ModelWatch()

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        watch = self._watch
        waiting = watch.begin(endpoint(request.url))
        try:
            async with asyncio.timeout(self._silence.first_byte) as scope:
                response: httpx2.Response = await super().send(request, **kwargs)
        except TimeoutError:
            watch.end(waiting)
            if scope.expired():
                raise ModelSilent(request, waited=self._silence.first_byte, awaited="the first byte") from None
            raise
        except BaseException:
            watch.end(waiting)
            raise
        watch.heard(waiting)
        if response.is_closed or not isinstance(response.stream, httpx2.AsyncByteStream):
            watch.end(waiting)  # read whole already: nothing more to wait for
            return response
        response.stream = _WatchedStream(
            response.stream,
            request,
            self._silence.between_events,
            heard=lambda: watch.heard(waiting),
            ended=lambda: watch.end(waiting),
        )
        return response


def silence_guarded_client(silence: Silence, watch: ModelWatch | None = None, **kwargs: Any) -> httpx2.AsyncClient:
    """The HTTP client a model SDK client is built on (model_provider.py): `kwargs` as the SDK's own takes."""
    return _SilenceGuardedClient(silence, watch, **kwargs)
