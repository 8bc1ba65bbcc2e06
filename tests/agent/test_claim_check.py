"""Every cited claim held to its source: anchored, tested by the rules, judged by the small model,
refused once and kept marked, charged to the run, and never "supported" on a bad answer."""
from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from anthropic import AsyncAnthropic
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import AgentConfig, Budget, SourceRegistry, cited_claims
from agent.budget import Ledger
from agent.claims.judge import parse_judgement
from agent.model import ModelClient
from agent.report import assemble, to_markdown
from agent.tools.base import ToolContext
from agent.tools.report_tools import ReviseSection, ReviseSectionInput, WriteSection, WriteSectionInput
from agent.usage import Usage
from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply
from tests.fakes.policies import CLAIM_ITEM, _text, claim_verdicts, is_claim_check

FEES = ("As of 30 June 2024, VTI has an expense ratio of 0.03%, which works out to $3 a year on a $10,000 holding. "
        "SCHB also charges 0.03%, after Schwab cut it from 0.04% in October 2017.")
OCEAN = "About 90% of the extra heat ends up in the ocean. Only a few percent warms the air we live in."
SUPPORTED = "VTI has an expense ratio of 0.03% [s1]."
OFF_TOPIC = "SCHB is the most popular of the three funds [s2]."


class Judge:
    """The judge's side of the fake: `answer` for each claim-check request (the claims it was sent are kept)."""

    def __init__(self, answer: Any = claim_verdicts) -> None:
        self.answer = answer
        self.asked: list[list[int]] = []

    def __call__(self, request: dict[str, Any]) -> Reply:
        assert is_claim_check(request), "only the judge calls the model in these tests"
        self.asked.append([int(n) for n in CLAIM_ITEM.findall(_text(request["messages"][-1]))])
        return self.answer(request)


@pytest.fixture
async def ctx(fake_model: FakeAnthropic) -> AsyncIterator[ToolContext]:
    async def emit(_: object) -> None:
        return None

    ledger = Ledger.start(Budget())

    def charge(message: Any, is_turn: bool) -> None:
        ledger.charge(message.model, Usage.of(message), count_request=is_turn)

    async with httpx.AsyncClient() as http, AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        model = ModelClient(client, main_model="m", small_model="claude-haiku-5-5", timeout=30, on_usage=charge)
        context = ToolContext(config=AgentConfig(), registry=SourceRegistry(), http=http, model=model, emit=emit,
                              goal_question="Compare the fees of VTI, ITOT and SCHB", ledger=ledger)
        context.registry.add("https://plainmoney.example/fees", "What index funds cost", FEES)  # [s1]
        context.registry.add("https://climate.example/ocean", "The ocean stores the heat", OCEAN)  # [s2]
        yield context


async def write(ctx: ToolContext, body: str, title: str = "Fees") -> str:
    return (await WriteSection().run(WriteSectionInput(title=title, body=body), ctx)).text


async def test_a_supported_claim_is_judged_anchored_kept_plain_and_charged_to_the_run(ctx, fake_model) -> None:
    judge = fake_model.policy = Judge()
    text = await write(ctx, SUPPORTED)
    assert text.startswith("section_id: sec1"), text
    [claim] = ctx.sections["sec1"].claims
    assert (claim.verdict, claim.by, claim.marked) == ("supported", "judge", False)
    assert claim.anchor is not None and claim.anchor.marker == "s1" and claim.anchor.where == "passage"
    assert claim.anchor.quote.startswith("As of 30 June 2024, VTI has an expense ratio of 0.03%")
    assert FEES[claim.anchor.start : claim.anchor.end] == claim.anchor.quote and claim.anchor.score == 1.0
    assert judge.asked == [[1]]
    assert ctx.ledger is not None and ctx.ledger.cost_usd > 0, "the judge's tokens are the run's cost"
    assert ctx.ledger.requests == 0, "a small-model call, like a page read, is not a research request"


async def test_an_off_topic_claim_is_refused_without_a_model_call_then_kept_marked(ctx, fake_model) -> None:
    judge = fake_model.policy = Judge()
    body = f"{SUPPORTED}\n{OFF_TOPIC}"
    refused = await write(ctx, body)
    assert refused.startswith("Not saved: 1 cited claim(s) are not supported"), refused
    assert "SCHB is the most popular of the three funds" in refused and "is about something else" in refused
    assert not ctx.sections
    saved = await write(ctx, body)  # the same again: the model's considered choice
    assert saved.startswith("section_id: sec1") and "1 claim(s) marked for the reader" in saved
    kept, marked = ctx.sections["sec1"].claims
    assert (kept.verdict, kept.marked) == ("supported", False)
    assert (marked.verdict, marked.by, marked.marked) == ("unsupported", "rules", True)
    assert judge.asked == [[1]], "the off-topic claim never reached the model; the supported one was judged once"

    report = assemble("", list(ctx.sections.values()), {s.marker: s for s in ctx.registry.all()})
    [(_, shown)] = report.sections
    assert "funds [2]. ⚠" in shown and "0.03% [1]." in shown and "[1] ⚠" not in shown
    markdown = to_markdown("Fees", report)
    assert "2 cited claims checked against their sources · 1 not supported" in markdown
    assert "⚠ not found in [2]" in markdown and '→ "As of 30 June 2024, VTI has an expense ratio' in markdown

    changed = await write(ctx, f"{SUPPORTED}\nSCHB is by far the most popular of the three funds [s2].", "Again")
    assert changed.startswith("Not saved"), "a changed claim is a new one: told again"


@pytest.mark.parametrize("answer", [
    "They all look supported to me.",
    '{"verdicts": [{"n": 1, "verdict": "supported"}',
    '{"verdicts": [{"n": 1, "verdict": "probably"}]}',
    '{"verdicts": [{"n": "1", "verdict": "supported"}]}',
    '{"verdicts": [{"n": 1, "verdict": "supported"}, {"n": 1, "verdict": "supported"}]}',
    '{"verdicts": [{"n": 2, "verdict": "supported"}]}',
    '{"verdicts": [{"n": 1, "verdict": "supported", "confidence": 0.9}]}',
])
async def test_a_malformed_or_missing_answer_leaves_the_claim_unchecked(ctx, fake_model, answer: str) -> None:
    fake_model.policy = Judge(lambda _request: text_reply(answer))
    assert (await write(ctx, SUPPORTED)).startswith("section_id:")
    [claim] = ctx.sections["sec1"].claims
    assert (claim.verdict, claim.by) == ("unchecked", "none")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_no_answer_but_the_asked_json_ever_yields_a_verdict(answer: str) -> None:
    found = parse_judgement(answer, [1, 2, 3])
    assert all(v.verdict in ("supported", "partial", "unsupported") for v in found.values())
    if "{" not in answer or "verdicts" not in answer:
        assert found == {}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({"n": st.integers(0, 5), "verdict": st.sampled_from(
    ["supported", "partial", "unsupported", "Supported", "yes", ""])}), max_size=6))
def test_only_claims_answered_once_with_a_known_verdict_are_judged(verdicts: list[dict[str, Any]]) -> None:
    found = parse_judgement(json.dumps({"verdicts": verdicts}), [1, 2, 3])
    known = ("supported", "partial", "unsupported")
    if any(v["verdict"] not in known for v in verdicts):
        assert found == {}, "one bad entry makes the whole answer unusable"
        return
    once = {v["n"] for v in verdicts if [w["n"] for w in verdicts].count(v["n"]) == 1}
    assert set(found) == once & {1, 2, 3}


async def test_with_no_room_in_the_budget_the_claims_stay_unchecked_and_nothing_is_spent(ctx, fake_model) -> None:
    judge = fake_model.policy = Judge()
    assert ctx.ledger is not None
    ctx.ledger.budget = Budget(max_cost_usd=0.0001)
    assert (await write(ctx, SUPPORTED)).startswith("section_id:")
    assert [c.verdict for c in ctx.sections["sec1"].claims] == ["unchecked"]
    assert judge.asked == [] and ctx.ledger.cost_usd == 0


async def test_a_revision_rejudges_only_the_sentences_it_changes(ctx, fake_model) -> None:
    judge = fake_model.policy = Judge()
    second = "SCHB also charges 0.03% after Schwab cut it [s1]."
    assert (await write(ctx, f"{SUPPORTED} {second}")).startswith("section_id:")
    assert judge.asked == [[1, 2]]
    revised = "SCHB charges 0.03%, cut from 0.04% in October 2017 [s1]."
    result = await ReviseSection().run(ReviseSectionInput(section_id="sec1", body=f"{SUPPORTED} {revised}",
                                                          reason="the cut's date"), ctx)
    assert not result.is_error, result.text
    assert judge.asked == [[1, 2], [1]], "the unchanged sentence kept its verdict"
    assert [c.verdict for c in ctx.sections["sec1"].claims] == ["supported", "supported"]


async def test_refused_claims_survive_a_checkpoint(ctx, fake_model) -> None:
    fake_model.policy = Judge()
    await write(ctx, OFF_TOPIC)
    snapshot = json.loads(json.dumps(ctx.snapshot()))
    fresh = ToolContext(config=ctx.config, registry=ctx.registry, http=ctx.http, model=ctx.model, emit=ctx.emit,
                        goal_question=ctx.goal_question)
    fresh.restore(snapshot)
    assert (await write(fresh, OFF_TOPIC)).startswith("section_id:"), "sent again after a resume: saved, marked"
    assert fresh.sections["sec1"].claims[0].marked


async def test_cited_claims_gives_each_claim_with_its_anchors_and_verdict(ctx, fake_model) -> None:
    fake_model.policy = Judge()
    await write(ctx, "VTI and SCHB both charge 0.03%, and about 90% of extra heat ends up in the ocean [s1][s2].")

    class State:
        sections = list(ctx.sections.values())
        sources = {s.marker: s for s in ctx.registry.all()}

    [claim] = cited_claims(State())
    assert claim.section_id == "sec1" and claim.markers == ["s1", "s2"] and claim.verdict == "supported"
    assert {a.marker for a in claim.anchors} == {"s1", "s2"}, "an anchor in each cited source"
    assert claim.source_urls == {"s1": "https://plainmoney.example/fees", "s2": "https://climate.example/ocean"}


async def test_off_in_the_configuration_checks_nothing(ctx, fake_model) -> None:
    judge = fake_model.policy = Judge()
    ctx.config = AgentConfig(claim_check=False)
    assert (await write(ctx, OFF_TOPIC)).startswith("section_id:")
    assert ctx.sections["sec1"].claims == [] and judge.asked == []
