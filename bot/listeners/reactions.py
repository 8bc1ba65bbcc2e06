"""Reactions. Stopping a run by reaction arrives with the run-control issue; until then
reactions are acknowledged and ignored so Slack does not retry them."""
from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncApp

from ..services import Services


def register(app: AsyncApp, services: Services) -> None:
    @app.event("reaction_added")
    async def on_reaction(event: dict[str, Any]) -> None:
        return None
