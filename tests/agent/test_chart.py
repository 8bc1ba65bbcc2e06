"""The chart tool: a small table of cited values, checked like a section's figures, drawn as a PNG."""
from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from anthropic import AsyncAnthropic

from agent import AgentConfig, SourceRegistry
from agent.charts.blobs import load_png
from agent.charts.table import MAX_VALUES
from agent.events import ChartDrawn
from agent.figures import Calculation
from agent.model import ModelClient
from agent.tools.base import ToolContext
from agent.tools.chart import MAX_VERSIONS_PER_CHART, ChartInput, ChartTool
from agent.tools.report_tools import WriteSection, WriteSectionInput
from tests.fakes.anthropic import FakeAnthropic

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LOOKED_AT = Path("/tmp/deepthread-chart.png")  # the brief asks for one chart to be looked at by eye


@pytest.fixture
async def ctx(fake_model: FakeAnthropic) -> AsyncIterator[ToolContext]:
    events: list[Any] = []

    async def emit(event: object) -> None:
        events.append(event)

    async with httpx.AsyncClient() as http, AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        context = ToolContext(config=AgentConfig(), registry=SourceRegistry(), http=http,
                              model=ModelClient(client, main_model="m", small_model="s", timeout=30),
                              emit=emit, goal_question="q")
        context.registry.add("https://investor.vanguard.com/vti", "VTI", "Expense ratio 0.03% as of 04/29/2024.")  # s1
        context.registry.add("https://www.ishares.com/itot", "ITOT", "Net expense ratio 0.03%; gross 0.05%.")  # s2
        context.registry.add("https://www.schwab.com/schb", "SCHB", "SCHB expense ratio 0.03%, down from 0.04%.")  # s3
        context.registry.add("https://example.org/aum", "AUM", "VTI holds $1.6 trillion; ITOT $65.4 billion.")  # s4
        context.__dict__["events"] = events
        text = (await WriteSection().run(WriteSectionInput(title="Fees", body="All three charge 0.03% [s1][s2][s3]."),
                                         context)).text
        assert text.startswith("section_id: sec1")
        yield context


def fees(**changes: Any) -> ChartInput:
    args: dict[str, Any] = dict(
        section_id="sec1", title="Expense ratios, 2024", kind="grouped_bar", x_label="Fund", y_label="Expense ratio",
        unit="%",
        rows=[{"label": "VTI", "series": "net", "value": "0.03% [s1]"},
              {"label": "ITOT", "series": "net", "value": "0.03% [s2]"},
              {"label": "ITOT", "series": "gross", "value": "0.05% [s2]"},
              {"label": "SCHB", "series": "net", "value": "0.03% [s3]"},
              {"label": "SCHB", "series": "earlier", "value": "0.04% [s3]"}],
    )
    args.update(changes)
    return ChartInput(**args)


def drawn(ctx: ToolContext) -> list[ChartDrawn]:
    return [e for e in ctx.__dict__["events"] if isinstance(e, ChartDrawn)]


async def test_values_their_passages_state_are_drawn_as_a_png_in_the_result_store(ctx: ToolContext) -> None:
    result = await ChartTool().run(fees(), ctx)

    assert not result.is_error, result.text
    assert result.text.startswith("chart_id: chart1")
    [event] = drawn(ctx)
    chart = event.chart
    assert (chart.chart_id, chart.version, chart.section_id) == ("chart1", 1, "sec1")
    assert chart.sources == ["s1", "s2", "s3"], "the table's sources, in order of first use"
    png = await load_png(ctx.results, chart.blob_id)
    assert png is not None and png.startswith(PNG_MAGIC)
    assert "png" not in event.model_dump_json().lower().replace(chart.blob_id.lower(), ""), "no bytes in the event"
    LOOKED_AT.write_bytes(png)


async def test_a_value_not_in_its_cited_passage_is_refused_with_what_the_passage_says(ctx: ToolContext) -> None:
    rows = [{"label": "VTI", "value": "0.04% [s1]"}, {"label": "ITOT", "value": "0.03% [s2]"}]
    result = await ChartTool().run(fees(kind="bar", rows=rows), ctx)

    assert result.is_error
    assert result.text.startswith("Not drawn")
    assert 'row "VTI": [s1] says 0.03%' in result.text and "not 0.04%" in result.text
    assert "correct the value, or cite the passage that states it" in result.text
    assert drawn(ctx) == [], "nothing drawn, nothing announced"


async def test_small_whole_numbers_are_checked_too(ctx: ToolContext) -> None:
    """A section lets '3 funds' pass unchecked; on a chart every bar is a claim."""
    rows = [{"label": "VTI", "value": "3 [s1]"}, {"label": "ITOT", "value": "0.03 [s2]"}]
    result = await ChartTool().run(fees(kind="bar", unit="", rows=rows), ctx)
    assert result.is_error and "not 3" in result.text


async def test_a_value_without_a_marker_and_an_unknown_marker_are_refused(ctx: ToolContext) -> None:
    no_marker = await ChartTool().run(fees(kind="bar", rows=[{"label": "VTI", "value": "0.03%"},
                                                              {"label": "ITOT", "value": "0.03% [s2]"}]), ctx)
    assert no_marker.is_error and '"0.03%" has no marker: append the [sN]' in no_marker.text

    unknown = await ChartTool().run(fees(kind="bar", rows=[{"label": "VTI", "value": "0.03% [s99]"},
                                                           {"label": "ITOT", "value": "0.03% [s2]"}]), ctx)
    assert unknown.is_error and "unknown citation [s99]" in unknown.text
    assert drawn(ctx) == []


async def test_mixed_units_are_refused(ctx: ToolContext) -> None:
    rows = [{"label": "VTI", "value": "0.03% [s1]"}, {"label": "ITOT", "value": "$65.4 billion [s4]"}]
    result = await ChartTool().run(fees(kind="bar", unit="", rows=rows), ctx)
    assert result.is_error and "the values mix units: percentages" in result.text and "USD amounts" in result.text


async def test_too_many_rows_and_a_missing_section_are_refused(ctx: ToolContext) -> None:
    rows = [{"label": f"{2000 + n}", "value": "0.03% [s1]"} for n in range(MAX_VALUES + 1)]
    many = await ChartTool().run(fees(kind="line", rows=rows), ctx)
    assert many.is_error and f"{MAX_VALUES + 1} values is too many" in many.text

    lost = await ChartTool().run(fees(section_id="sec9"), ctx)
    assert lost.is_error and "no section 'sec9'" in lost.text and "sec1 (Fees)" in lost.text


async def test_a_computed_value_passes_when_the_calculator_made_it_from_cited_figures(ctx: ToolContext) -> None:
    ctx.calculations.append(Calculation("0.05 - 0.03", "0.02"))
    rows = [{"label": "ITOT gross − net", "value": "0.02% [s2]"}, {"label": "VTI", "value": "0.03% [s1]"}]
    result = await ChartTool().run(fees(kind="bar", title="Fee gap", rows=rows), ctx)
    assert not result.is_error, result.text


async def test_a_redraw_is_the_next_version_and_a_second_chart_of_the_same_title_is_refused(ctx: ToolContext) -> None:
    tool = ChartTool()
    assert not (await tool.run(fees(), ctx)).is_error
    same_title = await tool.run(fees(), ctx)
    assert same_title.is_error and "chart_id 'chart1'" in same_title.text

    redrawn = await tool.run(fees(chart_id="chart1", kind="bar", rows=[{"label": "VTI", "value": "0.03% [s1]"},
                                                                       {"label": "SCHB", "value": "0.03% [s3]"}]), ctx)
    assert not redrawn.is_error and "version 2, replacing version 1" in redrawn.text
    first, second = drawn(ctx)
    assert (second.chart.chart_id, second.chart.version) == ("chart1", 2)
    assert second.chart.blob_id != first.chart.blob_id
    assert await load_png(ctx.results, second.chart.blob_id) is not None

    for _ in range(MAX_VERSIONS_PER_CHART - 2):
        assert not (await tool.run(fees(chart_id="chart1"), ctx)).is_error
    capped = await tool.run(fees(chart_id="chart1"), ctx)
    assert capped.is_error and "revise_section" in capped.text


async def test_a_resumed_run_keeps_numbering_its_charts(ctx: ToolContext) -> None:
    tool = ChartTool()
    await tool.run(fees(), ctx)
    resumed = ChartTool()
    resumed.restore(tool.snapshot())
    result = await resumed.run(fees(chart_id="chart1"), ctx)
    assert not result.is_error and "version 2" in result.text
