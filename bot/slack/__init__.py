"""Slack's Web API as Deepthread uses it: the client every write goes through, and Slack's formats.

Owns the rate-limited client and its shared per-workspace limiter, which installation a call acts
for and its token (tenancy, installations, the OAuth state store), the bot scopes we need, the
events we accept (as pydantic models), Markdown → mrkdwn and its escaping, the thread as the
engine's workspace (files and messages), and short replies. It knows Slack and nothing of ours
above it: it must not import publishing, the desk, the surface or the command line.
"""
