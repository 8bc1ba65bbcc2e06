"""A chart through the whole stack: the scripted model draws one from the passages it read,
the worker stores the PNG, and the publisher uploads it to the thread and links it from the
report's section (serve and worker processes, real Redis, the fake Slack, model and web)."""
from __future__ import annotations

import re
from typing import Any

from tests.e2e.stack import CHANNEL, report_text, start
from tests.fakes.anthropic import Reply, tool_reply
from tests.fakes.policies import ResearchPolicy, _blocks, _text
from tests.fakes.slack import FakeSlack
from tests.processes import Stack, wait_for

PERCENT = re.compile(r"\d+(?:\.\d+)?%")
TICKER = re.compile(r"\b(VTI|SCHB|ITOT)\b")


class ChartingPolicy(ResearchPolicy):
    """ResearchPolicy, plus: after the section is written, one bar chart of the percentages the
    read passages state, each value carrying the marker of the passage it came from."""

    def __init__(self) -> None:
        super().__init__()
        self.excerpts: list[tuple[str, str]] = []  # (marker, passage text)
        self.charted = False

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request["messages"]
        if len(messages) > 1 and not (request.get("tool_choice") or {}).get("type") == "none":
            calls = [b["name"] for b in _blocks(messages[-2]) if b["type"] == "tool_use"]
            results = _text(messages[-1])
            if calls[:1] == ["read_page"]:
                self.excerpts += re.findall(r'(\[s\d+\]) "([^"]+)"', results)
            if calls[:1] == ["write_section"] and not self.charted and "section_id: sec1" in results:
                self.charted = True
                return tool_reply(("chart", self.chart()))
        return super().__call__(request)

    def chart(self) -> dict[str, Any]:
        rows: dict[str, dict[str, str]] = {}
        for marker, passage in self.excerpts:
            ticker, figure = TICKER.search(passage), PERCENT.search(passage)
            if ticker and figure and ticker.group(1) not in rows:
                rows[ticker.group(1)] = {"label": ticker.group(1), "value": f"{figure.group(0)} {marker}"}
        return {"section_id": "sec1", "title": "Expense ratios", "kind": "bar", "x_label": "Fund",
                "y_label": "Expense ratio", "unit": "%", "rows": list(rows.values())}


def test_a_chart_is_uploaded_to_the_thread_and_linked_from_its_section(stack: Stack, fake_slack: FakeSlack,
                                                                        fake_model) -> None:
    policy = ChartingPolicy()
    fake_model.policy = policy
    thread, _, report_ts = start(stack, fake_slack)
    report = wait_for(lambda: "Final" in report_text(fake_slack, report_ts) and report_text(fake_slack, report_ts), 40,
                      "the final report")

    assert policy.charted and len(policy.chart()["rows"]) >= 2, "the model drew a chart of at least two values"
    [png] = [f for f in fake_slack.files() if f.filename.endswith(".png")]
    assert png.channel_id == CHANNEL and png.thread_ts == thread, "uploaded into the run's thread"
    assert png.content is not None and png.content.startswith(b"\x89PNG")
    link = re.search(r"<(https://[^|>]+/" + png.id + r"/[^|>]+)\|📊 Expense ratios>", report)
    assert link, f"the report links the chart's file:\n{report}"
    assert report.index("Findings") < link.start(), "under its section"
    assert re.search(r"_Chart sources:_ (\[\d+\] ?)+", report), "with the table's sources under it"
