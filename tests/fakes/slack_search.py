"""Slack's Real-time Search (`assistant.search.context`) for the fake Slack: it searches the fake's
own messages and shared files, as the user whose action token the call carries.

Rules held as Slack states them: a bot-token call needs the `action_token` of an event (issued here
by `issue_action_token`, short-lived); `channel_types` defaults to public channels and each type
needs its scope (`search:read.public`, `.private`, `.mpim`, `.im`; files need `search:read.files`);
at most 20 results a page; results are what the acting user can see: every public channel, and a
private channel or DM only if the user is a member (`set_members`). Where the docs are silent the
fake assumes (docs/slack-app.md): types whose scope is missing are left out silently while another
requested type is granted (none granted: `missing_scope`); an unknown or expired token answers
`invalid_action_token`; file results carry `file_id`, `title`, `channel_id`, `author_user_id`,
`date_created`, `permalink` and `content`. Registered on FakeSlack by `register(fake)`.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import TYPE_CHECKING, Any

from tests.fakes.slack_records import SlackError, _str

if TYPE_CHECKING:
    from tests.fakes.slack import FakeSlack

MAX_LIMIT = 20
TOKEN_SECONDS = 600.0  # how long an issued action token is honoured (Slack: "short-lived")
TYPE_SCOPES = {
    "public_channel": "search:read.public",
    "private_channel": "search:read.private",
    "mpim": "search:read.mpim",
    "im": "search:read.im",
}
WORD = re.compile(r"[a-z0-9]{3,}")


def _state(fake: FakeSlack) -> dict[str, Any]:
    return fake.__dict__.setdefault("search_state", {"tokens": {}, "members": {}, "queries": []})


def register(fake: FakeSlack) -> None:
    fake._methods["assistant.search.context"] = lambda p: search(fake, p)


def issue_action_token(fake: FakeSlack, user: str, *, seconds: float = TOKEN_SECONDS) -> str:
    """The action token Slack puts on an event `user` triggered."""
    token = f"{int(time.time())}.{secrets.randbelow(10**6)}.{secrets.token_hex(8)}"
    with fake._lock:
        _state(fake)["tokens"][token] = (user, time.monotonic() + seconds)
    return token


def expire_action_tokens(fake: FakeSlack) -> None:
    with fake._lock:
        tokens = _state(fake)["tokens"]
        for token, (user, _) in list(tokens.items()):
            tokens[token] = (user, 0.0)


def set_members(fake: FakeSlack, channel: str, users: set[str]) -> None:
    """Who is in a private channel or DM (public channels are visible to everyone)."""
    with fake._lock:
        _state(fake)["members"][channel] = set(users)


def queries(fake: FakeSlack) -> list[dict[str, Any]]:
    """Every search asked: user, channel types granted, query."""
    with fake._lock:
        return list(_state(fake)["queries"])


def _kind(channel: str) -> str:
    return {"C": "public_channel", "G": "private_channel", "D": "im"}.get(channel[:1], "public_channel")


def _visible(fake: FakeSlack, user: str, channel: str) -> bool:
    return _kind(channel) == "public_channel" or user in _state(fake)["members"].get(channel, set())


def _score(query: set[str], text: str) -> int:
    return len(query & set(WORD.findall(text.lower())))


def search(fake: FakeSlack, p: dict[str, Any]) -> dict[str, Any]:
    query = _str(p.get("query")).strip()
    if not query:
        raise SlackError("invalid_arguments", response_metadata={"messages": ["[ERROR] missing required field: query"]})
    token = _str(p.get("action_token"))
    if not token:
        raise SlackError(
            "invalid_arguments", response_metadata={"messages": ["[ERROR] action_token is required for bot tokens"]}
        )
    found = _state(fake)["tokens"].get(token)
    if found is None or found[1] < time.monotonic():
        raise SlackError("invalid_action_token")
    user = found[0]
    try:
        limit = int(p.get("limit") or MAX_LIMIT)
    except ValueError:
        raise SlackError("invalid_arguments") from None
    if not 1 <= limit <= MAX_LIMIT:
        raise SlackError("invalid_arguments", response_metadata={"messages": [f"[ERROR] limit must be 1-{MAX_LIMIT}"]})
    requested = [t.strip() for t in (_str(p.get("channel_types")) or "public_channel").split(",") if t.strip()]
    if any(t not in TYPE_SCOPES for t in requested):
        raise SlackError("invalid_arguments")
    contents = [c.strip() for c in (_str(p.get("content_types")) or "messages").split(",") if c.strip()]
    types = {t for t in requested if TYPE_SCOPES[t] in fake.scopes}
    want_files = "files" in contents and "search:read.files" in fake.scopes
    if not types:
        needed = ",".join(TYPE_SCOPES[t] for t in requested)
        raise SlackError("missing_scope", needed=needed, provided=",".join(sorted(fake.scopes)))
    words = set(WORD.findall(query.lower()))
    _state(fake)["queries"].append({"user": user, "types": sorted(types), "query": query})
    messages = []
    if "messages" in contents:
        for channel, by_ts in fake._messages.items():
            if _kind(channel) not in types or not _visible(fake, user, channel):
                continue
            for m in by_ts.values():
                score = _score(words, m.text)
                if m.deleted or not score or (m.bot_id and p.get("include_bots") not in (True, "true", "1")):
                    continue
                messages.append((score, m))
    messages.sort(key=lambda item: -item[0])
    out: dict[str, Any] = {
        "messages": [
            {
                "author_user_id": m.user,
                "team_id": fake.team_id,
                "channel_id": m.channel,
                "message_ts": m.ts,
                "content": m.text,
                "is_author_bot": bool(m.bot_id),
                "permalink": f"https://deepthread-test.slack.com/archives/{m.channel}/p{m.ts.replace('.', '')}",
            }
            for _, m in messages[:limit]
        ]
    }
    if want_files:
        files = []
        for f in fake.__dict__.get("shared_files", {}).values():
            text = f.content.decode("utf-8", "ignore")
            score = _score(words, f"{f.name} {text}")
            if f.deleted or not score or _kind(f.channel) not in types or not _visible(fake, user, f.channel):
                continue
            files.append((score, f, text))
        files.sort(key=lambda item: -item[0])
        out["files"] = [
            {
                "file_id": f.id,
                "title": f.name,
                "channel_id": f.channel,
                "author_user_id": f.user,
                "date_created": int(float(f.ts)),
                "content": text[:500],
                "permalink": f"https://deepthread-test.slack.com/files/{f.user}/{f.id}/{f.name}",
            }
            for _, f, text in files[:limit]
        ]
    return {"results": out, "response_metadata": {"next_cursor": ""}}
