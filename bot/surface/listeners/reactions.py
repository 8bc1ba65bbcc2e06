"""The stop reaction on a run's progress or report message; every other reaction is ignored."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.services import Services
from bot.slack.events import ReactionEvent
from bot.surface.steering import stop_run


def register(app: AsyncApp, services: Services) -> None:
    @app.event("reaction_added")
    async def on_reaction(event: dict[str, Any], client: AsyncWebClient) -> None:
        try:
            reaction = ReactionEvent.model_validate(event)
        except ValidationError:
            return
        if reaction.reaction != services.stop_reaction or reaction.user == services.bot_user_id:
            return
        state = await services.runs.run_of_message(reaction.item.channel, reaction.item.ts)
        if state is not None:
            await stop_run(services, client, state, reaction.user, reaction.item.channel)
