"""chart: a small table of cited values drawn as a PNG for the thread, linked from its section.

The table is checked before anything is drawn (agent/charts/table.py: the same figure check
as a section's sentences); the PNG goes to the run's result store and a ChartDrawn event
tells the publisher to upload it. A redraw (same chart_id) is the next version of the chart
and replaces the previous one in the thread.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, Field

from .. import offload
from ..activity import say
from ..charts import Chart, ChartKind, ChartRow, blob_id, check_table
from ..charts.blobs import save_png
from ..citations import UnknownCitation
from ..display import domain_of
from ..events import ChartDrawn
from .base import Tool, ToolContext, ToolResult

__all__ = ["MAX_CHARTS_PER_RUN", "MAX_VERSIONS_PER_CHART", "ChartInput", "ChartTool"]

log = logging.getLogger(__name__)

# Each chart is a file in the thread: a few that matter, not one per paragraph.
MAX_CHARTS_PER_RUN = 6
# Each version is a new upload (the old one deleted); past this, fix the section's text instead.
MAX_VERSIONS_PER_CHART = 4
MAX_TITLE_CHARS = 100
MAX_AXIS_CHARS = 60
SOURCE_DOMAINS_SHOWN = 4  # on the PNG's subtitle; the report lists every source under the link


class ChartRowInput(BaseModel):
    label: str = Field(
        description="The x-axis category ('VTI') or, for a line over time, a date: '2024', '2024-06' or '2024-06-30'."
    )
    series: str = Field(
        default="",
        description="Which bar of a group ('2023', '2024') or which line; leave empty for a plain bar chart or a single line.",
    )
    value: str = Field(
        description="One figure followed by the marker of the passage that states it, e.g. '0.03% [s4]'."
    )


class ChartInput(BaseModel):
    section_id: str = Field(description="The report section the chart illustrates (from write_section), e.g. 'sec2'.")
    title: str = Field(description="What the chart shows, e.g. 'Expense ratios, 2024'.")
    kind: ChartKind = Field(
        description="'bar' (one value per label), 'grouped_bar' (one per label and series), 'line' (values over time)."
    )
    x_label: str = Field(description="The x axis, e.g. 'Fund' or 'Year'.")
    y_label: str = Field(description="What the values measure, e.g. 'Expense ratio'.")
    unit: str = Field(
        default="",
        description="The values' unit for the axis, e.g. '%', 'USD', 'tonnes'; empty to take it from the values.",
    )
    rows: list[ChartRowInput] = Field(description="The table: 2 to 40 values, all in one unit.")
    chart_id: str = Field(
        default="", description="To redraw a chart you drew before, its chart_id; empty for a new chart."
    )


class ChartTool(Tool):
    name = "chart"
    stage = "drawing a chart"
    Input = ChartInput
    description = (
        "Draw a small chart (bar, grouped bar, or line over time) of figures you have already found, when a "
        "comparison is easier to see than to read. The team sees it as an image in the thread, and the report "
        "links it from its section with its sources under it. Write the section first: the chart needs its "
        "section_id. Each row is a label (the category, or a date such as 2024 or 2024-06 for a line), an "
        "optional series (for grouped bars or several lines) and a value: one figure and the marker of the "
        "passage that states it, e.g. '0.03% [s4]'. Every value is checked against its passage like a figure "
        "in a section; all values share one unit; 2 to 40 values. Answers with `chart_id: <id>`; to correct a "
        "chart, call chart again with that chart_id and the new version replaces the old one. Not for a single "
        "figure or text (write those in the section) and not for figures no passage states."
    )

    def __init__(self) -> None:
        self.charts: dict[str, Chart] = {}  # chart id → its latest version, this run

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, ChartInput)
        return say("charting", title=args.title)

    def snapshot(self) -> Any:
        return {chart_id: chart.model_dump(mode="json") for chart_id, chart in self.charts.items()}

    def restore(self, state: Any) -> None:
        self.charts = {chart_id: Chart.model_validate(raw) for chart_id, raw in (state or {}).items()}

    def _target(self, args: ChartInput, title: str) -> tuple[str, int] | ToolResult:
        """The chart id and version this call draws, or why it may not."""
        wanted = args.chart_id.strip()
        if wanted:
            previous = self.charts.get(wanted)
            if previous is None:
                known = ", ".join(f"{c.chart_id} ({c.title})" for c in self.charts.values()) or "none yet"
                return ToolResult(
                    f"There is no chart {wanted!r}. Charts drawn: {known}. Leave chart_id empty for a new chart.",
                    is_error=True,
                )
            if previous.version >= MAX_VERSIONS_PER_CHART:
                return ToolResult(
                    f"Not drawn: {wanted} has been drawn {previous.version} times, the most a chart may be. "
                    "Correct the figures in the section's text with revise_section instead.",
                    is_error=True,
                )
            return wanted, previous.version + 1
        for chart in self.charts.values():
            if chart.title.lower() == title.lower():
                return ToolResult(
                    f'A chart titled "{title}" exists already (chart_id: {chart.chart_id}); call chart with '
                    f"chart_id '{chart.chart_id}' to redraw it.",
                    is_error=True,
                )
        if len(self.charts) >= MAX_CHARTS_PER_RUN:
            return ToolResult(
                f"Not drawn: this run has {len(self.charts)} charts, the most it may post. Redraw one of them "
                "(chart_id) if it shows the same comparison, or state the figures in the section.",
                is_error=True,
            )
        return f"chart{len(self.charts) + 1}", 1

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, ChartInput)
        section = ctx.sections.get(args.section_id.strip())
        if section is None:
            known = ", ".join(f"{s.section_id} ({s.title})" for s in ctx.sections.values())
            hint = f"Sections: {known}." if known else "No section is written yet: write_section first."
            return ToolResult(f"There is no section {args.section_id!r} to attach the chart to. {hint}", is_error=True)
        title = " ".join(args.title.split())[:MAX_TITLE_CHARS]
        x_label = " ".join(args.x_label.split())[:MAX_AXIS_CHARS]
        y_label = " ".join(args.y_label.split())[:MAX_AXIS_CHARS]
        unit = " ".join(args.unit.split())[:MAX_AXIS_CHARS]
        if not title or not x_label or not y_label:
            return ToolResult("Give the chart a title, an x_label and a y_label.", is_error=True)
        target = self._target(args, title)
        if isinstance(target, ToolResult):
            return target
        chart_id, version = target
        rows = [ChartRow(label=r.label, series=r.series, value=r.value) for r in args.rows]
        try:
            ctx.registry.check("\n".join(r.value for r in rows))
        except UnknownCitation as exc:
            return ToolResult(f"Not drawn: {exc}", is_error=True)
        passages = {s.marker: s.passage for s in ctx.registry.all()}
        table = check_table(rows, args.kind, unit, passages, ctx.calculations)
        if table.refusal is not None:
            return ToolResult(table.refusal, is_error=True)

        domains = list(dict.fromkeys(_domain(ctx, m) for m in table.sources))
        note = (
            "Sources: "
            + " · ".join(domains[:SOURCE_DOMAINS_SHOWN])
            + (" · …" if len(domains) > SOURCE_DOMAINS_SHOWN else "")
        )
        from ..charts.draw import build_spec, draw_png  # altair loads on the first chart only

        try:
            spec = build_spec(
                title=title, kind=args.kind, x_label=x_label, y_label=y_label, unit=unit, table=table, note=note
            )
            png = await offload.cpu(draw_png, spec)  # CPU work: the loop's heartbeat must not wait
        except Exception as exc:  # a drawing bug must not end the run; the model can carry on without the chart
            log.exception("chart %s could not be drawn", chart_id)
            return ToolResult(
                f"The chart could not be drawn ({type(exc).__name__}). Its figures are fine: state them in the "
                "section instead, or try a simpler kind of chart.",
                is_error=True,
            )
        chart = Chart(
            chart_id=chart_id,
            version=version,
            section_id=section.section_id,
            title=title,
            kind=args.kind,
            x_label=x_label,
            y_label=y_label,
            unit=unit,
            rows=rows,
            sources=table.sources,
            blob_id=blob_id(chart_id, version),
        )
        await save_png(ctx.results, chart.blob_id, png, title=title)
        self.charts[chart_id] = chart
        await ctx.emit(ChartDrawn(chart=chart))
        cited = ", ".join(f"[{m}]" for m in table.sources)
        replaced = f" (version {version}, replacing version {version - 1})" if version > 1 else ""
        return ToolResult(
            f'chart_id: {chart_id}\nDrew "{title}"{replaced}: {len(table.points)} values citing {cited}. '
            f"It is posted in the thread and linked from section {section.section_id} ({section.title}); "
            f"to correct it, call chart again with chart_id '{chart_id}'."
        )


def _domain(ctx: ToolContext, marker: str) -> str:
    source = ctx.registry.get(marker)
    if source is None:
        return marker
    try:
        return domain_of(source.url)
    except ValueError:
        return source.title or marker
