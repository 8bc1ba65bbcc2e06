"""A checked table drawn as a PNG: a Vega-Lite spec built with altair, rendered by vl-convert.

vl-convert renders in-process (no browser, no network). Its first call starts its JavaScript
runtime (about half a second), so callers run `draw_png` in a thread, never on the event loop.
altair and vl_convert are imported on first use: the rest of the engine starts without them.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from .models import ChartKind
from .table import CheckedTable

__all__ = ["CHART_HEIGHT", "CHART_WIDTH", "PNG_SCALE", "build_spec", "draw_png"]

CHART_WIDTH = 640  # pixels before scaling: readable in Slack's preview without opening it
CHART_HEIGHT = 340
PNG_SCALE = 2  # sharp on high-density screens; about 40–80 KB per chart
# Big numbers are shown in these units so the axis reads "USD, billions" and not 1,200,000,000.
_MAGNITUDES = ((Decimal(10) ** 12, "trillions"), (Decimal(10) ** 9, "billions"), (Decimal(10) ** 6, "millions"))
# x labels of a line chart that are dates: 2024, 2024-06, 2024-06-30.
_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")


def _magnitude(table: CheckedTable) -> tuple[Decimal, str]:
    if table.unit_kind == "%":
        return Decimal(1), ""
    largest = max((abs(p.value) for p in table.points), default=Decimal(0))
    for size, words in _MAGNITUDES:
        if largest >= size:
            return size, words
    return Decimal(1), ""


def _iso(label: str) -> str:
    parts = label.split("-")
    return "-".join(parts + ["01"] * (3 - len(parts)))


def axis_title(y_label: str, unit: str, table: CheckedTable) -> str:
    _, words = _magnitude(table)
    shown = unit.strip() or table.unit_kind
    inner = ", ".join(p for p in (shown, words) if p)
    return f"{y_label} ({inner})" if inner else y_label


def build_spec(
    *, title: str, kind: ChartKind, x_label: str, y_label: str, unit: str, table: CheckedTable, note: str
) -> dict[str, Any]:
    """The Vega-Lite spec (a dict). `note` goes under the title: the chart's sources."""
    import altair as alt

    size, _ = _magnitude(table)
    dated = kind == "line" and all(_DATE.match(p.label) for p in table.points)
    rows = [
        {
            "x": _iso(p.label) if dated else p.label,
            "series": p.series,
            "y": float(p.value / size),
            "shown": p.written,
        }
        for p in table.points
    ]
    order = list(dict.fromkeys(p.label for p in table.points))  # the model's order, not alphabetical
    y = alt.Y("y:Q", title=axis_title(y_label, unit, table))
    series = list(dict.fromkeys(p.series for p in table.points if p.series))  # legend in the model's order too
    color: Any = (
        alt.Color(
            "series:N", title=None, sort=series, scale=alt.Scale(domain=series), legend=alt.Legend(orient="bottom")
        )
        if series
        else alt.value("#2b6cb0")
    )
    base = alt.Chart(alt.Data(values=rows))
    if kind == "line":
        x: Any = (
            alt.X("x:T", title=x_label, scale=alt.Scale(type="utc"), axis=_time_axis(table))
            if dated
            else alt.X("x:O", title=x_label, sort=order, axis=alt.Axis(labelAngle=0))
        )
        lines = base.mark_line(point=True, strokeWidth=2.5).encode(x=x, y=y, color=color)
        labels = base.mark_text(dy=-10, fontSize=11).encode(x=x, y="y:Q", text="shown:N")
        layered = alt.layer(lines, labels)
    else:
        x = alt.X("x:N", title=x_label, sort=order, axis=alt.Axis(labelAngle=0, labelLimit=140))
        offset: dict[str, Any] = {"xOffset": alt.XOffset("series:N", sort=series)} if kind == "grouped_bar" else {}
        bars = base.mark_bar().encode(x=x, y=y, color=color, **offset)
        labels = base.mark_text(dy=-7, fontSize=11).encode(x=x, y="y:Q", text="shown:N", **offset)
        layered = alt.layer(bars, labels)
    chart = layered.properties(
        width=CHART_WIDTH,
        height=CHART_HEIGHT,
        title=alt.TitleParams(text=title, subtitle=[note] if note else [], anchor="start", fontSize=16),
    ).configure_view(stroke=None)
    return chart.to_dict()


def _time_axis(table: CheckedTable) -> Any:
    """Ticks at the precision the labels were given in: years for "2024", months for "2024-06"."""
    import altair as alt

    longest = max(len(p.label) for p in table.points)
    if longest == 4:
        return alt.Axis(formatType="utc", format="%Y", tickCount={"interval": "year", "step": 1}, labelAngle=0)
    if longest == 7:
        return alt.Axis(formatType="utc", format="%b %Y", labelAngle=0)
    return alt.Axis(formatType="utc", format="%d %b %Y", labelAngle=0)


def draw_png(spec: dict[str, Any]) -> bytes:
    """Blocking: render the spec to PNG bytes (call it in a thread)."""
    import vl_convert as vlc

    return bytes(vlc.vegalite_to_png(spec, scale=PNG_SCALE))
