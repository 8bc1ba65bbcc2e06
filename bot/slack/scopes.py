"""The bot token scopes Deepthread needs, each with the Web API methods that need it.

`manifest.yml` asks for exactly these (a test holds the two together), and
`deepthread doctor --live` compares them with what the installed token reports.
"""

from __future__ import annotations

REQUIRED_BOT_SCOPES: dict[str, str] = {
    "app_mentions:read": "app_mention events: the questions",
    "chat:write": (
        "chat.postMessage, chat.update, chat.postEphemeral, assistant.threads.setStatus, "
        "chat.startStream, chat.appendStream, chat.stopStream (streamed progress)"
    ),
    "pins:write": "pins.add: the report is pinned",
    "reactions:read": "reaction_added events: a stop reaction",
    "reactions:write": "reactions.add: a steering note is acknowledged with a reaction",
    "users:read": "users.info: whether someone stopping another person's run is a workspace admin",
    "channels:history": "message.channels events and thread replies in public channels",
    "groups:history": "message.groups events and thread replies in private channels",
    "im:history": "message.im events: direct messages",
    "files:read": "files shared in the thread",
    "files:write": "files.upload (v2) and files.delete: a report too long for one message, and charts",
    "commands": "the /deepthread slash command: usage and budgets",
    "search:read.public": "assistant.search.context: search_workspace finds public-channel messages the requester can see",
    "search:read.files": "assistant.search.context: search_workspace finds files the requester can see",
    "search:read.users": "assistant.search.context: search results name their authors",
}
# Asked for only with DEEPTHREAD_WORKSPACE_SEARCH=dm (add them to manifest.yml then; each user consents
# in Slack): private channels, group DMs and DMs, cited only in a DM with the requester.
OPTIONAL_BOT_SCOPES: dict[str, str] = {
    "search:read.private": "search_workspace in private channels (DEEPTHREAD_WORKSPACE_SEARCH=dm)",
    "search:read.mpim": "search_workspace in group DMs (DEEPTHREAD_WORKSPACE_SEARCH=dm)",
    "search:read.im": "search_workspace in DMs (DEEPTHREAD_WORKSPACE_SEARCH=dm)",
}
