"""The job runtime a worker (or `ask`, or `eval`) runs research with, built from settings.

A run in a Slack thread reads that thread's files and messages with the bot token, so the runtime
is handed a factory for the thread's workspace; the settings themselves know nothing of Slack's
client.
"""

from __future__ import annotations

from functools import partial

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from agent import ThreadWorkspace, WorkspaceSearch
from bot.settings import Settings
from bot.slack.workspace import SlackWorkspace
from bot.slack.workspace_search import SlackWorkspaceSearch
from jobs import JobRuntime, Run

__all__ = ["job_runtime"]

# Slack's search is rate-limited per workspace (10+ a minute for most teams): a 429 is waited out this often.
SEARCH_429_RETRIES = 2


def job_runtime(settings: Settings) -> JobRuntime:
    return JobRuntime(
        agent=settings.agent_config(),
        anthropic_api_key=settings.secret("anthropic_api_key"),
        anthropic_base_url=settings.anthropic_base_url,
        model_provider=settings.provider_config(),
        redis_url=settings.redis_url,
        lock_seconds=settings.run_lock_seconds,
        workspace_for=partial(_workspace_for, settings),
        search_for=partial(_search_for, settings),
        plan_expiry_seconds=settings.plan_expiry_minutes * 60,
    )


def _workspace_for(settings: Settings, run: Run) -> ThreadWorkspace | None:
    """A run in a Slack thread reads that thread's files and messages with the bot token."""
    token = settings.secret("slack_bot_token")
    if not (token and run.channel and run.thread_ts):
        return None
    return SlackWorkspace(AsyncWebClient(token=token, base_url=settings.slack_api_url), run.channel, run.thread_ts)


def _search_for(settings: Settings, run: Run) -> WorkspaceSearch | None:
    """The team's Slack, searched as the requester with the run's action token (None when it is off)."""
    token = settings.secret("slack_bot_token")
    if settings.workspace_search == "off" or not (token and run.channel and run.thread_ts):
        return None
    retry: list[AsyncRetryHandler] = [AsyncRateLimitErrorRetryHandler(max_retry_count=SEARCH_429_RETRIES)]
    client = AsyncWebClient(token=token, base_url=settings.slack_api_url, retry_handlers=retry)
    return SlackWorkspaceSearch(client, run.action_token)
