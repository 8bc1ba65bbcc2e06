"""The engine's activity lines (the progress message's "Now: …", the progress stream's task cards):
one template per kind of line, so that every line the engine writes has a known form. The run
state keeps the English line; the bot says it in the team's language by reading it back against
these templates and filling its own (bot/activity_words.py). A parallel batch's lines are joined
with BATCH_SEPARATOR; the task agents' board is one line of BOARD form with a BRANCH per agent.
"""

from __future__ import annotations

import re
from functools import cache

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


@cache
def _patterns() -> list[tuple[str, re.Pattern[str]]]:
    """Each template as a pattern, the most literal first (`Reading file …` before `Reading …`)."""
    found = []
    for kind, template in ACTIVITY.items():
        pieces = re.split(r"\{(\w+)\}", template)
        regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.*?)" for i, p in enumerate(pieces))
        literal = sum(len(p) for p in pieces[::2])
        found.append((literal, kind, re.compile(regex + r"\Z", re.DOTALL)))
    return [(kind, pattern) for _, kind, pattern in sorted(found, key=lambda f: -f[0])]


def parse(line: str, kinds: frozenset[str] | None = None) -> tuple[str, dict[str, str]] | None:
    """The kind and values of one English line (of `kinds`, or any); None for a line of no known form."""
    for kind, pattern in _patterns():
        if kinds is not None and kind not in kinds:
            continue
        match = pattern.match(line)
        if match:
            return kind, match.groupdict()
    return None
