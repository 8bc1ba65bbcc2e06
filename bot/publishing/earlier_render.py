"""How the report and the progress message name the team's earlier reports a run was given
(agent/earlier.py): the report opens with "Earlier research: <link|title> (12 Nov)", the progress
message says "found 2 earlier reports"."""

from __future__ import annotations

from agent import shorten
from bot.slack.mrkdwn_escaping import escape_text, link
from jobs import RunState

__all__ = ["earlier_line", "found_line"]

TITLE_CHARS = 80  # an earlier report's title in the report's opening line


def earlier_line(state: RunState) -> str:
    """The report's opening line naming the earlier reports it built on; "" when there were none."""
    if not state.earlier:
        return ""
    named = []
    for report in state.earlier:
        title = shorten(report.title, TITLE_CHARS)
        shown = link(report.permalink, title) if report.permalink else escape_text(title)
        named.append(f"{shown} ({report.date:%-d %b})")
    return "Earlier research: " + " · ".join(named)


def found_line(state: RunState) -> str:
    """The progress message's count of earlier reports found; "" when none (or a continuation's)."""
    n = len(state.earlier)
    if not n or state.run.parent_run_id:
        return ""
    return f"📚 found {n} earlier report{'s' if n != 1 else ''} in the team's library"
