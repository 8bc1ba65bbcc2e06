"""Building the Bolt app and its Slack client from settings."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler, async_default_handlers
from slack_sdk.web.async_client import AsyncWebClient

from bot.services import Services
from bot.settings import Settings
from bot.slack.client import LimitedWebClient, limit_every_write
from bot.slack.ratelimit import SlackRateLimiter
from jobs.connection import connect_async
from jobs.logcontext import log_context

from .listeners import register

log = logging.getLogger(__name__)


class _OwnClientNotice(logging.Filter):
    """Bolt warns that SLACK_BOT_TOKEN goes unused when it is given a client and `authorize`;
    that is our design (one client with retry handlers, no auth.test per event), not a fault."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token`" not in record.getMessage()


logging.getLogger("slack_bolt.AsyncApp").addFilter(_OwnClientNotice())

# 429s are retried after Retry-After this many times before the publisher retries later itself.
SLACK_429_RETRIES = 3


# The limiter's Redis connections: a burst of writes queues for them rather than skipping the limiter.
LIMITER_CONNECTIONS = 50


def slack_client(settings: Settings) -> AsyncWebClient:
    handlers = async_default_handlers() + [AsyncRateLimitErrorRetryHandler(max_retry_count=SLACK_429_RETRIES)]
    # Every Slack write waits for the shared per-workspace limiter and outlasts 429s (slack_client.py).
    limiter = (
        SlackRateLimiter(connect_async(settings.redis_url, max_connections=LIMITER_CONNECTIONS))
        if settings.redis_url
        else None
    )
    return LimitedWebClient(
        token=settings.secret("slack_bot_token"),
        base_url=settings.slack_api_url,
        retry_handlers=handlers,
        limiter=limiter,
    )


async def identify(client: AsyncWebClient) -> AuthorizeResult:
    """Ask Slack who we are once at start-up (also proves the token works)."""
    answer = await client.auth_test()
    return AuthorizeResult(
        enterprise_id=answer.get("enterprise_id"),
        team_id=answer.get("team_id"),
        bot_token=client.token,
        bot_id=answer.get("bot_id"),
        bot_user_id=answer.get("user_id"),
    )


async def _name_the_workspace(body: dict[str, Any], next: Callable[[], Awaitable[None]]) -> None:
    """Every line logged while handling this request names its workspace (jobs.logcontext)."""
    team = (body.get("team_id") or (body.get("team") or {}).get("id")) if isinstance(body, dict) else None
    with log_context(team=team if isinstance(team, str) else None):
        await next()


def build_app(settings: Settings, services: Services, client: AsyncWebClient, identity: AuthorizeResult) -> AsyncApp:
    async def authorize(**_: object) -> AuthorizeResult:
        return identity  # one workspace, one token: no auth.test per event

    app = AsyncApp(
        client=client,
        signing_secret=settings.secret("slack_signing_secret") or "",
        authorize=authorize,
        # Socket Mode frames are not signed; HTTP requests are.
        request_verification_enabled=settings.slack_app_token is None,
        ignoring_self_events_enabled=True,
    )
    if isinstance(client, LimitedWebClient):
        app.use(limit_every_write(client))  # Bolt gives each listener a fresh client: make it a limited one
    app.use(_name_the_workspace)
    register(app, services)
    return app
