"""The job runtime a worker (or `ask`, or `eval`) runs research with, built from settings.

A run in a Slack thread reads that thread's files and messages with its installation's bot token
(SLACK_BOT_TOKEN, or in multi-workspace mode the token the installation store keeps for the run's
workspace), so the runtime is handed a factory for the thread's workspace; the settings themselves
know nothing of Slack's client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import cache, partial

from redis import Redis
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from agent import EarlierResearch, ThreadWorkspace, WorkspaceSearch
from bot.desk.earlier import SlackEarlierResearch
from bot.exceptions import TokenKeyMismatch
from bot.settings import Settings
from bot.slack.installations import InstallationTokens, TokenCipher
from bot.slack.tenancy import Tenant
from bot.slack.thread_log import ThreadLog
from bot.slack.workspace import PacedReading, SlackWorkspace
from bot.slack.workspace_search import SlackWorkspaceSearch
from jobs import JobRuntime, Run
from jobs.keyspace.connection import connect

__all__ = ["job_runtime"]

log = logging.getLogger(__name__)

TokenFor = Callable[[Run], str | None]
# Slack's search is rate-limited per workspace (10+ a minute for most teams): a 429 is waited out this often.
SEARCH_429_RETRIES = 2


def job_runtime(settings: Settings) -> JobRuntime:
    token_for = _token_source(settings)
    return JobRuntime(
        agent=settings.agent_config(),
        anthropic_api_key=settings.secret("anthropic_api_key"),
        anthropic_base_url=settings.anthropic_base_url,
        model_provider=settings.provider_config(),
        redis_url=settings.redis_url,
        lock_seconds=settings.run_lock_seconds,
        workspace_for=partial(_workspace_for, settings, token_for),
        model_limits=settings.model_limits(),
        bulky_retention_seconds=int(settings.bulky_retention_days * 86_400),
        search_for=partial(_search_for, settings, token_for),
        plan_expiry_seconds=settings.plan_expiry_minutes * 60,
        model_silence=settings.model_silence(),
        earlier_for=partial(_earlier_for, settings, token_for),
    )


def _token_source(settings: Settings) -> TokenFor:
    """The bot token a run reads its thread with: the one token, or its installation's."""
    key = settings.secret("token_key")
    if not (settings.multi_workspace and key and settings.redis_url):
        token = settings.secret("slack_bot_token")
        return lambda _run: token
    tokens = InstallationTokens(connect(settings.redis_url), TokenCipher(key))

    def installation_token(run: Run) -> str | None:
        try:
            return tokens.bot_token(Tenant.of_run(run))
        except TokenKeyMismatch as exc:
            log.error("run %s: %s", run.id, exc)
            return None

    return installation_token


def _workspace_for(settings: Settings, token_for: TokenFor, run: Run) -> ThreadWorkspace | None:
    """A run in a Slack thread reads that thread's files and messages with its installation's token
    (none: the app was uninstalled, so the run has no thread tools)."""
    if not (run.channel and run.thread_ts):
        return None
    token = token_for(run)
    if not token:
        return None
    paced = None
    if settings.slack_distributed == "on" and settings.redis_url:  # Slack allows it one thread read a minute
        log_ = ThreadLog(connect(settings.redis_url), int(settings.retention_days * 86_400))
        paced = PacedReading(log_, Tenant.of_run(run).team)
    client = AsyncWebClient(token=token, base_url=settings.slack_api_url)
    return SlackWorkspace(client, run.channel, run.thread_ts, paced=paced)


def _search_for(settings: Settings, token_for: TokenFor, run: Run) -> WorkspaceSearch | None:
    """The team's Slack, searched as the requester with the run's action token, the client holding its
    installation's bot token (None when search is off or the app was uninstalled)."""
    if settings.workspace_search == "off" or not (run.channel and run.thread_ts):
        return None
    token = token_for(run)
    if not token:
        return None
    retry: list[AsyncRetryHandler] = [AsyncRateLimitErrorRetryHandler(max_retry_count=SEARCH_429_RETRIES)]
    client = AsyncWebClient(token=token, base_url=settings.slack_api_url, retry_handlers=retry)
    return SlackWorkspaceSearch(client, run.action_token)


def _earlier_for(settings: Settings, token_for: TokenFor, run: Run) -> EarlierResearch | None:
    """The team's library as this run may use it: asked with its installation's token whether everyone in
    its thread may read each report (none: the terminal, or the app was uninstalled)."""
    if not (run.channel and run.thread_ts and settings.redis_url):
        return None
    token = token_for(run)
    if not token:
        return None
    client = AsyncWebClient(token=token, base_url=settings.slack_api_url)
    return SlackEarlierResearch(_library_redis(settings.redis_url), client, run)


@cache
def _library_redis(url: str) -> Redis:
    """One connection pool per worker process for the library's reads, whatever the runs it carries."""
    return connect(url)
