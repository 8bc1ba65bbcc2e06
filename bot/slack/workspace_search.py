"""The team's Slack as the engine's WorkspaceSearch: Slack's Real-time Search API
(`assistant.search.context`) acting as the requester through the triggering event's action token,
so it finds only messages and files that person can see.

Which results are private is decided by what was asked for: public channels in one call, and,
only when the run may cite them (agent/visibility.py), private channels, group DMs and DMs in a
second call whose every hit is marked private. Slack's refusals become SearchUnavailable with
what to do: a missing scope names it and the reinstall, an expired or missing token says to ask
again in a new message.
"""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from agent import SearchUnavailable, ThreadMessage, WorkspaceHit

__all__ = ["PRIVATE_TYPES", "PUBLIC_TYPES", "SEARCH_SCOPES", "SlackWorkspaceSearch"]

PUBLIC_TYPES = "public_channel"
PRIVATE_TYPES = "private_channel,mpim,im"
CONTENT_TYPES = "messages,files"
SEARCH_SCOPES = "search:read.public, search:read.files and search:read.users"
MAX_PAGE = 20  # Slack answers at most 20 results a page
THREAD_MESSAGES = 200
# Slack's answers when the action token is missing, malformed or expired (the method page lists no
# names for them; these are what such calls answer as far as known: docs/slack-app.md).
TOKEN_ERRORS = ("invalid_action_token", "expired_action_token", "missing_action_token", "not_allowed_token_type")

NO_TOKEN = (
    "Slack sent no action token with this request, and searching the team's Slack acts as the person who "
    "asked through it. Mentioning the bot in a new message gives one; if it still fails, the app may not "
    "have Slack's Real-time Search enabled (docs/slack-app.md)"
)
EXPIRED = (
    "the permission Slack gave with this request has run out (action tokens are short-lived), so the team's "
    "Slack cannot be searched again in this run; a new message in the thread starts a run with a fresh one"
)


class SlackWorkspaceSearch:
    """One request's search: the bot token, and the action token of the event that started the run."""

    def __init__(self, client: AsyncWebClient, action_token: SecretStr | None) -> None:
        self._client = client
        self._token = action_token

    async def search(self, query: str, *, private: bool, limit: int) -> list[WorkspaceHit]:
        if self._token is None:
            raise SearchUnavailable("token", NO_TOKEN)
        hits = await self._ask(query, PUBLIC_TYPES, limit, private=False)
        if private:
            try:
                hits += await self._ask(query, PRIVATE_TYPES, limit, private=True)
            except SearchUnavailable as exc:
                if exc.kind != "scope":  # without the private scopes, public results are still results
                    raise
        return hits[: max(limit, 0) * (2 if private else 1)]

    async def _ask(self, query: str, channel_types: str, limit: int, *, private: bool) -> list[WorkspaceHit]:
        assert self._token is not None
        try:
            answer = await self._client.assistant_search_context(
                query=query,
                action_token=self._token.get_secret_value(),
                channel_types=channel_types,
                content_types=CONTENT_TYPES,
                limit=min(limit, MAX_PAGE),
            )
        except SlackApiError as exc:
            raise _refusal(exc) from None
        results = answer.get("results") or {}
        hits = [_message(m, private) for m in results.get("messages") or [] if isinstance(m, dict)]
        hits += [_file(f, private) for f in results.get("files") or [] if isinstance(f, dict)]
        return [h for h in hits if h is not None]

    async def thread(self, channel: str, ts: str) -> list[ThreadMessage]:
        try:
            answer = await self._client.conversations_replies(channel=channel, ts=ts, limit=THREAD_MESSAGES)
        except SlackApiError as exc:
            error = exc.response.get("error", "unknown_error")
            raise SearchUnavailable("refused", f"Slack refused to open that thread ({error})") from None
        return [
            ThreadMessage(
                number=n,
                ts=str(raw.get("ts", "0")),
                author=str(raw.get("user") or raw.get("bot_id") or ""),
                text=str(raw.get("text", "")),
                is_bot=bool(raw.get("bot_id")),
            )
            for n, raw in enumerate(answer.get("messages") or [], start=1)
        ]


def _refusal(exc: SlackApiError) -> SearchUnavailable:
    error = str(exc.response.get("error", "unknown_error"))
    if error == "missing_scope":
        needed = exc.response.get("needed") or SEARCH_SCOPES
        return SearchUnavailable(
            "scope",
            f"the bot's Slack token lacks the {needed} scope; a workspace admin reinstalls Deepthread with "
            f"{SEARCH_SCOPES} (they are in manifest.yml)",
        )
    if error in TOKEN_ERRORS:
        return SearchUnavailable("token", EXPIRED)
    return SearchUnavailable("refused", f"Slack refused the search ({error}); it may work in a later run")


def _message(raw: dict[str, Any], private: bool) -> WorkspaceHit | None:
    permalink = str(raw.get("permalink") or "")
    if not permalink:
        return None
    return WorkspaceHit(
        kind="message",
        channel=str(raw.get("channel_id") or ""),
        ts=str(raw.get("message_ts") or ""),
        author=str(raw.get("author_user_id") or ""),
        text=str(raw.get("content") or ""),
        permalink=permalink,
        private=private,
        is_bot=bool(raw.get("is_author_bot")),
    )


def _file(raw: dict[str, Any], private: bool) -> WorkspaceHit | None:
    permalink = str(raw.get("permalink") or "")
    if not permalink:
        return None
    title = str(raw.get("title") or raw.get("name") or "")
    return WorkspaceHit(
        kind="file",
        channel=str(raw.get("channel_id") or ""),
        ts=str(raw.get("date_created") or raw.get("timestamp") or ""),
        author=str(raw.get("author_user_id") or raw.get("user") or ""),
        text=str(raw.get("content") or title),
        title=title,
        permalink=permalink,
        private=private,
    )
