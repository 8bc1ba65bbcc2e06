"""What a renderer returns (a Slack message, the report as a file, where its canvas is) and the
small pieces every renderer shares: Block Kit sections, counts, bold titles, the requester and the
one mention our own reasons carry.

Every renderer is pure and deterministic from run state alone (no clock reads), so a hash of its
output tells the publisher whether Slack needs an update, and a restart renders the same bytes."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot import limits
from bot.slack.mrkdwn_escaping import escape_text
from jobs import RunState

from .canvas_render import CanvasDocument

__all__ = ["ASTERISK_LOOKALIKE", "Attachment", "CanvasView", "ReportRendering", "SlackMessage"]


# Bold in mrkdwn cannot contain a bare asterisk; this one looks alike and does not end it.
ASTERISK_LOOKALIKE = "∗"
_SLACK_USER_ID = re.compile(r"[UW][A-Z0-9]{2,}")


@dataclass
class SlackMessage:
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)

    def digest(self) -> str:
        raw = json.dumps({"text": self.text, "blocks": self.blocks}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(raw.encode()).hexdigest()

    def violations(self) -> list[str]:
        return limits.violations(self.text, self.blocks)


@dataclass(frozen=True)
class Attachment:
    """The full report as a Markdown file, for a report too big for one message."""

    filename: str
    title: str
    content: str
    comment: str = ""  # posted with the file in the thread

    def digest(self) -> str:
        raw = json.dumps([self.filename, self.title, self.content, self.comment], ensure_ascii=False)
        return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True)
class CanvasView:
    """What the report's canvas is, for the renderer: whether the report lives there whatever its
    length (DEEPTHREAD_REPORT=canvas, or it has a canvas already), its link once it exists, and why
    the workspace has none (then a long report spills into a file instead)."""

    always: bool = False
    permalink: str = ""
    title: str = ""
    refused: str | None = None


@dataclass
class ReportRendering:
    message: SlackMessage
    attachment: Attachment | None  # None: the whole report is in the message (or its canvas)
    canvas: CanvasDocument | None = None  # the report's sections in its canvas, when it lives there


# --- small pieces ------------------------------------------------------------------------


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _bold(text: str) -> str:
    """Plain text as one bold line: a line break or a bare asterisk would end the bold early."""
    inner = escape_text(" ".join(text.split())).replace("*", ASTERISK_LOOKALIKE)
    return f"*{inner}*" if inner.strip() else ""


def _minutes(state: RunState) -> int:
    end = state.finished_at or state.updated_at
    return max(0, int((end - state.run.created_at).total_seconds() // 60))


def _requester(state: RunState) -> str:
    user = state.run.requester or ""
    if _SLACK_USER_ID.fullmatch(user):
        return f"<@{user}>"
    return escape_text(user)


def _revised(section_revisions: int, words: Callable[..., str] | None = None) -> str:
    """`  _revised ×2_`, in the report's language when given its words (bot/catalogue.py)."""
    if not section_revisions:
        return ""
    return f"  _{words('revised', n=section_revisions) if words else f'revised ×{section_revisions}'}_"


# The one mention our own reasons write ("stopped by <@U…>", see agent/loop.py and bot/surface/steering.py);
# any other "<@…>" in a reason (an exception's text, say) stays inert.
# Either case: a status said once with its reason opens with "Stopped by <@U…>" (bot.catalogue.said_once).
_STOPPED_BY = re.compile(r"\b(stopped by) &lt;@([UW][A-Z0-9]+)&gt;", re.IGNORECASE)


def _with_mentions(text: str) -> str:
    """Escape everything, then let the person who stopped the run through as a mention."""
    return _STOPPED_BY.sub(r"\1 <@\2>", escape_text(text))
