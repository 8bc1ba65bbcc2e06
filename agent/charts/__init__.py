"""Charts: a small table of cited values, checked like any figure, drawn as a PNG.

Owns what a chart is (models), the check of its table, value by value like any figure (table), its
PNG in the result store (blobs) and the drawing (draw). Knows nothing of the chart tool that
asks for one (agent/tools/chart.py), of run state or of the Slack upload (the publisher).

`models` (what run state keeps) and `table` (the check) are light and import nothing that
imports the events module (which imports `models`); `blobs` (the PNG in the result store) and
`draw` (altair and vl-convert, imported only when a chart is drawn) are imported by name.
"""

from __future__ import annotations

from .models import Chart, ChartKind, ChartRow, blob_id
from .table import CheckedTable, check_table

__all__ = ["Chart", "ChartKind", "ChartRow", "CheckedTable", "blob_id", "check_table"]
