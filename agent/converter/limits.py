"""The limits one conversion runs under, as the parent hands them to the child."""

from __future__ import annotations

from pydantic import BaseModel

from .. import defaults

__all__ = ["ConvertLimits"]


class ConvertLimits(BaseModel):
    """Each limit's default and reason is in agent/defaults.py; tests lower them to prove each one."""

    memory_bytes: int = defaults.CONVERT_MEMORY_BYTES
    cpu_seconds: int = defaults.CONVERT_CPU_SECONDS
    wall_seconds: float = defaults.CONVERT_WALL_SECONDS
    soft_seconds: float = defaults.CONVERT_SOFT_SECONDS
    max_chars: int = defaults.CONVERT_MAX_CHARS
    zip_max_ratio: int = defaults.ZIP_MAX_RATIO
    zip_ratio_floor_bytes: int = defaults.ZIP_RATIO_FLOOR_BYTES
    zip_max_total_bytes: int = defaults.ZIP_MAX_TOTAL_BYTES
    zip_max_members: int = defaults.ZIP_MAX_MEMBERS
    max_rows: int = defaults.MAX_SHEET_ROWS
    max_scanned_rows: int = defaults.MAX_SCANNED_ROWS
    max_columns: int = defaults.MAX_SHEET_COLUMNS
    max_sheets: int = defaults.MAX_SHEETS
    max_field_chars: int = defaults.MAX_CSV_FIELD_CHARS
    pdf_max_pages: int = defaults.PDF_MAX_PAGES
    pdf_max_page_bytes: int = defaults.PDF_MAX_PAGE_CONTENT_BYTES
    pdf_max_bytes: int = defaults.PDF_MAX_CONTENT_BYTES
    nice: int = defaults.OFFLOAD_NICE
