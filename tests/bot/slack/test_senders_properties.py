"""The mrkdwn property over every sender: every function of the bot that produces text for Slack
(found by reading the modules, so a new sender fails here until it is driven) is given hostile
input (question, constraints, notes, model text, page titles and passages, reasons) and nothing it
produces may mention anyone but the requester and the stopper, broadcast, link anywhere but
http(s)/mailto, or leave a `<` open: in the message mode and the stream mode alike."""
from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from datetime import UTC, datetime

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent import Finished, Progress, SectionWritten, Source, SourceAdded
from agent.events import Disagreement, SectionRevised
from bot.desk import recheck_digest, usage
from bot.publishing import message_parts, progress_render, report_render, stream_render
from bot.surface import evidence, reading, steering
from jobs import Run, RunState
from jobs.upkeep.recheck import RecheckRun
from jobs.budgets.spend import MonthUsage, RunSpend, Tally
from jobs.records.state import apply_event
from tests.fakes.hostile_text import documents, hostile_text, live, targets

# Each example renders every sender over several hostile documents (~3 s); 20 keep the suite inside its time.
PROFILE = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FETCHED = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)
REQUESTER, STOPPER = "U0ANA", "U0BOB"

SENDER_MODULES = [
    "bot.publishing.message_parts", "bot.publishing.plan_render", "bot.publishing.progress_render",
    "bot.publishing.report_blocks", "bot.publishing.report_spill", "bot.publishing.report_render",
    "bot.publishing.stream_render", "bot.desk.usage", "bot.desk.budgets", "bot.desk.recheck",
    "bot.desk.recheck_digest", "bot.desk.commands", "bot.surface.evidence", "bot.surface.steering",
    "bot.surface.listeners.commands", "bot.surface.listeners.mentions", "bot.surface.reading",
]
SLACK_TEXT = {"str", "str | None", "SlackMessage", "ReportRendering", "StreamView", "Chunk"}
# Functions that return text but are not senders (what each is).
NOT_SENDERS = {
    "report_spill.first_sentence": "a section's first sentence, escaped by the index that shows it",
    "stream_render.digest": "a hash of a chunk, never sent",
    "recheck.describe": "fixed words ('weekly', 'every 3 days')",
    "mentions.bot_user": "the bot's user id in the event's workspace, compared with, never sent",
    "usage.conversation_kind": "public, private or direct: a conversation's kind, compared with, never sent",
    "recheck.recheck_set_by": "who set a thread's re-checks: a user id, compared with, never sent",
}
# Senders that need Redis and Slack to answer (they read spend and budgets): what they send goes out
# through the wire's rule (bot/slack/outgoing.py) and their renderers are driven below.
AT_THE_WIRE = {
    "budgets.budget_reply": "a budget confirmation: amounts and a <#C…> channel link (tests/bot/desk)",
    "commands.spend_command": "usage or a budget reply (render_usage, budget_reply)",
    "usage.usage_reply": "render_usage with Slack's permalinks",
    "commands.answer": "the slash command's reply, sent in the ack through inert()",
}


def discovered() -> set[str]:
    found = set()
    for name in SENDER_MODULES:
        module = importlib.import_module(name)
        for fname, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ == name and not fname.startswith("_"):
                if str(function.__annotations__.get("return")) in SLACK_TEXT:
                    found.add(f"{name.rsplit('.', 1)[1]}.{fname}")
    return found


def _state(question: str, body: str, url: str, title: str, text: str) -> RunState:
    state = RunState(run=Run(channel="C0TEST", thread_ts="1700000000.000001", requester=REQUESTER, question=question,
                             team="T0TEST", constraints=[text, question]))
    source = Source(marker="s1", url=url, title=title, passage=text or "passage", retrieved_at=FETCHED)
    for event in (SourceAdded(source=source), Progress(phase="researching", activity=f"Reading {url}: {text}"),
                  Disagreement(text=title),
                  SectionWritten(section_id="a", title=title or "t", body=body + " [s1]"),
                  SectionRevised(section_id="a", body=body + " 0.04% [s1]", reason=text or "why")):
        state = apply_event(state, event)  # type: ignore[arg-type]
    return state


Texts = list[tuple[str, str]]  # (text, the kind Slack makes of it)


def _message(m: message_parts.SlackMessage) -> Texts:
    return [(m.text, "mrkdwn")] + [(t, "mrkdwn") for t in _strings(m.blocks)]


def _strings(node: object) -> list[str]:
    if isinstance(node, list):
        return [s for item in node for s in _strings(item)]
    if isinstance(node, dict):
        found = []
        for key, value in node.items():
            found += [value] if key in ("text", "title", "details") and isinstance(value, str) else _strings(value)
        return found
    return []


def _report(state: RunState) -> Texts:
    parts = report_render.render_report_parts(state)
    out = _message(parts.message)
    big = report_render.render_report_parts(state.model_copy(update={"sections": [state.sections[0]] * 60}))
    out += _message(big.message)
    if big.attachment is not None:
        out += [(big.attachment.title, "plain"), (big.attachment.comment, "mrkdwn")]  # a file title is shown as is
    return out


def _stream(state: RunState) -> Texts:
    view = stream_render.render_view(state)
    texts: Texts = [(view.title, "markdown")] + [(t, "markdown") for t in view.texts.values()]
    for card in view.tasks.values():
        texts += [(card["title"], "markdown"), (card.get("details", ""), "markdown")]
        texts += [(s["text"], "plain") for s in card.get("sources", [])]
    return texts


def _usage(question: str, title: str) -> Texts:
    spent = RunSpend(run_id="r1", team="T0TEST", channel="C0TEST", user=REQUESTER, thread_ts="1.1", question=question,
                     micros=1_000_000, requests=3, finished_at=FETCHED)
    month = MonthUsage(team="T0TEST", month="2026-11", total=Tally(key="total", micros=1_000_000, runs=1, requests=3),
                       channels=[Tally(key="C0TEST", micros=1_000_000, runs=1)],
                       users=[Tally(key=REQUESTER, micros=1_000_000, runs=1)], days=[], top_runs=[spent])
    return [(usage.render_usage(month, [], "C0TEST", {"r1": f"https://deepthread-test.slack.com/archives/{title}"}),
             "mrkdwn")]


def _digest(state: RunState, finished: RunState) -> Texts:
    recheck = RecheckRun(run_id="r2", parent_run_id="r1", channel="C0TEST", thread_ts="1.1", since=FETCHED)
    return [(recheck_digest.digest(recheck, state, finished, None), "mrkdwn")]


Driver = Callable[[RunState, RunState, str, str], Texts]
DRIVERS: dict[str, Driver] = {
    "progress_render.render_progress": lambda s, f, q, t: (_message(progress_render.render_progress(s))
                                                           + _message(progress_render.render_progress(f))),
    "report_render.render_report": lambda s, f, q, t: (_message(report_render.render_report(s))
                                                       + _message(report_render.render_report(f))),
    "report_render.render_report_parts": lambda s, f, q, t: _report(s) + _report(f),
    "progress_render.render_status": lambda s, f, q, t: [(progress_render.render_status(s), "mrkdwn")],
    "progress_render.render_help": lambda s, f, q, t: [(progress_render.render_help(), "mrkdwn")],
    "stream_render.render_view": lambda s, f, q, t: _stream(s) + _stream(f),
    "stream_render.end_text": lambda s, f, q, t: [(stream_render.end_text(f), "markdown")],
    "stream_render.controls_block": lambda s, f, q, t: [(x, "mrkdwn") for x in _strings(stream_render.controls_block(t))],
    "usage.render_usage": lambda s, f, q, t: _usage(q, t),
    "recheck_digest.digest": lambda s, f, q, t: _digest(s, f),
    "evidence.source_reply": lambda s, f, q, t: [(evidence.source_reply(s, 1), "mrkdwn"), (evidence.source_reply(s, 9), "mrkdwn")],
    "evidence.sources_reply": lambda s, f, q, t: [(evidence.sources_reply(s), "mrkdwn")],
    "reading.too_long": lambda s, f, q, t: [(reading.too_long(q), "mrkdwn"), (reading.too_long(t, "reply"), "mrkdwn")],
    "steering.section_history": lambda s, f, q, t: [(steering.section_history(s, None), "mrkdwn"),
                                                    (steering.section_history(s, q[:20]), "mrkdwn")],
}


def test_every_sender_is_driven_here_or_named_with_why() -> None:
    known = set(DRIVERS) | set(NOT_SENDERS) | set(AT_THE_WIRE)
    assert discovered() <= known, f"senders no test drives: {sorted(discovered() - known)}"
    assert set(DRIVERS) <= discovered(), "a driver for a function that is gone"


ALLOWED = (f"<@{REQUESTER}>", f"<@{STOPPER}>")


def _allowed_only(text: str) -> str:
    for mention in ALLOWED:
        text = text.replace(mention, "")
    return text


@PROFILE
@given(hostile_text.filter(str.strip), documents(), targets(), hostile_text, hostile_text,
       st.sampled_from(["completed", "stopped", "failed"]))
@example("<!here> <@U024BE7LH> [x](javascript:a)", "[x](!here) <!channel>", "@U1", "<#C1|x> `", "*_~ [y](!z)",
         "stopped")
def test_no_sender_sends_live_markup_for_hostile_input(question: str, body: str, url: str, title: str, text: str,
                                                       status: str) -> None:
    state = _state(question, body, url, title, text)
    reason = f"{text} · stopped by <@{STOPPER}> at 10:42 UTC" if status == "stopped" else text
    finished = apply_event(state, Finished(status=status, summary=body, reason=reason))  # type: ignore[arg-type]
    for name, driver in DRIVERS.items():
        for sent, kind in driver(state, finished, question, title):
            assert live(_allowed_only(sent), kind) == [], (name, kind, sent[:300])


def test_the_stream_shows_the_team_s_words_as_written_not_as_markup() -> None:
    """The issue's case: stream mode sent constraints and "Checking:" lines raw as markdown_text."""
    state = _state("q", "b", "https://x.test/a", "t", "Only <!here> **sources** after [2020](javascript:alert(1))")
    state = apply_event(state, Disagreement(text="VTI <@U999> vs [ITOT](ftp://x)"))
    view = stream_render.render_view(state)
    lines = list(view.texts.values())
    assert any(line.startswith("Constraints: Only &lt;\\!here&gt; \\*\\*sources\\*\\* after \\[2020\\]") for line in lines)
    assert any("**Checking:** VTI &lt;@U999&gt; vs \\[ITOT\\](ftp://x)" in line for line in lines), lines
