"""The engine's activity lines (the progress message's "Now: …", the progress stream's task cards):
one template per kind of line, so that every line the engine writes has a known form. The run
state keeps the English line; the bot says it in the team's language by reading it back against
these templates and filling its own (bot/activity_words.py). A parallel batch's lines are joined
with BATCH_SEPARATOR; the task agents' board is one line of BOARD form with a BRANCH per agent.
"""

from __future__ import annotations

__all__ = ["ACTIVITY", "BATCH_SEPARATOR", "BRANCH_SEPARATOR", "BRANCH_STATES", "parse", "say"]

ACTIVITY: dict[str, str] = {
    # The tools' lines (each tool's `progress`).
    "running": "Running {tool}",
    "searching": "Searching: {query}",
    "reading": "Reading {target}: {goal}",
    "reading_file": "Reading file {file}: {goal}",
    "reading_thread": "Reading the thread's messages ({range})",
    "searching_files": "Searching the thread's files for: {query}",
    "searching_slack": "Searching the team's Slack: {query}",
    "asking": "Asking {server}: {tool}",
    "calculating": "Calculating {expression}",
    "charting": "Drawing a chart: {title}",
    "rereading_result": "Re-reading stored result {id}",
    "rereading_section": "Re-reading report section {section}",
    "rereading_source": "Re-reading source {marker}",
    "writing_section": "Writing section: {title}",
    "revising": "Revising {section}: {reason}",
    "starting_tasks": "Starting {count} task agent(s): {names}",
    # The loop's own.
    "planning": "Planning the research",
    "resuming": "Resuming from the last checkpoint",
    "compacting": "Compacting notes before continuing",
    "summarising": "Writing the summary ({reason})",
    "stopping": "Stopping ({reason}): writing the summary",
    "upgraded": "Budget raised to {profile} (revision {revision})",
    "waiting": "Waiting for model capacity",
    # The task agents' board, and each agent's line on it.
    "board": "Tasks: {done} done, {running} running — {branches}",
    "branch": "{number}. {label}: {state}",
}
BATCH_SEPARATOR = "; "  # the lines of calls made in parallel, in one line
BRANCH_SEPARATOR = " · "  # the board's agents
# A task agent's state on the board before it reports, and after (TaskReport.status → words).
BRANCH_STATES = {
    "starting": "starting",
    "completed": "done",
    "incomplete": "stopped at its budget",
    "failed": "failed",
}


def say(kind: str, **values: object) -> str:
    """The English line of `kind` with its values."""
    return ACTIVITY[kind].format(**values)


Template = tuple[tuple[str, ...], tuple[str, ...]]  # its literal pieces, and the names between them


def _template(text: str) -> Template:
    """A template's literal pieces and the names of the values between them: `Reading {target}: {goal}`
    is ("Reading ", ": ", "") and ("target", "goal")."""
    pieces, names = [], []
    rest = text
    while "{" in rest:
        before, _, after = rest.partition("{")
        name, _, rest = after.partition("}")
        pieces.append(before)
        names.append(name)
    pieces.append(rest)
    return tuple(pieces), tuple(names)


# Each template read once at import, the most literal first (`Reading file …` before `Reading …`).
_TEMPLATES: list[tuple[str, Template]] = sorted(
    ((kind, _template(text)) for kind, text in ACTIVITY.items()),
    key=lambda entry: -sum(len(piece) for piece in entry[1][0]),
)


def _values(line: str, template: Template) -> dict[str, str] | None:
    """The values of `line` read against one template, each value as short as the line allows (as a
    lazy pattern reads it), or None. Read with str.find, one pass per piece, where a pattern of lazy
    groups would try every split of a long line."""
    pieces, names = template
    if not names:
        return {} if line == pieces[0] else None
    last = len(line) - len(pieces[-1])
    if not line.startswith(pieces[0]) or not line.endswith(pieces[-1]) or last < len(pieces[0]):
        return None
    values: dict[str, str] = {}
    cursor = len(pieces[0])
    # The earliest place of each middle piece leaves the most line to the ones after it, so a line
    # that fits the template at all fits it this way.
    for name, piece in zip(names[:-1], pieces[1:-1], strict=True):
        found = line.find(piece, cursor, last)
        if found == -1:
            return None
        values[name] = line[cursor:found]
        cursor = found + len(piece)
    values[names[-1]] = line[cursor:last]
    return values


def parse(line: str, kinds: frozenset[str] | None = None) -> tuple[str, dict[str, str]] | None:
    """The kind and values of one English line (of `kinds`, or any); None for a line of no known form."""
    for kind, template in _TEMPLATES:
        if kinds is not None and kind not in kinds:
            continue
        values = _values(line, template)
        if values is not None:
            return kind, values
    return None
