"""The SDK middleware that asks the model limiter (capacity.py) before every Messages API attempt
of a run and tells it what the service answered; its own module so that what only reads limits
(the serve process, via jobs) does not import the SDK."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

from anthropic import APIRequest, AsyncAPIResponse, AsyncCallNext, Middleware

from .capacity import (
    CAPACITY_NOTE,
    CAPACITY_WAIT,
    LONG_WAIT_SECONDS,
    OUTPUT_RESERVE_TOKENS,
    STREAM_SETTLE,
    Demand,
    ModelLimiter,
    ModelLimits,
    Observed,
    holding_note,
    is_spend_limit,
    observed,
    uncached_estimate,
)

__all__ = ["CapacityMiddleware"]

MESSAGES_PATH = "/v1/messages"


async def _spend_limited(response: AsyncAPIResponse[Any]) -> bool:
    try:
        body = json.loads(await response.http_response.aread())
    except (ValueError, TypeError):
        return False
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and is_spend_limit(str(error.get("message", "")))


async def _unwritten(response: AsyncAPIResponse[Any], demand: Demand) -> ModelLimits:
    """The output tokens reserved but not written, from the answer's `usage`: given back at once,
    whether or not the service sent its limit headers (a streamed answer's come with its end: STREAM_SETTLE)."""
    try:
        body = json.loads(await response.http_response.aread())
        written = int(body["usage"]["output_tokens"])
    except (ValueError, TypeError, KeyError):
        return ModelLimits()
    return ModelLimits(output_tokens=max(0, demand.output_tokens - written))


class CapacityMiddleware(Middleware):
    """Every Messages API attempt of one run asks the limiter first and reports what it heard."""

    def __init__(
        self, limiter: ModelLimiter, *, team: str, run: str, long_wait_seconds: float = LONG_WAIT_SECONDS
    ) -> None:
        self.limiter = limiter
        self.long_wait_seconds = long_wait_seconds
        self.team = team or "-"
        self.run = run or "-"

    async def handle_async(self, request: APIRequest, call_next: AsyncCallNext) -> AsyncAPIResponse[Any]:
        body = request.json if isinstance(request.json, Mapping) else None
        if request.method.lower() != "post" or not request.url.endswith(MESSAGES_PATH) or body is None:
            return await call_next(request)
        model = str(body.get("model", ""))
        demand = Demand(
            team=self.team,
            run=self.run,
            model=model,
            input_tokens=uncached_estimate(body),
            output_tokens=min(int(body.get("max_tokens") or 0), OUTPUT_RESERVE_TOKENS),
        )
        while True:
            await self._admitted(demand)
            response = await call_next(request)
            seen = replace(observed(response.headers, response.status_code), ticket=demand.ticket)
            if response.status_code >= 500:  # the service failed: it wrote (and counted) no tokens
                seen = replace(
                    seen, unused=ModelLimits(input_tokens=demand.input_tokens, output_tokens=demand.output_tokens)
                )
            spend_limited = response.status_code == 429 and await _spend_limited(response)
            if spend_limited:  # no load to back off from: waiting does not help
                seen = replace(seen, throttled=False)
            elif response.status_code < 300 and not request.stream:
                seen = replace(seen, unused=await _unwritten(response, demand))
            elif response.status_code < 300:
                STREAM_SETTLE.set(self._settler(model, demand))
            await self.limiter.observe(model, seen)
            if response.status_code != 429 or spend_limited:
                return response
            # Rate-limited: every run now holds off for the retry-after (observe), and this one
            # asks again in its turn, as a new demand, rather than the SDK retrying on its own.
            demand = replace(demand, ticket=uuid.uuid4().hex)

    def _settler(self, model: str, demand: Demand) -> Callable[[int], Awaitable[None]]:
        """Gives back, once the stream has ended, the output tokens `demand` reserved but did not write."""

        async def settle(written: int) -> None:
            unused = ModelLimits(output_tokens=max(0, demand.output_tokens - written))
            await self.limiter.observe(model, Observed(limits=ModelLimits(), remaining=ModelLimits(), unused=unused))

        return settle

    async def _note_long_wait(self, demand: Demand) -> None:
        """Say in the run's progress which limit holds it and the setting that raises it."""
        note, holding = CAPACITY_NOTE.get(), getattr(self.limiter, "holding", None)
        if note is not None and holding is not None:
            await note(holding_note(*(await holding(demand))))

    async def _admitted(self, demand: Demand) -> None:
        """Until `demand` has its share; the wait runs inside the loop's CapacityWait hook."""
        wait = await self.limiter.try_acquire(demand)
        if wait <= 0:
            return
        hook = CAPACITY_WAIT.get()
        started = time.monotonic()
        noted = False
        async with hook() if hook is not None else nullcontext():
            try:
                while wait > 0:
                    await asyncio.sleep(wait)
                    wait = await self.limiter.try_acquire(demand)
                    if wait > 0 and not noted and time.monotonic() - started > self.long_wait_seconds:
                        noted = True
                        await self._note_long_wait(demand)
            except BaseException:
                await asyncio.shield(self.limiter.withdraw(demand))
                raise
