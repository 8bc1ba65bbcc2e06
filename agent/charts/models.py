"""A drawn chart as run state keeps it: what it shows, where it belongs, which passages back it.

The PNG itself is not here: it is stored in the run's result store under `blob_id`
(blobs.py), so run state stays small and the publisher reads the bytes only to upload them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

__all__ = ["Chart", "ChartKind", "ChartRow", "blob_id"]

ChartKind = Literal["bar", "line", "grouped_bar"]


class ChartRow(BaseModel):
    """One value of the table as the model wrote it, e.g. label "VTI", value "0.03% [s4]"."""

    label: str
    series: str = ""
    value: str


class Chart(BaseModel):
    chart_id: str  # "chart1": the model redraws a chart by this id
    version: int  # 1 for the first drawing; each redraw replaces the previous version
    section_id: str  # the report section that links it
    title: str
    kind: ChartKind
    x_label: str
    y_label: str
    unit: str = ""
    rows: list[ChartRow] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)  # markers, in order of first use: "s4"
    blob_id: str  # where the PNG is, in the result store of the run that drew it
    drawn_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    # The earlier run of the thread that drew it, for a chart a continuation inherited ("" = this
    # run): its PNG and its upload are that run's, so the report keeps linking the same file.
    run_id: str = ""

    def drawn_by(self, current_run_id: str) -> str:
        return self.run_id or current_run_id

    def key(self, current_run_id: str) -> str:
        """Unique in a thread's report: a continuation's own chart1 is not its parent's chart1."""
        return f"{self.drawn_by(current_run_id)}:{self.chart_id}"


def blob_id(chart_id: str, version: int) -> str:
    """The result-store id of one chart version's PNG (never a tool result id: those are r_…)."""
    return f"png_{chart_id}_v{version}"
