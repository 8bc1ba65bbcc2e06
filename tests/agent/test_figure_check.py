"""Every figure a report states is checked against the passages its sentence cites."""
from __future__ import annotations

import json
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from anthropic import AsyncAnthropic
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import AgentConfig, SourceRegistry
from agent.events import SectionWritten
from agent.figures import Calculation, figures_in, sentences
from agent.model import ModelClient
from agent.tools.base import ToolContext
from agent.tools.report_tools import ReviseSection, ReviseSectionInput, WriteSection, WriteSectionInput
from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply, tool_reply
from tests.fakes.policies import _blocks, _text
from tests.helpers import research_events

PASSAGE = "The fund's expense ratio is 0.04% as of 31 March 2023, on net assets of $1.2 billion (1,250,000 shares)."


@pytest.fixture
async def ctx(fake_model: FakeAnthropic) -> AsyncIterator[ToolContext]:
    async def emit(_: object) -> None:
        return None

    async with httpx.AsyncClient() as http, AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        context = ToolContext(config=AgentConfig(), registry=SourceRegistry(), http=http,
                              model=ModelClient(client, main_model="m", small_model="s", timeout=30),
                              emit=emit, goal_question="q")
        context.registry.add("https://example.org/fund", "Fund facts", PASSAGE)  # [s1]
        context.registry.add("https://example.org/other", "Other", "Tracking difference was 0.05% in 2024.")  # [s2]
        yield context


async def write(ctx: ToolContext, body: str, title: str = "Fees") -> str:
    return (await WriteSection().run(WriteSectionInput(title=title, body=body), ctx)).text


async def test_a_figure_its_passage_states_is_saved_and_counted(ctx: ToolContext) -> None:
    text = await write(ctx, "The expense ratio is 0.04% as of March 2023 [s1].")
    assert text.startswith("section_id: sec1")
    assert ctx.sections["sec1"].figures_checked == 2  # 0.04% and 2023
    assert ctx.sections["sec1"].flags == []


async def test_a_wrong_figure_is_refused_with_what_the_cited_passage_says(ctx: ToolContext) -> None:
    text = await write(ctx, "The expense ratio is 0.03% [s1].")
    assert text.startswith("Not saved")
    assert "[s1] says 0.04%" in text and "not 0.03%" in text
    assert "2023" in text, "the refusal shows the passage's other figures, e.g. its date"
    assert not ctx.sections


@pytest.mark.parametrize("written", [
    "Assets were $1.2bn [s1].", "Assets were $1.2 billion [s1].", "Assets were $1,200 million [s1].",
    "Assets were US$1.2B [s1].", "It had 1,250,000 shares [s1].", "It had 1250000 shares [s1].",
    "The ratio was 0.04 % [s1].", "The ratio was 0.040% [s1].", "The ratio was 0.04 percent [s1].",
])
async def test_formatting_variants_of_a_stated_figure_pass(ctx: ToolContext, written: str) -> None:
    assert (await write(ctx, written)).startswith("section_id:"), written


async def test_units_are_not_converted(ctx: ToolContext) -> None:
    # 0.04% is 0.0004 as a fraction: a converted figure is a different figure on the page.
    assert (await write(ctx, "The expense ratio is 0.0004 of assets [s1].")).startswith("Not saved")


async def test_a_calculator_result_from_cited_inputs_may_be_quoted(ctx: ToolContext) -> None:
    ctx.calculations.append(Calculation("0.05% - 0.04%", "0.0001"))
    ctx.calculations.append(Calculation("(0.05 - 0.04) / 0.04 * 100", "25"))
    text = await write(ctx, "Tracking difference (0.05%) exceeds the fee (0.04%) by 25 percent [s1][s2].")
    assert text.startswith("section_id:"), text


async def test_a_calculator_result_whose_inputs_are_not_cited_is_refused(ctx: ToolContext) -> None:
    ctx.calculations.append(Calculation("(0.05 - 0.04) / 0.04 * 100", "25"))
    text = await write(ctx, "The gap is 25 percent of the fee [s1].")  # 0.05 is in [s2], not cited here
    assert text.startswith("Not saved") and "not 25 percent" in text


async def test_a_rounded_calculator_result_matches(ctx: ToolContext) -> None:
    ctx.calculations.append(Calculation("1.2 / 0.04", "30.1234"))
    assert (await write(ctx, "A ratio of 30.12 follows from 0.04% and $1.2 billion [s1].")).startswith("section_id:")


async def test_a_figure_without_a_marker_is_refused_then_flagged_when_sent_again(ctx: ToolContext) -> None:
    body = "The expense ratio is 0.04% [s1]. Rivals charge 0.09% on average."
    first = await write(ctx, body)
    assert first.startswith("Not saved") and "0.09% with no marker" in first
    second = await write(ctx, body)
    assert second.startswith("section_id:") and "0.09%" in second
    [flag] = ctx.sections["sec1"].flags
    assert (flag.figure, flag.why, flag.markers) == ("0.09%", "no citation", [])


async def test_an_insisting_model_gets_the_text_saved_with_the_figure_flagged(ctx: ToolContext) -> None:
    body = "The expense ratio is 0.03% [s1]."
    assert (await write(ctx, body)).startswith("Not saved")
    saved = await write(ctx, body)
    assert saved.startswith("section_id: sec1") and "not found in its source: 0.03%" in saved
    [flag] = ctx.sections["sec1"].flags
    assert (flag.figure, flag.markers, flag.why) == ("0.03%", ["s1"], "not found in [s1]")


async def test_insisting_with_a_different_citation_is_checked_afresh(ctx: ToolContext) -> None:
    assert (await write(ctx, "The expense ratio is 0.03% [s1].")).startswith("Not saved")
    assert (await write(ctx, "The expense ratio is 0.03% [s2].")).startswith("Not saved")


async def test_a_revision_is_checked_like_a_new_section(ctx: ToolContext) -> None:
    await write(ctx, "The expense ratio is 0.04% [s1].")
    revised = await ReviseSection().run(ReviseSectionInput(section_id="sec1", body="It is 0.4% [s1].",
                                                           reason="typo"), ctx)
    assert revised.text.startswith("Not saved") and ctx.sections["sec1"].body == "The expense ratio is 0.04% [s1]."


def test_small_counts_dates_and_markers_are_not_figures_to_check() -> None:
    assert [f.text for f in figures_in("Of the 3 funds [s12], one had 0.03% in 2024.")] == ["0.03%", "2024"]
    assert [f.text for f in figures_in("Use SHA256 and v2 in sec3")] == []


def test_markers_after_a_full_stop_stay_with_their_sentence() -> None:
    assert sentences("VTI costs 0.03%. [s1] SCHB costs 0.03%. [s2]") == ["VTI costs 0.03%. [s1]",
                                                                         "SCHB costs 0.03%. [s2]"]


MAGNITUDES = {"thousand": 3, "million": 6, "billion": 9}


@settings(max_examples=300, deadline=None)
@given(units=st.integers(1, 999_999), cents=st.integers(0, 99), scale=st.sampled_from(sorted(MAGNITUDES)))
def test_every_spelling_of_a_money_figure_normalises_to_one_value(units: int, cents: int, scale: str) -> None:
    value = Decimal(f"{units}.{cents:02d}")
    short = {"thousand": "k", "million": "m", "billion": "bn"}[scale]
    spellings = [f"${value} {scale}", f"${value}{short}", f"${units:,}.{cents:02d} {scale}", f"$ {value} {scale}"]
    keys = {figures_in(s, checked_only=False)[0].value for s in spellings}
    assert keys == {value.scaleb(MAGNITUDES[scale])}, spellings


@settings(max_examples=300, deadline=None)
@given(whole=st.integers(0, 10**9), frac=st.integers(0, 9999))
def test_thousands_separators_and_trailing_zeros_do_not_change_a_figure(whole: int, frac: int) -> None:
    plain = Decimal(f"{whole}.{frac:04d}")
    written = [f"{whole:,}.{frac:04d}%", f"{whole}.{frac:04d} %", f"{plain.normalize():f}%"]
    values = {figures_in(w, checked_only=False)[0].value for w in written}
    assert values == {plain}, written


class InsistingPolicy:
    """Reads the fake web like the standard policy, then writes a section with a wrong figure twice."""

    def __init__(self) -> None:
        self.attempts = 0

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request["messages"]
        last = _text(messages[-1])
        if (request.get("tool_choice") or {}).get("type") == "none" or "section_id: sec1" in last:
            return text_reply("<summary>The fee is 0.03% [s1].</summary>")
        if len(messages) == 1:
            return tool_reply(("web_search", {"query": "fund expense ratio"}))
        self.attempts += 1
        return tool_reply(("write_section", {"title": "Fees", "body": "The fee is 12345.6% [s1]."}))


async def test_a_run_whose_model_insists_publishes_the_flag(fake_model: FakeAnthropic, fake_web: Any) -> None:
    policy = InsistingPolicy()
    fake_model.policy = policy
    events, _ = await research_events(fake_model, fake_web, "fund expense ratio")
    refusals = [b for r in fake_model.requests for b in _blocks(r["messages"][-1])
                if b.get("type") == "tool_result" and "Not saved" in json.dumps(b.get("content"))]
    assert policy.attempts == 2 and len(refusals) == 1
    [written] = [e for e in events if isinstance(e, SectionWritten)]
    assert [f.figure for f in written.flags] == ["12345.6%"] and written.figures_checked == 1


async def test_the_calculator_records_its_results_for_the_figure_check(ctx: ToolContext) -> None:
    from agent.tools.calculator import Calculator, CalculatorInput

    answer = await Calculator().run(CalculatorInput(expression="(0.05 - 0.04) / 0.04 * 100"), ctx)
    assert answer.text.endswith("= 25") and not answer.is_error, answer.text
    text = await write(ctx, "The gap is 25 percent of the fee (0.04% against 0.05%) [s1][s2].")
    assert text.startswith("section_id:"), text
