"""The job runtime a worker (or `ask`, or `eval`) runs research with, built from settings.

A run in a Slack thread reads that thread's files and messages with the bot token, so the runtime
is handed a factory for the thread's workspace; the settings themselves know nothing of Slack's
client.
"""

from __future__ import annotations

from functools import partial

from slack_sdk.web.async_client import AsyncWebClient

from agent import ThreadWorkspace
from bot.settings import Settings
from bot.slack.workspace import SlackWorkspace
from jobs import JobRuntime, Run

__all__ = ["job_runtime"]


def job_runtime(settings: Settings) -> JobRuntime:
    return JobRuntime(
        agent=settings.agent_config(),
        anthropic_api_key=settings.secret("anthropic_api_key"),
        anthropic_base_url=settings.anthropic_base_url,
        model_provider=settings.provider_config(),
        redis_url=settings.redis_url,
        lock_seconds=settings.run_lock_seconds,
        workspace_for=partial(_workspace_for, settings),
    )


def _workspace_for(settings: Settings, run: Run) -> ThreadWorkspace | None:
    """A run in a Slack thread reads that thread's files and messages with the bot token."""
    token = settings.secret("slack_bot_token")
    if not (token and run.channel and run.thread_ts):
        return None
    return SlackWorkspace(AsyncWebClient(token=token, base_url=settings.slack_api_url), run.channel, run.thread_ts)
