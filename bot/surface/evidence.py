"""`source 3` and `sources` in the thread: the evidence behind the report's footnotes.

Footnote numbers are the report's own (numbered in order of first citation, summary first),
so what a reader types is what they see. The passage, the page text around it and its
fetch time come from run state: the evidence survives the page changing or disappearing.
"""

from __future__ import annotations

import re

from agent import AssembledReport, Footnote, FootnoteClaim, assemble, domain_of, shorten
from bot.catalogue import Words, words_for
from bot.slack.mrkdwn_escaping import escape_text, link
from jobs import RunState

SOURCE_COMMAND = re.compile(r"^\s*(?:<@\w+>\s*)?(?:source|footnote)\s+\[?(\d+)\]?\s*$", re.IGNORECASE)
SOURCES_COMMAND = re.compile(r"^\s*(?:<@\w+>\s*)?sources\s*$", re.IGNORECASE)
# A thread reply stays well inside Slack's 40,000 characters and readable on a phone.
PASSAGE_CHARS = 2_500
CONTEXT_CHARS = 1_500
SOURCES_LISTED = 60
TITLE_CHARS = 90
# The report's sentences citing a footnote, each with the anchor it was checked against.
CLAIMS_LISTED = 12
CLAIM_CHARS = 300
ANCHOR_CHARS = 400
_VERDICT_WORDS = {
    "supported": "supported",
    "partial": "partly supported",
    "unsupported": "not supported",
    "unchecked": "unchecked",
}


def _report(state: RunState) -> AssembledReport:
    return assemble(state.summary, state.sections, state.sources, private_allowed=state.run.cites_private)


def _quote(text: str) -> str:
    return "\n".join(f"> {escape_text(line)}" if line.strip() else ">" for line in text.splitlines())


def source_reply(state: RunState, number: int) -> str:
    """One footnote's evidence, in the report's language (bot/catalogue.py)."""
    w = words_for(state.run.question)
    notes = _report(state).footnotes
    note = next((n for n in notes if n.number == number), None)
    if note is None:
        known = f"1–{len(notes)}" if notes else w("none_yet")
        return w("no_footnote", number=number, known=known)
    s = note.source
    kind = w("excerpt_verified") if s.kind == "excerpt" else w("snippet_unread")
    cited = w("cited_as", marker=f"`[{escape_text(s.marker)}]`")
    lines = [
        f"*[{number}]* {link(s.url, shorten(s.title, TITLE_CHARS) or domain_of(s.url))} · "
        f"{escape_text(domain_of(s.url))}",
        f"{w('fetched_at', time=f'{s.retrieved_at:%Y-%m-%d %H:%M}')} · {kind} · {cited}",
    ]
    if s.page_sha256:
        lines.append(w("page_hash", hash=f"`{s.page_sha256[:16]}…`"))
    lines += [f"*{w('passage')}*", _quote(shorten(s.passage, PASSAGE_CHARS))]
    if s.context and s.context != s.passage:
        lines += [f"*{w('around_it')}*", _quote(shorten(s.context, CONTEXT_CHARS))]
    if note.claims:
        lines.append(
            f"*What the report cites it for* ({len(note.claims)}), each with the words it was checked against:"
        )
        for claim in note.claims[:CLAIMS_LISTED]:
            lines += _claim_lines(claim)
        if len(note.claims) > CLAIMS_LISTED:
            lines.append(f"… and {len(note.claims) - CLAIMS_LISTED} more sentences.")
    return "\n".join(lines)


def _claim_lines(claim: FootnoteClaim) -> list[str]:
    verdict = f"⚠ {claim.why}" if claim.marked else _VERDICT_WORDS[claim.verdict]
    lines = [f"• “{escape_text(shorten(claim.sentence, CLAIM_CHARS))}” · _{escape_text(verdict)}_"]
    if claim.quote:
        lines.append(_quote(shorten(claim.quote, ANCHOR_CHARS)))
    return lines


def _listing(note: Footnote, w: Words) -> str:
    s = note.source
    kind = w("excerpt") if s.kind == "excerpt" else w("snippet_only")
    return (
        f"[{note.number}] {link(s.url, shorten(s.title, TITLE_CHARS) or domain_of(s.url))} · "
        f"{escape_text(domain_of(s.url))} · {kind} · {w('fetched', date=f'{s.retrieved_at:%Y-%m-%d}')}"
    )


def sources_reply(state: RunState) -> str:
    """The report's footnotes, one line each, in the report's language."""
    w = words_for(state.run.question)
    notes = _report(state).footnotes
    if not notes:
        return w("no_sources")
    lines = [f"*{w('sources_cited')}* ({len(notes)}): {w('source_n_hint')}"]
    lines += [_listing(n, w) for n in notes[:SOURCES_LISTED]]
    if len(notes) > SOURCES_LISTED:
        lines.append(w("more_sources", n=len(notes) - SOURCES_LISTED))
    return "\n".join(lines)
