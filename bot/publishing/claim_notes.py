"""A footnote's line as the claim check adds to it: the anchor quotes (the source's words each report
sentence citing it was checked against) in place of the passage, and a ⚠ for each claim kept although
its source does not support it ("not found in [3]")."""

from __future__ import annotations

from agent import Footnote, shorten
from bot.slack.mrkdwn_escaping import escape_text

__all__ = ["anchor_quotes", "marked_notes"]

# At most this many distinct anchor quotes on one footnote line (`source N` shows them all).
QUOTES_SHOWN = 2
# A quote is never cut shorter than this, however many share the line.
QUOTE_MIN_CHARS = 50
MARKED_SHOWN = 2
CLAIM_CHARS = 80


def anchor_quotes(note: Footnote, chars: int) -> str:
    """The anchor quotes of the report's sentences citing this footnote, as the line's quoted text;
    "" when none was checked (the line then quotes the passage)."""
    quotes = list(dict.fromkeys(c.quote for c in note.claims if c.quote))
    if not quotes:
        return ""
    shown = quotes[:QUOTES_SHOWN]
    each = max(QUOTE_MIN_CHARS, chars // len(shown))
    more = f" (+{len(quotes) - len(shown)} more: `source {note.number}`)" if len(quotes) > len(shown) else ""
    return " · ".join(f"“{escape_text(shorten(q, each))}”" for q in shown) + more


def marked_notes(note: Footnote) -> str:
    """ " · ⚠ not found in [3]: “claim…”" for each marked claim citing this footnote."""
    marked = [c for c in note.claims if c.marked]
    notes = [
        f"⚠ {escape_text(c.why)}: “{escape_text(shorten(c.sentence, CLAIM_CHARS))}”" for c in marked[:MARKED_SHOWN]
    ]
    if len(marked) > MARKED_SHOWN:
        notes.append(f"⚠ {len(marked) - MARKED_SHOWN} more")
    return "".join(f" · {n}" for n in notes)
