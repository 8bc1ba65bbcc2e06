"""Listeners grouped by what they react to; each group registers itself on the app."""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore

from bot.services import Services

from . import actions, commands, feedback, home, mentions, messages, reactions, sessions, uninstall


def register(app: AsyncApp, services: Services, installations: AsyncInstallationStore | None = None) -> None:
    mentions.register(app, services)
    messages.register(app, services)
    reactions.register(app, services)
    sessions.register(app, services)
    actions.register(app, services)
    feedback.register(app, services)
    commands.register(app, services)
    home.register(app, services)
    uninstall.register(app, services, installations)
