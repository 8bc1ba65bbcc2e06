"""A long report as a canvas, end to end: real serve and worker processes, real Redis, the real
Slack and Anthropic clients talking to the fakes (the fake Slack keeps each canvas section by
section). The scripted model writes eight long sections — more than one message holds — then
revises the third and answers."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tests.e2e.stack import CHANNEL, start
from tests.e2e.stack import report_text as report
from tests.fakes import slack_canvases
from tests.fakes.anthropic import text_reply, tool_reply
from tests.fakes.policies import MARKER, extract, is_extraction
from tests.fakes.slack import FakeSlack
from tests.processes import Stack, wait_for

SECTIONS = 8
REVISED = 3


class LongReportPolicy:
    """search → eight long sections → revise section 3 → answer (each long enough that eight
    outgrow one Slack message). `before_revising` holds the revision back (the model thinking)
    until the test has seen what it needs, e.g. the canvas with all eight sections."""

    def __init__(self, before_revising: Callable[[], object] = lambda: None) -> None:
        self.turn = 0
        self.before_revising = before_revising

    def __call__(self, request: dict[str, Any]) -> Any:
        if is_extraction(request):
            return extract(request)
        seen = MARKER.findall(json.dumps(request["messages"]))
        forced = (request.get("tool_choice") or {}).get("type") == "none"
        self.turn += 1
        if self.turn == 1:
            return tool_reply(("web_search", {"query": "expense ratio VTI"}))
        if forced or not seen or self.turn > SECTIONS + 2:
            return text_reply(f"<summary>In short: the eight findings hold {seen[0] if seen else ''}.</summary>")
        if self.turn <= SECTIONS + 1:
            n = self.turn - 1
            body = " ".join(f"Claim {word} of finding {n} holds {seen[0]}." for word in "abcdefghijklmnopqrst" * 3)
            return tool_reply(("write_section", {"title": f"Finding {n}", "body": body}))
        self.before_revising()
        return tool_reply(("revise_section", {"section_id": f"sec{REVISED}", "reason": "a newer filing",
                                              "body": f"Corrected: finding {REVISED} holds after all {seen[-1]}."}))


def test_a_long_report_lives_in_a_canvas_whose_revised_section_is_replaced_in_place(
        stack: Stack, fake_slack: FakeSlack, fake_model) -> None:
    def written() -> object:
        canvases = slack_canvases.canvases(fake_slack)
        return canvases and len(canvases[0].headings()) == SECTIONS + 1  # the sections and the sources

    fake_model.policy = LongReportPolicy(before_revising=lambda: wait_for(written, 60, "the canvas"))
    thread, progress, report_ts = start(stack, fake_slack)
    wait_for(lambda: "Final" in report(fake_slack, report_ts), 90, "the final report")
    expected = ["Summary", *(f"{n}. Finding {n}" + (" (revised ×1)" if n == REVISED else "")
                             for n in range(1, SECTIONS + 1)), "Sources"]
    # The canvas is edited after the pinned message (its edits never hold the message back): wait for it.
    wait_for(lambda: slack_canvases.canvases(fake_slack)[0].headings() == expected, 30, "the canvas's final sections")
    [canvas] = slack_canvases.canvases(fake_slack)
    revised = canvas.section(f"{REVISED}. Finding {REVISED}")
    assert revised is not None and "Corrected: finding 3 holds after all" in revised.markdown
    assert "Claim a of finding 3" not in canvas.markdown(), "the first version of section 3 is gone"
    replaced = [e for e in canvas.edits if e["operation"] == "replace" and "Corrected" in str(e)]
    assert len(replaced) == 1 and replaced[0].get("section_id"), "replaced in place, by its section id"
    inserted = " ".join(str(e) for e in canvas.edits if e["operation"].startswith("insert"))
    assert all(f"{n}. Finding {n}" in inserted for n in range(1, SECTIONS + 1)), \
        "each section was inserted (a burst of them with one insert)"
    assert all(e.get("section_id") for e in canvas.edits if e["operation"] == "replace"), \
        "never the whole document: by section"
    assert canvas.access == {CHANNEL: "read"}

    pinned = report(fake_slack, report_ts)
    assert re.search(rf"<https://deepthread-test\.slack\.com/docs/T0TEST/{canvas.id}\|Report: ", pinned), pinned
    assert "In short: the eight findings hold" in pinned and "Final" in pinned
    assert not fake_slack.files(), "no file: the canvas holds the full report"


def test_a_workspace_without_canvases_gets_the_file_with_a_notice_decided_once(
        stack: Stack, fake_slack: FakeSlack, fake_model) -> None:
    slack_canvases.disable_canvases(fake_slack)
    for question in ("expense ratio VTI SCHB ITOT", "expense ratio of SCHB"):
        fake_model.policy = LongReportPolicy()
        thread, progress, report_ts = start(stack, fake_slack, question)
        wait_for(lambda t=report_ts: "Final" in report(fake_slack, t), 90, "the final report")
        pinned = report(fake_slack, report_ts)
        assert "is in the attached file" in pinned
        assert "Canvases are not available in this workspace: Slack answered `canvas_disabled_user_team`" in pinned
        files = wait_for(lambda t=thread: [f for f in fake_slack.files() if f.thread_ts == t], 20, "the file")
        assert "Corrected: finding 3 holds after all" in (files[0].content or b"").decode()
    assert len(fake_slack.calls_of("canvases.create")) == 1, "the refusal is remembered for the workspace"
    assert (stack.logs / "serve.log").read_text().count("refused canvases") == 1, "logged once"
