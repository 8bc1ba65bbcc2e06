"""The one rule every text the bot sends to Slack goes through: `inert(text, kind)`.

Whatever sends it (the publisher's report, progress and stream chunks, a listener's reply or
ephemeral note, a digest, a usage reply, an error, a file's title or comment, the thread status),
`bot/slack/client.py` passes every text field of the request through `inert` on its way out
(`guard`), and a slash command's answer in its ack goes through it too. So no sender, now or
added later, can put live markup in front of people:

- Slack's angle syntax stays live only as a link to an http(s) or mailto target, a mention of one
  person (`<@U…>`: the requester in the footer, whoever stopped a run) or a link to a channel
  (`<#C…>`, which notifies no one); a broadcast (`<!channel>`, `<!here>`, `<!subteam^…>`), a date
  token or any other target comes out as text, and so does a lone `<`;
- a bare `@here` / `@channel` / `@everyone` gets a zero-width joiner, so it notifies no one;
- in Markdown fields (the stream's `markdown_text`, `markdown` blocks, task cards) a bracket is escaped
  unless it belongs to a `[plain words](http(s) or mailto target)`, so no other link or image forms.

It is idempotent and leaves escaped text as it is (`&lt;` stays `&lt;`), so it never doubles the
escaping the renderers do to show what people wrote as they wrote it (bot/slack/mrkdwn.py).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Literal

from .mrkdwn_escaping import ZERO_WIDTH_JOINER

__all__ = ["MESSAGE_METHODS", "TEXT_METHODS", "TextKind", "guard", "inert"]

TextKind = Literal["mrkdwn", "markdown", "plain"]

# `<target>` or `<target|label>`: what Slack turns into a link, a mention or a broadcast.
_ATOM = re.compile(r"<([^<>]*)>")
_SAFE_TARGET = re.compile(r"(?:https?://[^\s|<>]+|mailto:[^\s|<>]+)", re.IGNORECASE)
# One person (`<@U…>`) or one channel (`<#C…>`): named, never broadcast to.
_PERSON = re.compile(r"@[UW][A-Z0-9]{2,}|#[CG][A-Z0-9]{2,}")
_BROADCAST = re.compile(r"(?<![\w.])@(?=(?:channel|here|everyone)\b)", re.IGNORECASE)
# The only Markdown link left live: plain words to an http(s) or mailto target.
_SAFE_MARKDOWN_LINK = re.compile(r"\[[^\[\]\\\n]*\]\((?:https?://|mailto:)[^()\s]*\)", re.IGNORECASE)

# Every method that puts a message (or a stream's text) in front of people: each is sent with
# unfurling off (bot/slack/client.py; tests/bot/slack/test_unfurls.py checks it covers every such
# method the SDK has and the fake Slack knows).
MESSAGE_METHODS = frozenset(
    {
        "chat.postMessage",
        "chat.update",
        "chat.postEphemeral",
        "chat.scheduleMessage",
        "chat.meMessage",
        "chat.startStream",
        "chat.appendStream",
        "chat.stopStream",
    }
)
# Web API methods whose arguments carry text people read: the messages, uploads, statuses.
TEXT_METHODS = MESSAGE_METHODS | frozenset(
    {
        "files.completeUploadExternal",
        "assistant.threads.setStatus",
        "assistant.threads.setTitle",
        "assistant.threads.setSuggestedPrompts",
        "agents.sessions.setStatus",
        "agents.sessions.rename",
        "agents.conversations.setView",
        "agents.conversations.setCanvasContent",
        "views.publish",  # the Home tab: its view's blocks, title and input placeholders
    }
)


def _atom(match: re.Match[str]) -> str:
    inner = match.group(1)
    target = inner.split("|", 1)[0]
    if _SAFE_TARGET.fullmatch(target) or _PERSON.fullmatch(target):
        return match.group()  # a link's target is left whole, a broadcast-looking word in it included
    return f"&lt;{_defused(inner)}&gt;"


def _defused(text: str) -> str:
    return _BROADCAST.sub("@" + ZERO_WIDTH_JOINER, text)


def _brackets(text: str) -> str:
    """Every `[` and `]` that could open or close a Markdown link or image, escaped (`\\[`), except
    in a safe link; a bracket after an odd run of backslashes is already escaped and stays."""
    safe = {m.start(): m for m in _SAFE_MARKDOWN_LINK.finditer(text)}
    out: list[str] = []
    backslashes = 0
    i = 0
    while i < len(text):
        link = safe.get(i)
        if link is not None and backslashes % 2 == 0:
            out.append(link.group())
            i, backslashes = link.end(), 0
            continue
        char = text[i]
        out.append("\\" + char if char in "[]" and backslashes % 2 == 0 else char)
        backslashes = backslashes + 1 if char == "\\" else 0
        i += 1
    return "".join(out)


def inert(text: str, kind: TextKind = "mrkdwn") -> str:
    """`text` with no live markup left but http(s)/mailto links and mentions of one person."""
    if not text:
        return text
    if kind == "markdown":
        text = _brackets(text)
    if kind == "plain":  # plain_text objects show angle brackets as they are
        return _defused(text)
    pieces = []
    last = 0
    for match in _ATOM.finditer(text):
        pieces.append(_defused(text[last : match.start()].replace("<", "&lt;")))
        pieces.append(_atom(match))
        last = match.end()
    pieces.append(_defused(text[last:].replace("<", "&lt;")))
    return "".join(pieces)


# --- the fields of a request ------------------------------------------------------------------

_CHUNK_TEXT_KEYS = ("title", "details", "output")


def _node(node: Any, kind: TextKind) -> Any:
    """Blocks, chunks and attachments: each text by what Slack makes of it."""
    if isinstance(node, list):
        return [_node(item, kind) for item in node]
    if not isinstance(node, dict):
        return node
    kind_here: TextKind = kind
    shape = node.get("type")
    if shape == "plain_text":
        kind_here = "plain"
    elif shape == "mrkdwn":
        kind_here = "mrkdwn"
    elif shape in ("markdown", "markdown_text", "task_update", "plan_update"):
        kind_here = "markdown"
    elif shape in ("url", "text", "button"):  # a URL source's label, a rich-text run, a button: shown as is
        kind_here = "plain"
    out: dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(value, str) and (
            key == "text" or (shape in ("task_update", "plan_update") and key in _CHUNK_TEXT_KEYS)
        ):
            out[key] = inert(value, kind_here)
        elif isinstance(value, str) and key in ("fallback", "pretext", "title", "footer", "author_name") and not shape:
            out[key] = inert(value, "mrkdwn")  # a legacy attachment's texts
        elif isinstance(value, (list, dict)):
            out[key] = _node(value, kind_here)
        else:
            out[key] = value
    return out


def _json_or(value: Any) -> tuple[Any, bool]:
    if isinstance(value, str):
        try:
            return json.loads(value), True
        except ValueError:
            return value, False
    return value, False


def _fields(body: dict[str, Any]) -> dict[str, Any]:
    body = copy.copy(body)
    mrkdwn_off = body.get("mrkdwn") is False
    for key in ("text", "initial_comment"):
        if isinstance(body.get(key), str):
            body[key] = inert(body[key], "plain" if mrkdwn_off and key == "text" else "mrkdwn")
    if isinstance(body.get("markdown_text"), str):
        body["markdown_text"] = inert(body["markdown_text"], "markdown")
    # How Slack shows a status or a session title is not documented: treated as mrkdwn, to be safe.
    for key in ("status", "title"):
        if isinstance(body.get(key), str):
            body[key] = inert(body[key], "mrkdwn")
    if isinstance(body.get("loading_messages"), list):
        body["loading_messages"] = [inert(m, "mrkdwn") if isinstance(m, str) else m for m in body["loading_messages"]]
    if isinstance(body.get("content"), str):
        body["content"] = inert(body["content"], "markdown")
    if isinstance(body.get("prompts"), list):  # suggested prompts: a title and the message each sends
        body["prompts"] = [
            {k: inert(v, "mrkdwn") if isinstance(v, str) and k in ("title", "message") else v for k, v in p.items()}
            if isinstance(p, dict)
            else p
            for p in body["prompts"]
        ]
    if "view" in body:  # views.publish: a view (its blocks, title, inputs), as JSON or an object
        value, was_json = _json_or(body["view"])
        walked = _node(value, "mrkdwn")
        body["view"] = json.dumps(walked) if was_json else walked
    for key in ("blocks", "attachments", "chunks", "files"):
        if key not in body:
            continue
        value, was_json = _json_or(body[key])
        walked = _node(value, "plain" if key == "files" else "mrkdwn")
        if key == "files" and isinstance(walked, list):  # uploads: each file's title, shown as is
            walked = [
                {**f, "title": inert(f["title"], "plain")} if isinstance(f.get("title"), str) else f for f in walked
            ]
        body[key] = json.dumps(walked) if was_json else walked
    return body


def guard(api_method: str, json_body: Any, data: Any, params: Any) -> tuple[Any, Any, Any]:
    """Every text field of a request that carries text, through `inert`; other requests unchanged."""
    if api_method not in TEXT_METHODS:
        return json_body, data, params
    return (
        _fields(json_body) if isinstance(json_body, dict) else json_body,
        _fields(data) if isinstance(data, dict) else data,
        _fields(params) if isinstance(params, dict) else params,
    )
