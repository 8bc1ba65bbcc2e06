"""The Export buttons under a finished report: one per format; a press uploads the report as that file
to the thread (bot/surface/listeners/actions.py, bot/desk/export.py)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["EXPORT_ACTION", "EXPORT_BLOCK_CHARS", "export_block"]

# action ids: report_export_pdf, report_export_docx, report_export_md (unique in their block, one listener)
EXPORT_ACTION = re.compile(r"^report_export_(pdf|docx|md)$")
BUTTONS = (("pdf", "⬇ PDF"), ("docx", "⬇ Word"), ("md", "⬇ Markdown"))
EXPORT_BLOCK_CHARS = sum(len(label) for _, label in BUTTONS)  # toward Slack's cumulative text limit


def export_block() -> dict[str, Any]:
    return {
        "type": "actions",
        "block_id": "report_export",
        "elements": [
            {
                "type": "button",
                "action_id": f"report_export_{fmt}",
                "value": fmt,
                "text": {"type": "plain_text", "text": label},
            }
            for fmt, label in BUTTONS
        ],
    }
