"""The progress message and the assistant thread status: phase, what is being checked now,
sources, model requests, minutes and budget left; while running, how to steer the run."""

from __future__ import annotations

from agent import shorten
from bot.catalogue import Words, plural, said_once, words_for
from bot.settings import DEFAULT_STOP_REACTION
from bot.slack.mrkdwn_escaping import escape_text
from jobs import RunState, RunStatus

from .earlier_render import found_line
from .link_policy import shown
from .message_parts import SlackMessage, _minutes, _section, _with_mentions
from .plan_render import _render_plan
from .reader_text import for_reader

__all__ = [
    "CONSTRAINT_CHARS",
    "GO_DEEPER_ACTION",
    "MAX_CONSTRAINTS_SHOWN",
    "MAX_NOTICES_SHOWN",
    "NOTICE_CHARS",
    "PHASES",
    "STATUS_BY_PHASE",
    "STATUS_CHARS",
    "STATUS_LINE_CHARS",
    "render_help",
    "render_progress",
    "render_status",
    "shows_constraints",
]


STATUS_LINE_CHARS = 300  # "Now: …" in the progress message
CONSTRAINT_CHARS = 120  # each pinned constraint on the progress message
MAX_CONSTRAINTS_SHOWN = 8
NOTICE_CHARS = 400  # "Search degraded: …" and other notices
MAX_NOTICES_SHOWN = 3
STATUS_CHARS = 60  # assistant thread status: one short line under the thread
# Phase → (icon, words) for the progress headline; unknown phases are shown as they are.
PHASES = {
    "researching": ("🔎", "Researching"),
    "compacting": ("🗜️", "Compacting notes before continuing"),
    "finishing": ("✍️", "Writing the summary"),
    "writing": ("✍️", "Writing"),
}
# Phase → assistant status ("<app> is researching…").
STATUS_BY_PHASE = {
    "researching": "is researching…",
    "compacting": "is compacting its notes…",
    "finishing": "is writing the summary…",
    "writing": "is writing the report…",
}


# --- progress ----------------------------------------------------------------------------


def _budget_left(state: RunState) -> str:
    """'standard budget · 54 min · 38 model requests left', when run state carries the budget.

    From the ledger's latest figures (the effective revision, so an upgrade shows at once);
    before the first model turn there are none, and the line is left out rather than guessed.
    """
    left = state.budget_left
    if left is None:
        return ""
    w = words_for(state.run.question)
    parts = [f"{max(0, int(left.minutes_left))} {w('min')}", plural(max(0, left.requests_left), "model request", w)]
    return w("budget_left", profile=escape_text(left.profile), parts=" · ".join(parts))


GO_DEEPER_ACTION = "go_deeper"  # bot/surface/listeners/actions.py answers this button


def render_progress(state: RunState, stop_reaction: str = DEFAULT_STOP_REACTION) -> SlackMessage:
    """Phase, what is being checked now, sources so far, model requests, minutes, budget;
    while running, how to steer (stop reaction, go deeper, add a requirement) and a button."""
    state = shown(state)  # no URL the model wrote is a link unless the run read it (link_policy.py)
    w = words_for(state.run.question)  # the bot's own words, in the question's language (bot/catalogue.py)
    facts = (
        f"{_minutes(state)} {w('min')} · {plural(state.usage.requests, 'model request', w)} · "
        f"{plural(len(state.sources), 'source', w)}"
    )
    status = state.status
    budget = _budget_left(state)
    if status == RunStatus.planned and state.plan is not None:
        return _render_plan(state)
    if status == RunStatus.queued and state.run.plan_first and not state.approved_by:
        lines = [f"📝 {w('drafting_plan')}"]
    elif status == RunStatus.queued:
        lines = [w("queued")]
    elif status == RunStatus.running:
        icon, phase_words = PHASES.get(state.phase, ("🔎", ""))
        said = w(state.phase) if phase_words else escape_text(state.phase.capitalize() or w("researching"))
        lines = [f"{icon} {said} · {facts}" + (f" · {budget}" if budget else "")]
        if state.activity:  # the engine's words may quote the model's (a revision's reason): markers as footnotes
            activity = for_reader(state, w.activity(state.activity), plain=True)
            lines.append(f"{w('now')}: {escape_text(shorten(activity, STATUS_LINE_CHARS))}")
        if state.checking:
            checking = for_reader(state, state.checking, plain=True)
            lines.append(f"{w('checking')}: {escape_text(shorten(checking, STATUS_LINE_CHARS))}")
        lines += _standing_lines(state, w)
        reaction = escape_text(stop_reaction.strip(":"))
        lines.append(f":{reaction}: {w('steer')}")
        text = "\n".join(lines)
        button = {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "action_id": GO_DEEPER_ACTION,
                    "text": {"type": "plain_text", "text": w("go_deeper")},
                }
            ],
        }
        return SlackMessage(text=text, blocks=[_section(text), button])
    elif status == RunStatus.completed:
        lines = [f"✅ {w('done')} · {facts} · {w('final_report')}"]
        if state.reason:
            lines.append(f"{w('note')}: {_with_mentions(shorten(state.reason, STATUS_LINE_CHARS))}")
        lines += _standing_lines(state, w)
    else:
        word = w("stopped") if status == RunStatus.stopped else w("ended_early")
        once = said_once(word, state.reason)  # "Stopped by …": the end and its reason said once
        if once:
            lines = [f"⚠️ {_with_mentions(shorten(once, STATUS_LINE_CHARS))} · {facts}", w("kept")]
        else:
            lines = [
                f"⚠️ {word} · {facts}",
                f"{w('why')}: {_with_mentions(shorten(state.reason or 'unknown', STATUS_LINE_CHARS))}",
                w("kept"),
            ]
    text = "\n".join(lines)
    return SlackMessage(text=text, blocks=[_section(text)])


def _standing_lines(state: RunState, w: Words) -> list[str]:
    """What stays on the progress message once said: the pinned constraints (so the requester can
    correct them) and notices such as degraded search."""
    lines = []
    if shows_constraints(state):
        listed = " · ".join(shorten(c, CONSTRAINT_CHARS) for c in state.run.constraints[:MAX_CONSTRAINTS_SHOWN])
        lines.append(f"{w('constraints')}: {escape_text(listed)} _({w('correct_them')})_")
    lines += [f"⚠️ {escape_text(shorten(notice, NOTICE_CHARS))}" for notice in state.notices[:MAX_NOTICES_SHOWN]]
    found = found_line(state)
    return lines + ([found] if found else [])


def shows_constraints(state: RunState) -> bool:
    """A run shows the thread's constraints where they changed: a first run's, and a follow-up's
    that added or corrected some. A long thread's other runs need not repeat them."""
    return bool(state.run.constraints) and (state.constraints_changed or state.run.parent_run_id is None)


def render_status(state: RunState) -> str:
    """The assistant thread status: a few words while the run is active, empty once it ended."""
    if state.status.finished:
        return ""
    if state.status == RunStatus.queued:
        return "is waiting for a worker…"
    if state.status == RunStatus.planned:
        return "is waiting for the plan's approval…"
    return STATUS_BY_PHASE.get(state.phase) or shorten(f"is {state.phase or 'researching'}…", STATUS_CHARS)


def render_help(words: Words | None = None) -> str:
    """The answer to a mention with no question, in the team's language (`words`; English without)."""
    return (words or words_for(""))("help")
