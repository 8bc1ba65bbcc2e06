"""The model boundary: one place that talks to the Messages API, counts usage, logs each
request as dispatched, and turns failures into values."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

import anthropic
from anthropic.types import Message

from . import defaults
from .capacity import CAPACITY_WAIT, STREAM_SETTLE, is_spend_limit
from .capacity_middleware import MAX_THROTTLED_ATTEMPTS
from .context.requestlog import RequestLog, RequestRecord, describe
from .context.tokens import CHARS_PER_TOKEN, estimate_chars
from .exceptions import ModelUnavailable
from .model_capabilities import Capabilities, Provider, capabilities
from .model_provider import ModelAPI
from .provider_values import pause_seconds
from .silence import ModelSilent, endpoint
from .spend_gate import SPEND_SETTLE
from .usage import Usage

log = logging.getLogger(__name__)
T = TypeVar("T")

# An overloaded service (529, or an overloaded_error sent mid-stream) is asking us to come
# back later, not refusing the request: past the SDK's few quick retries we keep trying this
# long, so an outage of a minute or two costs the run time, not its answer.
OVERLOAD_PATIENCE_SECONDS = defaults.MODEL_PATIENCE_SECONDS
# Waits grow from the first to the largest, doubling; each is jittered so the many runs a
# recovering service sees do not come back in lockstep.
OVERLOAD_FIRST_WAIT_SECONDS = 1.0
OVERLOAD_MAX_WAIT_SECONDS = 20.0


@dataclass(frozen=True)
class Patience:
    """How long calls wait out an overloaded model service, and how they space their retries."""

    seconds: float = OVERLOAD_PATIENCE_SECONDS
    first_wait: float = OVERLOAD_FIRST_WAIT_SECONDS
    max_wait: float = OVERLOAD_MAX_WAIT_SECONDS

    def wait(self, attempt: int, retry_after: float | None = None, rand: Callable[[], float] = random.random) -> float:
        """Equal jitter: half the doubled wait for sure, the other half at random; never less
        than the service's own Retry-After, never more than `max_wait`."""
        ceiling = min(self.max_wait, self.first_wait * 2**attempt)
        wait = ceiling / 2 + rand() * ceiling / 2
        return min(self.max_wait, max(wait, retry_after or 0.0))


def is_overloaded(exc: BaseException) -> bool:
    """529, or the `overloaded_error` the API sends as an SSE event once a stream has started."""
    return isinstance(exc, anthropic.APIStatusError) and (exc.status_code == 529 or exc.type == "overloaded_error")


def is_rate_limited(exc: BaseException) -> bool:
    """A 429 that asks us to slow down (waited out, never a lost turn); a spend limit is not one."""
    return isinstance(exc, anthropic.APIStatusError) and exc.status_code == 429 and not is_spend_limit(_message_of(exc))


def _retry_after(exc: anthropic.APIStatusError) -> float | None:
    """The answer's pause, read strictly and clamped (agent/provider_values.py)."""
    return pause_seconds(exc.response.headers)


# Bedrock and Vertex refuse credentials and model access with 401/403 of their own.
_CLOUD_REFUSAL = {
    "bedrock": "AWS Bedrock refused the request (check the AWS credentials, and that this model is enabled in "
    "the region's Bedrock model access)",
    "vertex": "Google Vertex AI refused the request (check the Google credentials, and that this model is enabled "
    "in the project's Model Garden)",
}


# The setting that names each provider's endpoint, for a line that says where the model was sought.
_ENDPOINT_SETTING = {"anthropic": "ANTHROPIC_BASE_URL", "bedrock": "AWS_REGION", "vertex": "CLOUD_ML_REGION"}


def describe_api_error(exc: anthropic.APIError, provider: str = "anthropic", tries: int | None = None) -> str:
    """Say what failed in words a Slack user can act on, without leaking request details. A failure to
    reach the service names the endpoint asked and what to try; `tries`: how many attempts were made."""
    if provider in _CLOUD_REFUSAL and isinstance(exc, (anthropic.AuthenticationError, anthropic.PermissionDeniedError)):
        return _CLOUD_REFUSAL[provider]
    attempts = f"{tries} tries" if tries and tries > 1 else "one try"
    setting = _ENDPOINT_SETTING.get(provider, "ANTHROPIC_BASE_URL")
    silent = exc.__cause__ if isinstance(exc.__cause__, ModelSilent) else None
    if silent is not None:
        knob = (
            "DEEPTHREAD_MODEL_FIRST_BYTE_SECONDS"
            if silent.awaited == "the first byte"
            else "DEEPTHREAD_MODEL_STREAM_IDLE_SECONDS"
        )
        return (
            f"the model endpoint {silent.url} sent nothing for {silent.waited:g} s ({attempts}); check that the "
            f"service there is up and speaks the Messages API ({setting}), or allow it longer with {knob}"
        )
    if isinstance(exc, anthropic.APITimeoutError):
        return f"the model endpoint {endpoint(exc.request.url)} did not answer in time ({attempts}); try again later"
    if isinstance(exc, anthropic.APIConnectionError):
        return (
            f"the model endpoint {endpoint(exc.request.url)} could not be reached ({attempts}); check {setting} "
            "and the network"
        )
    if isinstance(exc, anthropic.AuthenticationError):
        return "the model service rejected the API key (check ANTHROPIC_API_KEY)"
    if isinstance(exc, anthropic.PermissionDeniedError):
        return "the API key is not allowed to use this model (check DEEPTHREAD_MODEL)"
    if isinstance(exc, anthropic.NotFoundError):
        return "the model was not found (check DEEPTHREAD_MODEL / DEEPTHREAD_SMALL_MODEL)"
    if isinstance(exc, anthropic.RateLimitError):
        return "the model service kept rate-limiting us (or a spend limit was reached)"
    if isinstance(exc, anthropic.BadRequestError):
        return f"the model service refused a request as invalid ({_message_of(exc)})"
    if isinstance(exc, anthropic.APIStatusError):
        if is_overloaded(exc):
            return "the model service stayed overloaded for longer than we wait"
        return f"the model service kept failing (HTTP {exc.status_code} after retries)"
    return f"the model call failed ({type(exc).__name__})"


def _message_of(exc: anthropic.APIStatusError) -> str:
    body: dict[str, Any] = exc.body if isinstance(exc.body, dict) else {}
    nested = body.get("error")
    error: dict[str, Any] = nested if isinstance(nested, dict) else body
    return str(error.get("message", exc.message))[:200]


def thinking_config(caps: Capabilities, max_tokens: int) -> dict[str, Any]:
    """The `thinking` parameter the model takes: adaptive on current models, else a budget that
    leaves room for the answer (the API requires budget_tokens < max_tokens)."""
    if caps.thinking == "adaptive":
        return {"type": "adaptive"}
    budget = max(defaults.THINKING_MIN_BUDGET, min(defaults.THINKING_BUDGET_TOKENS, max_tokens // 2))
    return {"type": "enabled", "budget_tokens": budget}


class ModelClient:
    """Main-model turns (streamed) and small-model calls, with usage counted in one place."""

    def __init__(
        self,
        client: ModelAPI,
        *,
        main_model: str,
        small_model: str,
        timeout: float,
        log: RequestLog | None = None,
        on_usage: Callable[[Message, bool], None] | None = None,
        patience: Patience | None = None,
        provider: Provider = "anthropic",
        thinking: bool = True,
    ) -> None:
        self._client = client
        self.provider: Provider = provider
        # What the main model may be sent (thinking, tool choice): the capability table decides.
        self.caps: Capabilities = capabilities(main_model, provider)
        self.small_caps: Capabilities = capabilities(small_model, provider)
        # DEEPTHREAD_THINKING: on where the table allows it, unless the operator turned it off.
        self.thinking = thinking and self.caps.thinking != "none"
        self.patience = patience or Patience()
        # Told of every response: (message, is a main-model turn) — the ledger charges it.
        self._on_usage = on_usage
        self.main_model = main_model
        self.small_model = small_model
        self._timeout = timeout
        self._log = log
        self._logged = 0
        self.usage = Usage()
        # Once the service sent nothing to a whole call (every retry silent), each next call is tried
        # once, not retried, until one is answered: a silent endpoint ends the run in seconds.
        self._silent = False
        self._single_try: ModelAPI | None = None

    @property
    def _api(self) -> ModelAPI:
        """The client to call: the configured one, or while the service is silent, one that does not retry."""
        if not self._silent:
            return self._client
        if self._single_try is None:
            self._single_try = self._client.with_options(max_retries=0)
        return self._single_try

    def _tries(self) -> int:
        return 1 if self._silent else self._client.max_retries + 1

    def _failed(self, exc: anthropic.APIError) -> str:
        """What to tell the caller of a call that failed, remembering a silent service."""
        said = describe_api_error(exc, self.provider, self._tries())
        self._silent = isinstance(exc.__cause__, ModelSilent)
        return said

    async def turn(
        self,
        *,
        timeout: float | None = None,
        system: list[dict[str, Any]] | str,
        tools: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        max_tokens: int,
        tool_choice: dict[str, Any] | None = None,
        kind: str = "turn",
    ) -> Message:
        body: dict[str, Any] = {
            "model": self.main_model,
            "system": system,
            "tools": tools,
            "messages": messages,
            "max_tokens": max_tokens,
        }
        if tool_choice is not None and (tool_choice.get("type") in ("auto", "none") or self.caps.forced_tool_choice):
            body["tool_choice"] = tool_choice  # a forced choice the model refuses is left to the model
        if self.thinking and kind == "turn":
            body["thinking"] = thinking_config(self.caps, max_tokens)

        started = time.monotonic()
        try:
            message = await self._patiently(lambda: self._streamed(body, timeout or self._timeout), kind)
        except anthropic.APIError as exc:
            said = self._failed(exc)
            await self._record(kind, body, None, said, seconds=time.monotonic() - started)
            raise ModelUnavailable(said) from exc
        self._silent = False
        self.usage.add(Usage.of(message))
        if self._on_usage:
            self._on_usage(message, kind == "turn")
        await self._record(kind, body, message, seconds=time.monotonic() - started)
        return message

    async def small(self, *, system: str, prompt: str, max_tokens: int, kind: str = "extract") -> str:
        """A small-model call; `kind` names it in the request log ("extract", "claim_check")."""
        body: dict[str, Any] = {
            "model": self.small_model,
            "system": system,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": prompt}],
        }
        started = time.monotonic()
        try:
            message = await self._patiently(lambda: self._streamed(body, self._timeout), kind)
        except anthropic.APIError as exc:
            said = self._failed(exc)
            await self._record(kind, body, None, said, seconds=time.monotonic() - started)
            raise ModelUnavailable(said) from exc
        self._silent = False
        self.usage.add(Usage.of(message))
        if self._on_usage:
            self._on_usage(message, False)
        await self._record(kind, body, message, seconds=time.monotonic() - started)
        return "".join(block.text for block in message.content if block.type == "text")

    async def _streamed(self, body: dict[str, Any], timeout: float) -> Message:
        """One request, streamed, whatever it is (a turn, a side request): long outputs are refused
        without streaming, a stream shows liveness, and a service that sends nothing is found out at the
        first byte however long the answer takes to write (agent/silence.py). What the middlewares left
        to settle once the stream ended is settled here."""
        STREAM_SETTLE.set(None)
        SPEND_SETTLE.set(None)
        async with self._api.messages.stream(**body, timeout=timeout) as stream:
            message = await stream.get_final_message()
        settle = STREAM_SETTLE.get()  # left by the capacity middleware, when a limiter is in use
        if settle is not None:
            STREAM_SETTLE.set(None)
            await settle(message.usage.output_tokens)
        spent = SPEND_SETTLE.get()  # left by the spend gate's middleware, when budgets are shared
        if spent is not None:
            SPEND_SETTLE.set(None)
            await spent(Usage.of(message))
        return message

    async def _patiently(self, call: Callable[[], Awaitable[T]], kind: str) -> T:
        """`call()`, tried again while the service says it is overloaded, for up to the patience,
        and while it rate-limits us (429), up to MAX_THROTTLED_ATTEMPTS times (then the run ends with
        what it has); that wait is shown as waiting for model capacity and is not active time.
        Cancelling the caller (a stop, a deadline) ends the wait at once."""
        patience = self.patience
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                return await call()
            except anthropic.APIStatusError as exc:
                if is_rate_limited(exc):
                    if attempt + 1 >= MAX_THROTTLED_ATTEMPTS:
                        raise
                    wait = _retry_after(exc) or patience.wait(attempt)
                    log.warning("model service rate-limited us (%s); trying again in %.1f s", kind, wait)
                    hook = CAPACITY_WAIT.get()
                    async with hook() if hook is not None else nullcontext():
                        await asyncio.sleep(wait)
                    attempt += 1
                    continue
                if not is_overloaded(exc):
                    raise
                wait = patience.wait(attempt, _retry_after(exc))
                waited = time.monotonic() - started
                if waited + wait > patience.seconds:
                    log.warning("model service still overloaded after %.0f s (%s); giving up", waited, kind)
                    raise
                log.warning(
                    "model service overloaded (%s); trying again in %.1f s (waited %.0f of %.0f s)",
                    kind,
                    wait,
                    waited,
                    patience.seconds,
                )
                await asyncio.sleep(wait)
                attempt += 1

    async def server_search(self, *, system: str, prompt: str, tool: dict[str, Any], max_tokens: int) -> Message:
        """A small-model request that may run a server tool (the anthropic search provider): usage
        and the per-search price reach the ledger like any extraction call's."""
        body: dict[str, Any] = {
            "model": self.small_model,
            "system": system,
            "max_tokens": max_tokens,
            "tools": [tool],
            "messages": [{"role": "user", "content": prompt}],
        }
        try:
            message = await self._patiently(lambda: self._streamed(body, self._timeout), "search")
        except anthropic.APIError as exc:
            said = self._failed(exc)
            await self._record("search", body, None, said)
            raise ModelUnavailable(said) from exc
        self._silent = False
        self.usage.add(Usage.of(message))
        if self._on_usage:
            self._on_usage(message, False)
        await self._record("search", body, message)
        return message

    async def count_tokens(self, *, system: Any, tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> int:
        """The real size of a request, asked of the API (no model call, no cost); an estimate where
        the provider does not count (Bedrock)."""
        if not self.caps.counts_tokens:
            return (estimate_chars(system) + estimate_chars(tools) + estimate_chars(messages)) // CHARS_PER_TOKEN
        try:
            counted = await self._api.messages.count_tokens(
                model=self.main_model,
                system=system,
                tools=tools,  # type: ignore[arg-type]  # our dicts follow the API's shapes
                messages=messages,  # type: ignore[arg-type]
            )
        except anthropic.APIError as exc:
            raise ModelUnavailable(self._failed(exc)) from exc
        return counted.input_tokens

    async def _record(
        self,
        kind: str,
        body: dict[str, Any],
        message: Message | None,
        error: str | None = None,
        *,
        seconds: float | None = None,
    ) -> None:
        if self._log is None:
            return
        self._logged += 1
        usage = Usage.of(message) if message is not None else Usage()
        record = RequestRecord(
            n=self._logged,
            kind=kind,
            model=body["model"],
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_creation_tokens=usage.cache_creation_tokens,
            thinking_tokens=usage.thinking_tokens,
            web_search_requests=usage.web_search_requests,
            stop_reason=message.stop_reason if message is not None else None,
            error=error,
            seconds=seconds,
            **(describe(body) if kind == "turn" or kind == "summary" else {}),
        )
        await self._log.record(record, body)


def search_model(client: ModelAPI, settings: Any) -> ModelClient:
    """A model client for one search outside a run (`doctor --live`): `settings` names the models
    and the provider (bot.settings.Settings, duck-typed: the engine imports nothing from the bot)."""
    return ModelClient(
        client,
        main_model=settings.model,
        small_model=settings.small_model,
        timeout=defaults.SERVER_SEARCH_TIMEOUT_SECONDS,
        provider=settings.model_provider,
    )
