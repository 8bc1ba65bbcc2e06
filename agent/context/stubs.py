"""Stubs: what an elided result leaves behind, enough to decide whether to fetch it back."""

from __future__ import annotations

import re

from ..display import shorten
from .history import ResultRecord

COVERS_CHARS = 160  # what the result covers, shortened
TOP_DOMAINS = 3
MARKERS_LISTED = 6  # more than this are shown as a range


# Compiled here, not inline, so tests/test_linear_patterns.py times them with the rest.
_RESULT_LINE = re.compile(r"^\d++\. ", re.M)
_RESULT_TITLE = re.compile(r"^\d++\. (.+?) — ", re.M)  # lazy within one line: `.` stops at its end
_JUDGEMENT_LINE = re.compile(r"^Judgement: (.+)$", re.M)
_PAGE_LINE = re.compile(r"^Page: (.+)$", re.M)


def _call(record: ResultRecord) -> str:
    args = record.arguments
    if record.tool == "web_search":
        return f'web_search "{shorten(str(args.get("query", "")), 80)}"'
    if record.tool == "read_page":
        return f'read_page {shorten(str(args.get("url", "")), 100)} goal="{shorten(str(args.get("goal", "")), 60)}"'
    shown = ", ".join(f"{k}={shorten(str(v), 40)!r}" for k, v in args.items())
    return f"{record.tool}({shown})"


def _size(record: ResultRecord) -> str:
    thousands = record.tokens / 1000
    tokens = f"{thousands:.1f}k tokens" if thousands < 10 else f"{thousands:.0f}k tokens"
    if record.tool == "web_search":
        count = len(_RESULT_LINE.findall(record.text))
        return f"{count} results, {tokens}"
    if record.tool == "read_page":
        return f"{len(record.markers)} excerpts, {tokens}"
    return tokens


def _covers(record: ResultRecord) -> str:
    text = record.text
    if record.tool == "web_search":
        titles = _RESULT_TITLE.findall(text)[:3]
        return "; ".join(shorten(t, 50) for t in titles)
    if record.tool == "read_page":
        judgement = _JUDGEMENT_LINE.search(text)
        page = _PAGE_LINE.search(text)
        parts = [page.group(1) if page else "", judgement.group(1) if judgement else ""]
        return shorten(" — ".join(p for p in parts if p), COVERS_CHARS)
    body = text.split("\n", 1)[1] if "\n" in text else text
    return shorten(body, COVERS_CHARS)


def _markers(record: ResultRecord) -> str:
    markers = record.markers
    if not markers:
        return ""
    if len(markers) <= MARKERS_LISTED:
        return "cites " + "".join(f"[{m}]" for m in markers)
    return f"cites [{markers[0]}]–[{markers[-1]}] ({len(markers)} markers, still citable)"


def stub_for(record: ResultRecord) -> str:
    parts = [record.result_id, _call(record), _size(record)]
    if record.domains:
        parts.append("top sources: " + ", ".join(record.domains[:TOP_DOMAINS]))
    covers = _covers(record)
    if covers:
        parts.append(f"covers: {covers}")
    markers = _markers(record)
    if markers:
        parts.append(markers)
    parts.append(f"fetch_result('{record.result_id}')")
    return "[" + " | ".join(parts) + "]"
