"""Which of our own events the app hears: none, except a deletion of one of our messages.

Bolt's own filter (`ignoring_self_events_enabled`) drops every event whose user is our bot, and
Slack names the deleted message's author as the event's user: a person deleting the bot's report
(`message_deleted` with the report as `previous_message`) never reached the listener that forgets
its thread. This filter is Bolt's, with that one exception: the bot still never answers, steers
or continues from its own messages or edits.
"""

from __future__ import annotations

from typing import Any

from slack_bolt.authorization import AuthorizeResult
from slack_bolt.middleware.ignoring_self_events.async_ignoring_self_events import AsyncIgnoringSelfEvents

__all__ = ["IgnoringOwnEventsButDeletions", "is_deletion"]


def is_deletion(event: dict[str, Any]) -> bool:
    """A message deleted: `message_deleted`, or a thread's first message replaced by a tombstone."""
    if event.get("type") != "message":
        return False
    if event.get("subtype") == "message_deleted":
        return True
    changed = event.get("message")
    return (
        event.get("subtype") == "message_changed"
        and isinstance(changed, dict)
        and changed.get("subtype") == "tombstone"
    )


class IgnoringOwnEventsButDeletions(AsyncIgnoringSelfEvents):
    """Bolt's self-event filter, letting through the deletion of a message we wrote."""

    @classmethod
    def _is_self_event(
        cls, auth_result: AuthorizeResult, user_id: str | None, bot_id: str | None, body: dict[str, Any]
    ) -> bool:
        event = body.get("event")
        if isinstance(event, dict) and is_deletion(event):
            return False  # who wrote it does not matter: its thread's data is to be forgotten
        return bool(super()._is_self_event(auth_result, user_id, bot_id, body))
