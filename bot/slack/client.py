"""A Slack Web API client whose every write waits for the shared per-workspace limiter.

`LimitedWebClient` is an `AsyncWebClient`: listeners and the publisher call it as they
would any client. Before each write (`chat.postMessage`, `chat.update`, `pins.add`, …) it
takes a slot in its workspace's bucket for that method (ratelimit.py); on a 429 — or an
`ok: false` answer saying `ratelimited` — it pauses that bucket for Retry-After, for every
caller in every process, and tries again until `patience_seconds` run out. A write refused
for its rate is therefore retried, never dropped.

Bolt builds a fresh plain client for every request; `limit_every_write(client)` is a global
middleware that swaps it for a limited one, so listener code needs no change.

Every text field of every request that carries text goes through `outgoing.inert`, the one rule
for what may be live in Slack (bot/slack/outgoing.py). Every message it sends, whoever sends it,
goes out with link and media unfurling off
(`without_unfurls`): a link in a report, a progress line or a reply never fetches itself when
someone views the message, so a URL a page planted cannot be visited by Slack on our behalf.

The publisher wants a slot before it renders (so a call that waited sends the newest
state): `take_slots(...)` acquires first and runs its function with those calls admitted.
A 429 on an admitted call is raised to that caller, who renders afresh and asks again.
The limiter is a courtesy: when Redis is unreachable, writes go straight to Slack.

In multi-workspace mode the publisher's client has no token of its own: each call uses the token
of the installation the caller acts for (`tenancy.acting_for`), looked up in the installation
store, and counts against that workspace's buckets. A call that names no installation, or one
whose tokens were deleted (uninstalled), raises NotInstalled instead of reaching Slack.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from aiohttp import FormData
from redis.exceptions import RedisError
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.exceptions import NotInstalled, SlotBusy
from jobs.process.metrics import metrics

from .outgoing import MESSAGE_METHODS, guard
from .ratelimit import SlackRateLimiter, Urgency, bucket_method, retry_after_seconds
from .tenancy import Tenant, acting

__all__ = [
    "PATIENCE_SECONDS",
    "MESSAGE_METHODS",
    "BotTokens",
    "LimitedWebClient",
    "SlotBusy",
    "is_rate_limited",
    "limit_every_write",
    "take_slots",
    "without_unfurls",
]

log = logging.getLogger(__name__)

# How long one write keeps waiting out 429s before it gives up: longer than the worst outage
# Slack's rate limiting causes (a minute or two of 429s on every method).
PATIENCE_SECONDS = 600.0
# A method we do not count (a read) that answers 429 with no Retry-After is tried again after this.
UNCOUNTED_RETRY_SECONDS = 1.0

T = TypeVar("T")

NO_UNFURLS = {"unfurl_links": False, "unfurl_media": False}


def without_unfurls(
    api_method: str, json: dict | None, data: dict | FormData | None
) -> tuple[dict | None, dict | FormData | None]:
    """The body of a posting method with unfurling switched off, whatever the caller passed."""
    if api_method not in MESSAGE_METHODS:
        return json, data
    if json is not None or not isinstance(data, dict):
        return {**(json or {}), **NO_UNFURLS}, data
    return json, {**data, **NO_UNFURLS}


@dataclass
class _Scope:
    """Who is calling: the workspace to count against, whether it is a final state, and the
    calls whose slots the caller already took (each used once)."""

    team: str | None
    urgent: Urgency = False
    admitted: list[str] = field(default_factory=list)

    def admit(self, method: str) -> bool:
        if method in self.admitted:
            self.admitted.remove(method)
            return True
        return False


_scope: ContextVar[_Scope | None] = ContextVar("deepthread_slack_scope", default=None)


class BotTokens(Protocol):
    """Where a token-less client finds the token of the installation a call acts for."""

    async def bot_token(self, tenant: Tenant) -> str | None: ...


def is_rate_limited(exc: SlackApiError) -> bool:
    return exc.response.status_code == 429 or exc.response.get("error") == "ratelimited"


def _names_a_token(*bodies: object) -> bool:
    """The caller passed a token of its own (the app-level token of apps.connections.open, say)."""
    return any(isinstance(body, dict) and body.get("token") for body in bodies)


def _channel_of(*bodies: object) -> str | None:
    for body in bodies:
        if isinstance(body, dict) and body.get("channel"):
            return str(body["channel"])
    return None


class LimitedWebClient(AsyncWebClient):
    """An AsyncWebClient that counts every write against the shared limiter (no limiter: a plain client)."""

    def __init__(
        self,
        *args: Any,
        limiter: SlackRateLimiter | None = None,
        patience_seconds: float = PATIENCE_SECONDS,
        tokens: BotTokens | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.limiter = limiter
        self.patience_seconds = patience_seconds
        # Without a token of its own, each call takes the acting installation's (multi-workspace mode).
        self.tokens = tokens
        self.team: str | None = self.default_params.get("team_id")
        if limiter is not None:
            # The limiter waits out 429s for every caller at once; the SDK's handler would wait for one call alone.
            self.retry_handlers = [h for h in self.retry_handlers if not isinstance(h, AsyncRateLimitErrorRetryHandler)]

    @classmethod
    def like(
        cls, client: AsyncWebClient, limiter: SlackRateLimiter | None, *, patience_seconds: float = PATIENCE_SECONDS
    ) -> LimitedWebClient:
        """The same connection settings, token and team as `client` (as Bolt copies its client)."""
        return cls(
            token=client.token,
            base_url=client.base_url,
            timeout=client.timeout,
            ssl=client.ssl,
            proxy=client.proxy,
            session=client.session,
            trust_env_in_session=client.trust_env_in_session,
            headers=client.headers,
            team_id=client.default_params.get("team_id"),
            logger=client.logger,
            retry_handlers=list(client.retry_handlers),
            limiter=limiter,
            patience_seconds=patience_seconds,
            tokens=getattr(client, "tokens", None),
        )

    async def api_call(
        self,
        api_method: str,
        *,
        http_verb: str = "POST",
        files: dict | None = None,
        data: dict | FormData | None = None,
        params: dict | None = None,
        json: dict | None = None,
        headers: dict | None = None,
        auth: dict | None = None,
    ) -> AsyncSlackResponse:
        # One place, so no sender can forget: unfurling off, and every text field through the one
        # escaping rule (bot/slack/outgoing.py).
        json, data = without_unfurls(api_method, json, data)
        json, data, params = guard(api_method, json, data, params)
        tenant = acting()
        if self.token is None and self.tokens is not None and auth is None and not _names_a_token(params, json, data):
            headers = {**(headers or {}), "Authorization": f"Bearer {await self._token_for(tenant)}"}

        async def call() -> AsyncSlackResponse:
            metrics().slack_calls.labels(method=api_method).inc()
            return await super(LimitedWebClient, self).api_call(
                api_method,
                http_verb=http_verb,
                files=files,
                data=data,
                params=params,
                json=json,
                headers=dict(headers) if headers is not None else None,
                auth=auth,
            )

        limiter = self.limiter
        if limiter is None:
            return await call()
        scope = _scope.get()
        team = scope.team if scope is not None else (tenant.team if tenant is not None else self.team)
        urgent: Urgency = scope.urgent if scope is not None else False
        bucket = bucket_method(api_method, _channel_of(json, data, params))
        counted = limiter.counts(api_method)
        give_up_at = time.monotonic() + self.patience_seconds
        while True:
            admitted = scope is not None and scope.admit(api_method)
            if not admitted and counted:
                await self._acquire(team, bucket, urgent)
            try:
                return await call()
            except SlackApiError as exc:
                if not is_rate_limited(exc):
                    raise
                metrics().slack_rate_limited.labels(method=api_method).inc()
                seconds = retry_after_seconds(exc.response.headers)
                if counted:
                    await self._pause(team, bucket, seconds)
                if admitted or time.monotonic() + seconds > give_up_at:
                    raise  # the caller who took the slot retries itself; or patience ran out
                log.info("Slack rate-limited %s; trying again in %.1f s", api_method, seconds)
                if not counted:
                    await asyncio.sleep(seconds or UNCOUNTED_RETRY_SECONDS)

    async def _token_for(self, tenant: Tenant | None) -> str:
        assert self.tokens is not None
        if tenant is None:
            raise NotInstalled(None)
        token = await self.tokens.bot_token(tenant)
        if not token:
            raise NotInstalled(tenant.label)
        return token

    async def _acquire(self, team: str | None, bucket: str, urgent: Urgency, *, wait: bool = True) -> None:
        assert self.limiter is not None
        try:
            if wait:
                await self.limiter.acquire(team, bucket, urgent=urgent)
                return
            busy = await self.limiter.try_acquire(
                team, bucket, urgent=urgent if isinstance(urgent, bool) else await urgent()
            )
            if busy > 0:
                raise SlotBusy(bucket, busy)
        except RedisError as exc:  # Slack writes must not stop because the limiter's Redis is away
            log.warning("rate limiter unavailable (%s); calling Slack %s without it", exc, bucket)

    async def _pause(self, team: str | None, bucket: str, seconds: float) -> None:
        assert self.limiter is not None
        try:
            await self.limiter.pause(team, bucket, seconds)
        except RedisError as exc:
            log.warning("rate limiter unavailable (%s); waiting out Slack's %.1f s alone", exc, seconds)
            await asyncio.sleep(seconds)


async def take_slots(
    client: AsyncWebClient,
    team: str | None,
    methods: str | tuple[str, ...],
    fn: Callable[[], Awaitable[T]],
    *,
    urgent: Urgency = False,
    patience_seconds: float = PATIENCE_SECONDS,
    wait: bool = True,
    channel: str | None = None,
) -> T:
    """`await fn()` once a slot is free in every bucket it uses, those calls admitted (`channel`:
    the bucket of a method Slack counts per channel, such as chat.postMessage).

    `fn` runs after the wait, so it can build what it sends from the newest state. A 429
    pauses the bucket and `fn` runs again after the pause (within `patience_seconds`).
    `urgent` calls (final states) may use the slots routine calls leave free. With
    `wait=False`, a busy bucket raises SlotBusy at once (for calls that must not hold up others).
    """
    names = (methods,) if isinstance(methods, str) else methods
    limited = client if isinstance(client, LimitedWebClient) and client.limiter is not None else None
    give_up_at = time.monotonic() + patience_seconds
    while True:
        scope = _Scope(team=team, urgent=urgent)
        if limited is not None and limited.limiter is not None:
            counted = [method for method in names if limited.limiter.counts(method)]
            for method in counted:
                await limited._acquire(
                    team, bucket_method(method, channel), urgent, wait=wait
                )  # one module's two halves
            scope.admitted = counted
        token = _scope.set(scope)
        try:
            return await fn()
        except SlackApiError as exc:
            if limited is None or not is_rate_limited(exc) or time.monotonic() > give_up_at:
                raise
            # The client paused the bucket; the next acquire waits the pause out.
        finally:
            _scope.reset(token)


def limit_every_write(client: LimitedWebClient) -> Callable[..., Awaitable[None]]:
    """A Bolt global middleware: each request's client becomes a limited one on `client`'s limiter."""

    async def middleware(
        context: Any, body: dict[str, Any], next: Callable[[], Awaitable[None]]
    ) -> None:  # `next`: Bolt passes arguments by name
        plain = context.get("client")
        if plain is not None and not isinstance(plain, LimitedWebClient):
            limited = LimitedWebClient.like(plain, client.limiter, patience_seconds=client.patience_seconds)
            # An org-wide install's events name no team in their authorization: count the listener's
            # writes against the workspace the event is in, not a bucket every workspace shares.
            limited.team = limited.team or Tenant.of_context(context, body).team
            context["client"] = limited
        await next()

    return middleware
