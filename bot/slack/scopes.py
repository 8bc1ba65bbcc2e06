"""The bot token scopes Deepthread needs, each with the Web API methods that need it.

`manifest.yml` asks for exactly these (a test holds the two together), and
`deepthread doctor --live` compares them with what the installed token reports.
"""

from __future__ import annotations

REQUIRED_BOT_SCOPES: dict[str, str] = {
    "app_mentions:read": "app_mention events: the questions",
    "assistant:write": "added by declaring the app an agent (agent_view in manifest.yml): agent sessions",
    "canvases:read": "canvases.sections.lookup: a report section found in its canvas",
    "canvases:write": "canvases.create, canvases.edit, canvases.access.set: a report too long for one message, by section",
    "chat:write": (
        "chat.postMessage, chat.update, chat.postEphemeral, assistant.threads.setStatus, "
        "chat.startStream, chat.appendStream, chat.stopStream (streamed progress), "
        "agents.sessions.setStatus (the thread as an agent session)"
    ),
    "pins:write": "pins.add: the report is pinned",
    "reactions:read": "reaction_added events: a stop reaction",
    "reactions:write": "reactions.add: a steering note is acknowledged with a reaction",
    "users:read": (
        "users.info: whether someone is an admin of this workspace (stop, go deeper, budgets), and the names "
        "usage shows"
    ),
    "channels:read": "conversations.info: whether a channel is public, before usage shows its questions",
    "groups:read": "conversations.info and conversations.members: whether the viewer is in a private channel",
    "im:read": "conversations.info and conversations.members for direct messages",
    "channels:history": "message.channels events and thread replies in public channels",
    "groups:history": "message.groups events and thread replies in private channels",
    "im:history": "message.im events: direct messages",
    "files:read": "files shared in the thread (files.info), and a canvas's link",
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
