"""Thread messages. Continuations and steering arrive with later issues; for now every
message is acknowledged and ignored, including our own and edit/delete noise."""
from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp

from ..services import Services


def register(app: AsyncApp, services: Services) -> None:
    @app.event("message")
    async def on_message(event: dict[str, Any]) -> None:
        # Subtypes (message_changed, message_deleted, bot_message…) are noise for us, and a
        # plain thread reply does nothing until continuation runs land.
        return None
