"""A re-check's digest: one short thread message saying what changed (old → new figures, each
with the sources its sentence cites) or that nothing did. Built from the revisions the re-check
run made, so it never claims more than the report shows."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from agent import MARKER_RE, Figure, figures_in, sentences, shorten
from bot.publishing.link_policy import shown
from bot.publishing.reader_text import for_reader
from bot.slack.mrkdwn_escaping import escape_text, link
from jobs import RunState, RunStatus
from jobs.upkeep.recheck import RecheckRun, Schedule, next_check_words, verified

__all__ = ["FigureChange", "digest", "figure_changes"]

# A digest lists at most this many changed sections (the rest: `history`).
CHANGES_SHOWN = 8
# Figure pairs shown per changed section.
FIGURES_SHOWN_PER_SECTION = 4
REASON_CHARS = 200

_WORD = re.compile(r"[a-z]{3,}")  # words that say what a finding is about


@dataclass(frozen=True)
class FigureChange:
    old: str
    new: str
    sources: list[str]  # markers cited where the new figure is stated


def digest(recheck: RecheckRun, parent: RunState, state: RunState, schedule: Schedule | None) -> str:
    """One short thread message: what the re-check changed (old → new figures with their sources),
    or that nothing changed since the last run. A URL the model wrote shows as its domain (link_policy.py)."""
    state = shown(state)
    before = {s.section_id: s for s in parent.sections}
    changed = [
        (before[s.section_id].body, s)
        for s in state.sections
        if s.section_id in before
        and len(s.revisions) > len(before[s.section_id].revisions)
        and s.body != before[s.section_id].body
    ]
    added = [s for s in state.sections if s.section_id not in before]
    since = f"{recheck.since:%-d %b}"
    next_words = next_check_words(schedule)
    if not verified(state):
        word = "stopped" if state.status == RunStatus.stopped else "did not finish"
        head = f"Re-check {word}: {escape_text(state.reason or state.status.value)}."
        if not changed and not added:
            return f"{head} The report is as it was on {since}; {next_words}."
    elif not changed and not added:
        return f"No changes since {since}: the report's dated figures and claims still hold. {_cap(next_words)}."
    else:
        head = f"Re-check: {_count(len(changed) + len(added), 'section')} changed since {since}."
    lines = [head]
    for old_body, section in changed[:CHANGES_SHOWN]:
        reason = section.revisions[-1].reason if section.revisions else ""
        lines.append(_change_line(state, section.title, old_body, section.body, reason))
    for section in added[: max(0, CHANGES_SHOWN - len(changed))]:
        lines.append(f"• *{escape_text(section.title)}*: new section")
    hidden = len(changed) + len(added) - CHANGES_SHOWN
    if hidden > 0:
        lines.append(f"… and {_count(hidden, 'more section')} (reply `history` to see every revision).")
    lines.append(f"Earlier versions: reply `history`. {_cap(next_words)}.")
    return "\n".join(lines)


def _change_line(state: RunState, title: str, old_body: str, new_body: str, reason: str) -> str:
    changes = figure_changes(old_body, new_body)[:FIGURES_SHOWN_PER_SECTION]
    parts = []
    for change in changes:
        cited = [
            _source_link(state, m)
            for m in change.sources
            if m in state.sources and (state.run.cites_private or not state.sources[m].private)
        ]
        where = f" ({', '.join(cited)})" if cited else ""
        parts.append(f"{escape_text(change.old)} → {escape_text(change.new)}{where}")
    what = "; ".join(parts) if parts else "revised"
    why = f" — {escape_text(shorten(for_reader(state, reason, plain=True), REASON_CHARS))}" if reason else ""
    return f"• *{escape_text(title)}*: {what}{why}"


def _source_link(state: RunState, marker: str) -> str:
    source = state.sources[marker]
    return link(source.url, shorten(source.title, 60) or source.url)


def figure_changes(old_body: str, new_body: str) -> list[FigureChange]:
    """Figures the new body states that the old one did not, each paired with the figure it
    replaced: sentence by sentence (a revised sentence is matched to the old sentence it shares
    the most words with), then whatever is left in order."""
    old_sentences, new_sentences = sentences(old_body), sentences(new_body)
    old_keys = {f.key for f in figures_in(old_body)}
    new_keys = {f.key for f in figures_in(new_body)}
    changes: list[FigureChange] = []
    used_old: set[str] = set()
    for sentence in new_sentences:
        came = _unique(f for f in figures_in(sentence) if f.key not in old_keys)
        if not came:
            continue
        markers = list(dict.fromkeys(f"s{m}" for m in MARKER_RE.findall(sentence)))
        match = max(old_sentences, key=lambda old: _overlap(old, sentence), default="")
        gone = [f for f in figures_in(match) if f.key not in new_keys and f.key not in used_old]
        for figure in came:
            partner = next((g for g in gone if g.percent == figure.percent and g.currency == figure.currency), None)
            if partner is not None:
                gone.remove(partner)
                used_old.add(partner.key)
            changes.append(FigureChange(partner.text if partner else "(new)", figure.text, markers))
    return changes


def _unique(figures: Iterable[Figure]) -> list[Figure]:
    seen: dict[str, Figure] = {}
    for figure in figures:
        seen.setdefault(figure.key, figure)
    return list(seen.values())


def _words(text: str) -> set[str]:
    return set(_WORD.findall(MARKER_RE.sub(" ", text.lower())))


def _overlap(a: str, b: str) -> float:
    wa, wb = _words(a), _words(b)
    return len(wa & wb) / (len(wa | wb) or 1)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
