"""The SDK middleware that asks the model limiter (capacity.py) before every Messages API attempt
of a run and tells it what the service answered; its own module so that what only reads limits
(the serve process, via jobs) does not import the SDK."""

from __future__ import annotations

import asyncio
import json
import math
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
    LIMIT_SETTINGS,
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
from .exceptions import ModelThrottled, RequestTooLarge
from .provider_values import MAX_PAUSE_SECONDS, count, pause_seconds

__all__ = ["MAX_THROTTLED_ATTEMPTS", "CapacityMiddleware", "SanePauses"]

MESSAGES_PATH = "/v1/messages"
# One request throttled this many times ends its run's wait: it is told (ModelThrottled) and the run
# finishes with what it has. A learned limit's descent from its start throttles a request a few
# times at most; a request throttled for its own sake (too big, its key's) would be for ever.
MAX_THROTTLED_ATTEMPTS = 8
# A throttled request whose answer named no valid pause waits this long before asking again,
# doubling with each throttle (0.5, 1, 2 … s): a request throttled for its own sake does not take
# the others' turns while it lasts (bench.model_capacity's header-less case: a better worst minute).
REPEAT_FIRST_WAIT_SECONDS = 0.5


def backoff(throttles: int) -> float:
    """The wait before a request's next attempt after its `throttles`-th throttle with no pause named."""
    return float(min(MAX_PAUSE_SECONDS, REPEAT_FIRST_WAIT_SECONDS * 2 ** (throttles - 1)))


# Statuses a spend limit or billing refusal comes with (429 spend limit, 400 credit balance, 402).
SPEND_STATUSES = (400, 402, 429)


async def _refused_for_spend(response: AsyncAPIResponse[Any]) -> bool:
    """A refusal that names a spend limit or billing (a 429, or the API's 400 "credit balance is
    too low", 402 billing_error): the key's or the workspace's, not the organization's capacity."""
    if response.status_code not in SPEND_STATUSES:
        return False
    try:
        body = json.loads(await response.http_response.aread())
    except (ValueError, TypeError):
        return False
    if not isinstance(body, dict):
        return False
    nested = body.get("error")
    error: dict[str, Any] = nested if isinstance(nested, dict) else body  # Anthropic's, or Bedrock's shape
    kind = str(error.get("type", ""))
    return kind == "billing_error" or is_spend_limit(str(error.get("message", "")))


def _sane_pauses(response: AsyncAPIResponse[Any]) -> None:
    """The SDK's own retries honour retry-after up to 49 days: they get the clamped value (or none)."""
    headers = response.http_response.headers
    if "retry-after" not in headers and "retry-after-ms" not in headers:
        return
    pause = pause_seconds(headers)
    for name in ("retry-after", "retry-after-ms"):
        if name in headers:
            del headers[name]
    if pause is not None:
        headers["retry-after-ms"] = str(int(pause * 1000))


async def _unwritten(response: AsyncAPIResponse[Any], demand: Demand) -> ModelLimits:
    """The output tokens reserved but not written, from the answer's `usage`: given back at once,
    whether or not the service sent its limit headers (a streamed answer's come with its end: STREAM_SETTLE)."""
    try:
        body = json.loads(await response.http_response.aread())
        written = count(body["usage"]["output_tokens"])
    except (ValueError, TypeError, KeyError):
        return ModelLimits()
    if written is None:  # not a count: nothing is given back
        return ModelLimits()
    return ModelLimits(output_tokens=max(0.0, demand.output_tokens - written))


class SanePauses(Middleware):
    """Every answer's retry-after read strictly and clamped before the SDK's own retries see it
    (a run without the shared limiter; CapacityMiddleware does the same for the runs with one)."""

    async def handle_async(self, request: APIRequest, call_next: AsyncCallNext) -> AsyncAPIResponse[Any]:
        response = await call_next(request)
        _sane_pauses(response)
        return response


class CapacityMiddleware(Middleware):
    """Every Messages API attempt of one run asks the limiter first and reports what it heard."""

    def __init__(
        self,
        limiter: ModelLimiter,
        *,
        team: str,
        run: str,
        long_wait_seconds: float = LONG_WAIT_SECONDS,
        max_throttles: int = MAX_THROTTLED_ATTEMPTS,
    ) -> None:
        self.limiter = limiter
        self.max_throttles = max_throttles
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
        throttles, since = 0, 0
        while True:
            await self._admitted(demand)
            response = await call_next(request)
            _sane_pauses(response)
            status = response.status_code
            seen = replace(observed(response.headers, status), ticket=demand.ticket, attempt=throttles, since=since)
            if status >= 500:  # the service failed: it wrote (and counted) no tokens
                seen = replace(
                    seen, unused=ModelLimits(input_tokens=demand.input_tokens, output_tokens=demand.output_tokens)
                )
            elif status == 429:  # refused, not counted: its place goes back (its remaining figures still hold)
                seen = replace(
                    seen,
                    unused=ModelLimits(
                        requests=demand.requests, input_tokens=demand.input_tokens, output_tokens=demand.output_tokens
                    ),
                )
            spent = await _refused_for_spend(response)
            if spent:  # the key's or workspace's: nothing in it is about the organization's capacity
                seen = Observed(limits=ModelLimits(), remaining=ModelLimits(), ticket=demand.ticket)
                response.http_response.headers["x-should-retry"] = "false"  # waiting does not help
            elif status < 300 and not request.stream:
                seen = replace(seen, unused=await _unwritten(response, demand))
            elif status < 300:
                STREAM_SETTLE.set(self._settler(model, demand))
            answers = await self.limiter.observe(model, seen)
            if status != 429 or spent:
                return response
            throttles += 1
            if throttles >= self.max_throttles:
                raise ModelThrottled(
                    f"the model service refused one request {throttles} times for its rate (HTTP 429); "
                    "this run ends with what it has rather than waiting on (the other runs keep their share)"
                )
            # Throttled: this request waits what the answer asked (clamped), then asks again in its
            # turn as a new demand, rather than the SDK retrying on its own (its next throttle, if
            # any, is counted as this request's again: Observed.attempt and since).
            since = answers
            demand = replace(demand, ticket=uuid.uuid4().hex)
            await self._wait(seen.retry_after if seen.retry_after is not None else backoff(throttles))

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

    async def _wait(self, seconds: float) -> None:
        hook = CAPACITY_WAIT.get()
        async with hook() if hook is not None else nullcontext():
            await asyncio.sleep(seconds)

    async def _too_large(self, demand: Demand) -> RequestTooLarge:
        holding = getattr(self.limiter, "holding", None)
        named = ""
        if holding is not None:
            dimension, limit, source = await holding(demand)
            named = (
                f" ({demand.need(dimension):,.0f} {dimension.replace('_', ' ')} against a limit of {limit:,.0f} a "
                f"minute, {source}; {LIMIT_SETTINGS[dimension]} sets it)"
            )
        return RequestTooLarge(
            f"one model request is larger than a whole minute of the organization's limit{named}, so it can "
            "never be sent: compact the notes, split the work into smaller requests, or stop"
        )

    async def _admitted(self, demand: Demand) -> None:
        """Until `demand` has its share; the wait runs inside the loop's CapacityWait hook."""
        wait = await self.limiter.try_acquire(demand)
        if wait == math.inf:
            raise await self._too_large(demand)
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
                    if wait == math.inf:
                        raise await self._too_large(demand)
                    if wait > 0 and not noted and time.monotonic() - started > self.long_wait_seconds:
                        noted = True
                        await self._note_long_wait(demand)
            except BaseException:
                await asyncio.shield(self.limiter.withdraw(demand))
                raise
