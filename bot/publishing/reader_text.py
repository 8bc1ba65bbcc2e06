"""The run's own text as a reader sees it: citation markers ([s12], the engine's) become the
report's footnote numbers ([3]) wherever the bot shows the model's words outside the report itself
(an earlier revision in `history`, a revision's reason, what is being checked, a re-check's digest),
so a reader never meets a marker and `source 3` answers about the same [3] everywhere.

A marker the report does not cite now (a source an earlier revision cited) is shown as its site, in
a link to the source; one the reader may not see (a private source outside the requester's DM) or
that the run never registered is dropped, as the report drops it (agent/report.py `assemble`).
"""

from __future__ import annotations

import re

from agent import MARKER_RE, assemble, domain_of
from jobs import RunState

__all__ = ["footnote_numbers", "for_reader"]


def footnote_numbers(state: RunState) -> dict[str, int]:
    """Marker → footnote number, as the report message and `source N` number them."""
    report = assemble(state.summary, state.sections, state.sources, private_allowed=state.run.cites_private)
    return {note.source.marker: note.number for note in report.footnotes}


def for_reader(state: RunState, text: str, numbers: dict[str, int] | None = None, *, plain: bool = False) -> str:
    """`text` (Markdown, as the model wrote it) with every marker as the reader's footnote or link;
    `plain` (a line shown as text, not converted from Markdown): the site in brackets, unlinked."""
    if "[s" not in text:
        return text
    known = footnote_numbers(state) if numbers is None else numbers

    def shown(match: re.Match[str]) -> str:
        marker = f"s{match.group(1)}"
        if marker in known:
            return f"[{known[marker]}]"
        source = state.sources.get(marker)
        if source is None or (source.private and not state.run.cites_private):
            return ""
        try:
            site = domain_of(source.url)
        except ValueError:
            return ""
        return f"[{site}]" if plain else f"[{site}]({source.url})"

    return MARKER_RE.sub(shown, text)
