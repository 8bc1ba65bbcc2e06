"""Multi-workspace mode: Slack's OAuth install flow, as Bolt runs it, on our Redis stores.

`GET /slack/install` shows the "Add to Slack" page (its link carries a signed, single-use state
and sets the state's cookie); Slack sends the installer back to `GET /slack/oauth_redirect`, where
Bolt checks the cookie and the state, exchanges the code (`oauth.v2.access`), asks `auth.test`
for the bot's id, and saves the installation in Redis with its token encrypted
(bot/slack/installations.py). From then on every event is authorized from that store, and the
publisher and the workers act for each run with its own installation's token.

The authorize URL is Slack's own (`https://slack.com/oauth/v2/authorize`), or the same path on
the host SLACK_API_URL names, so the tests' fake Slack answers the whole flow.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from redis.asyncio import Redis as AsyncRedis
from slack_bolt.authorization.async_authorize import AsyncInstallationStoreAuthorize
from slack_bolt.error import BoltError
from slack_bolt.oauth.async_callback_options import AsyncFailureArgs
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.oauth.installation_store import Installation
from slack_sdk.web.async_client import AsyncWebClient

from bot.settings import Settings
from bot.slack.admission import InstallAllowlist, refusal_page
from bot.slack.installations import RedisInstallationStore, TokenCipher
from bot.slack.oauth_state import STATE_SECONDS, RedisOAuthStateStore
from bot.slack.scopes import REQUIRED_BOT_SCOPES
from jobs.budgets.spend import Spend

__all__ = [
    "AdmittingOAuthFlow",
    "InstallRefused",
    "INSTALL_PATH",
    "REDIRECT_PATH",
    "authorization_url",
    "installation_store",
    "oauth_flow",
]

log = logging.getLogger(__name__)

INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
AUTHORIZE_PATH = "/oauth/v2/authorize"


def authorization_url(api_url: str) -> str:
    """Slack's authorize page on the host of SLACK_API_URL (https://slack.com/api/ → slack.com)."""
    parts = urlsplit(api_url)
    return f"{parts.scheme}://{parts.netloc}{AUTHORIZE_PATH}"


def installation_store(settings: Settings, redis: AsyncRedis) -> RedisInstallationStore:
    key = settings.secret("token_key")
    assert key, "doctor refuses multi-workspace mode without DEEPTHREAD_TOKEN_KEY"
    return RedisInstallationStore(redis, TokenCipher(key))


class InstallRefused(BoltError):
    """A workspace outside DEEPTHREAD_INSTALL_ALLOW completed Slack's flow: nothing is saved."""

    def __init__(self, installation: Installation) -> None:
        super().__init__(f"install refused for {installation.enterprise_id}/{installation.team_id}")
        self.page = refusal_page(installation.team_id, installation.team_name, installation.enterprise_id)


class AdmittingOAuthFlow(AsyncOAuthFlow):
    """Bolt's flow, saving only installs the allowlist admits, and giving a newly installed workspace
    its monthly budget (DEEPTHREAD_NEW_WORKSPACE_BUDGET_USD) before its first question."""

    allowlist: InstallAllowlist = InstallAllowlist()
    new_workspace: Callable[[str], Awaitable[None]] | None = None

    async def store_installation(self, request: AsyncBoltRequest, installation: Installation) -> None:
        org_wide = bool(installation.is_enterprise_install)
        if not self.allowlist.admits(installation.team_id, installation.enterprise_id, org_wide=org_wide):
            log.warning(
                "refused an install from %s/%s: not in DEEPTHREAD_INSTALL_ALLOW",
                installation.enterprise_id,
                installation.team_id,
            )
            raise InstallRefused(installation)
        store = self.settings.installation_store
        known = await store.async_find_bot(
            enterprise_id=installation.enterprise_id, team_id=installation.team_id, is_enterprise_install=org_wide
        )
        await super().store_installation(request, installation)
        if known is None and self.new_workspace is not None:
            # An org-wide install names no workspace: the org's id holds the budget its workspaces start with.
            await self.new_workspace((installation.enterprise_id if org_wide else installation.team_id) or "")


def _refusing(default: Callable[[AsyncFailureArgs], Awaitable[BoltResponse]]) -> Callable[..., Awaitable[BoltResponse]]:
    async def failure(args: AsyncFailureArgs) -> BoltResponse:
        if isinstance(args.error, InstallRefused):
            return BoltResponse(status=403, body=args.error.page, headers={"Content-Type": "text/html; charset=utf-8"})
        return await default(args)

    return failure


def oauth_flow(
    settings: Settings, store: RedisInstallationStore, redis: AsyncRedis, spend: Spend | None = None
) -> AsyncOAuthFlow:
    client_id, client_secret = settings.slack_client_id, settings.secret("slack_client_secret")
    state_secret = settings.secret("slack_state_secret")
    assert client_id and client_secret and state_secret, "doctor refuses an incomplete OAuth configuration"
    # Bolt's own calls (oauth.v2.access, auth.test, token rotation) go where SLACK_API_URL says.
    client = AsyncWebClient(base_url=settings.slack_api_url)
    oauth = AsyncOAuthSettings(
        client_id=client_id,
        client_secret=client_secret,
        scopes=sorted(REQUIRED_BOT_SCOPES),  # the manifest's bot scopes (a test holds the two together)
        user_scopes=[],  # no user tokens: the bot acts as itself
        redirect_uri=settings.slack_redirect_uri,  # None: Slack uses the app's one configured Redirect URL
        install_path=INSTALL_PATH,
        redirect_uri_path=REDIRECT_PATH,
        authorization_url=authorization_url(settings.slack_api_url),
        installation_store=store,
        installation_store_bot_only=True,
        state_store=RedisOAuthStateStore(redis, state_secret, expiration_seconds=STATE_SECONDS),
        state_expiration_seconds=STATE_SECONDS,
        logger=log,
    )
    # Bolt's authorize asks auth.test on every event; remembering the answer per token (in this
    # process) saves a Slack call per event. An uninstalled workspace's bot is gone from the store
    # first, so a remembered answer is never used for it.
    oauth.authorize = AsyncInstallationStoreAuthorize(
        logger=log,
        installation_store=store,
        client_id=client_id,
        client_secret=client_secret,
        bot_only=True,
        cache_enabled=True,
        client=client,
    )
    flow = AdmittingOAuthFlow(client=client, logger=log, settings=oauth)
    flow.allowlist = InstallAllowlist.parse(settings.install_allow)
    flow.failure_handler = _refusing(flow.failure_handler)
    budget = settings.new_workspace_budget_usd
    if spend is not None and budget is not None:

        async def new_workspace(team: str) -> None:
            if not team:
                return
            if team.startswith("E"):  # an Enterprise Grid org's id: each of its workspaces adopts it
                if await asyncio.to_thread(spend.budget_new_org, team, budget):
                    log.info("each workspace of org %s starts with a monthly budget of $%.2f", team, budget)
            elif await asyncio.to_thread(spend.budget_new_workspace, team, budget):
                log.info("workspace %s starts with a monthly budget of $%.2f", team, budget)

        flow.new_workspace = new_workspace
    return flow
