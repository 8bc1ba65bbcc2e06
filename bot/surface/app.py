"""Building the Bolt app and its Slack client from settings.

Single-token mode (the default): one client with SLACK_BOT_TOKEN, and `authorize` answers with the
identity `auth.test` gave at start-up. Multi-workspace mode (SLACK_CLIENT_ID and SLACK_CLIENT_SECRET
set): Bolt's OAuth flow (oauth.py) installs the app and authorizes each event from the installation
store; the shared client has no token of its own and uses the token of the run it acts for.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.web.async_client import AsyncWebClient

from bot.exceptions import UnverifiedHttpMode
from bot.services import Services
from bot.settings import Settings
from bot.slack.client import BotTokens, LimitedWebClient, limit_every_write
from bot.slack.ratelimit import SlackRateLimiter
from bot.slack.retries import retry_handlers
from jobs.keyspace.connection import connect_async
from jobs.process.logcontext import log_context

from .listeners import register
from .self_events import IgnoringOwnEventsButDeletions

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
# The limiter is a courtesy (bot/slack/client.py): with Redis away, a write waits this long for it,
# not the whole retry window run state waits, before going to Slack without it.
LIMITER_RETRY_SECONDS = 5.0


def slack_client(settings: Settings, tokens: BotTokens | None = None) -> AsyncWebClient:
    """The process's shared client: SLACK_BOT_TOKEN's, or with `tokens` (multi-workspace mode) no
    token of its own, each call taking the token of the installation it acts for."""
    # Connection errors are retried for reads and edits, never for posts (bot/slack/retries.py).
    handlers = retry_handlers(SLACK_429_RETRIES)
    # Every Slack write waits for the shared per-workspace limiter and outlasts 429s (slack_client.py).
    limiter = (
        SlackRateLimiter(
            connect_async(settings.redis_url, max_connections=LIMITER_CONNECTIONS, retry_window=LIMITER_RETRY_SECONDS)
        )
        if settings.redis_url
        else None
    )
    return LimitedWebClient(
        token=None if tokens is not None else settings.secret("slack_bot_token"),
        base_url=settings.slack_api_url,
        retry_handlers=handlers,
        limiter=limiter,
        tokens=tokens,
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
    """Every line logged while handling this request names its workspace (jobs.process.logcontext)."""
    team = (body.get("team_id") or (body.get("team") or {}).get("id")) if isinstance(body, dict) else None
    with log_context(team=team if isinstance(team, str) else None):
        await next()


def build_app(
    settings: Settings,
    services: Services,
    client: AsyncWebClient,
    identity: AuthorizeResult | None = None,
    *,
    oauth: AsyncOAuthFlow | None = None,
    installations: AsyncInstallationStore | None = None,
) -> AsyncApp:
    """Single-token mode with the start-up `identity`, or multi-workspace mode with the `oauth` flow."""
    secret = settings.secret("slack_signing_secret")
    if not settings.socket_mode and secret is None:
        # Anyone who can reach the port could forge commands, stops and spending mentions.
        raise UnverifiedHttpMode()
    common = {
        "client": client,
        "signing_secret": secret or "",
        # Socket Mode frames are not signed (the bot opened the connection); HTTP requests always are.
        "request_verification_enabled": not settings.socket_mode,
        # Our own filter instead (self_events.py): Bolt's drops a person's deletion of our report.
        "ignoring_self_events_enabled": False,
    }
    if oauth is not None:
        app = AsyncApp(oauth_flow=oauth, **common)  # type: ignore[arg-type]
    else:
        assert identity is not None

        async def authorize(**_: object) -> AuthorizeResult:
            return identity  # one workspace, one token: no auth.test per event

        app = AsyncApp(authorize=authorize, **common)  # type: ignore[arg-type]
    app.use(IgnoringOwnEventsButDeletions())
    if isinstance(client, LimitedWebClient):
        app.use(limit_every_write(client))  # Bolt gives each listener a fresh client: make it a limited one
    app.use(_name_the_workspace)
    register(app, services, installations)
    return app
