"""The final answer when the model is gone: put together from what the run already has.

A run whose model service stops answering (overloaded past our patience, or failing every
retry) still owes its team an answer. When it has written sections or gathered sources,
the summary is assembled here, without the model: the opening of each section (its
citations kept, so footnotes still resolve), or, with no section yet, the sources found.
The summary says plainly that the model was unavailable, so nobody mistakes it for the
model's own conclusion.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .events import Source
from .report import Section

__all__ = ["SALVAGED_NOTE", "salvaged_summary"]

# How much of each section's opening the summary carries: a sentence or two, not the section.
LEAD_CHARS = 320
# With no section written, this many sources are listed (the report lists them all anyway).
LISTED_SOURCES = 8
# A sentence ends at . ! or ? followed by whitespace, so "0.03%" and "[s1]." stay whole.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# Leading blanks within the line only: a `\s*` from every line start would rescan a run of newlines.
_HEADING = re.compile(r"^[^\S\n]*+(?:#++\s*+|[-*]\s++)", re.MULTILINE)

# A source marker cut off at the end of a shortened lead ("… [s1", "… ["); the spaces before it
# are stripped after, as a leading `\s*` would rescan a run of them from each space.
_CUT_MARKER = re.compile(r"\[s?\d*+$")


def _without_cut_marker(text: str) -> str:
    cut = _CUT_MARKER.search(text)
    return text[: cut.start()].rstrip() + text[cut.end() :] if cut else text


SALVAGED_NOTE = "the summary was put together from the sections already written, without the model"


def _lead(body: str) -> str:
    """The section's first sentences, up to LEAD_CHARS, cut at a sentence end where there is one."""
    text = " ".join(_HEADING.sub("", body).split())
    if len(text) <= LEAD_CHARS:
        return text
    lead = ""
    for sentence in _SENTENCE_END.split(text):
        if lead and len(lead) + 1 + len(sentence) > LEAD_CHARS:
            break
        lead = f"{lead} {sentence}".strip()
    if len(lead) > LEAD_CHARS:  # one very long first sentence: cut at a word, never inside a marker
        lead = _without_cut_marker(lead[:LEAD_CHARS].rsplit(" ", 1)[0]) + " …"
    return lead


def salvaged_summary(why: str, sections: Iterable[Section], sources: Iterable[Source]) -> str:
    """A summary in the report's Markdown, or "" when there is nothing to build one from."""
    sections, sources = list(sections), list(sources)
    if sections:
        lines = [
            (
                f"_The model service became unavailable ({why}), so this summary repeats the opening of "
                "each section written before it did; the sections below are complete as written._"
            ),
            "",
        ]
        lines += [f"- **{section.title}**: {_lead(section.body)}" for section in sections if section.body.strip()]
        return "\n".join(lines)
    if sources:
        lines = [
            (
                f"_The model service became unavailable ({why}) before any section was written. "
                "These are the sources found so far; reply in this thread to continue the research._"
            ),
            "",
        ]
        lines += [f"- {source.title or source.url} [{source.marker}]" for source in sources[:LISTED_SOURCES]]
        if len(sources) > LISTED_SOURCES:
            lines.append(f"- … and {len(sources) - LISTED_SOURCES} more, listed under Sources")
        return "\n".join(lines)
    return ""
