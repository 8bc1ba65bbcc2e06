"""The linear rewrites of issue 35 item 2 read ordinary text exactly as the patterns they replace:
each old pattern is kept here as the reference and compared on generated text built from the
characters it cares about."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from agent import salvage
from agent.answer import tagged_texts
from agent.json_text import json_object_text
from agent.tools import extract, links
from bot.desk import budgets
from bot.publishing.report_spill import _without_footnote_marks as without_footnote_marks
from bot.slack import canvas_markdown, mrkdwn_escaping


def _text(alphabet: str, size: int = 40) -> st.SearchStrategy[str]:
    return st.text(st.sampled_from(alphabet) | st.characters(), max_size=size)


def _made_of(*parts: str) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(parts) | st.text(max_size=2), max_size=20).map("".join)


@given(_made_of("<summary>", "</summary>", "<SUMMARY>", "</Summary>", "x", " ", "\n", "<", "/"))
def test_summary_tags_are_read_as_the_lazy_pattern_read_them(text: str) -> None:
    assert tagged_texts(text) == re.findall(r"<summary>(.*?)</summary>", text, re.S | re.I)


@given(_made_of("{", "}", '"a"', ":", "1", " ", "\n", "x"))
def test_the_json_object_is_what_greedy_braces_matched(text: str) -> None:
    old = re.search(r"\{.*\}", text, re.S)
    assert json_object_text(text) == (old.group(0) if old else None)


@given(_text("#-* \t\n\r\x0bx\u2028ab"))
def test_headings_and_bullets_are_dropped_as_before(body: str) -> None:
    old = re.compile(r"^\s*#+\s*|^\s*[-*]\s+", re.MULTILINE)
    assert " ".join(salvage._HEADING.sub("", body).split()) == " ".join(old.sub("", body).split())


@given(_made_of(extract._SPACE_HOLDER, " ", "\t", "\n", "a"))
def test_held_spaces_are_released_as_before(text: str) -> None:
    old = re.compile(f"[ \t]*{extract._SPACE_HOLDER}[ \t]*")
    assert extract.release_held_spaces(text) == old.sub(" ", text)


@given(_made_of("【", "】", "†", "L", "1", "23", " ", "\n", "x", "a"))
def test_link_ids_are_read_as_before(value: str) -> None:
    old = re.compile(r"^\s*【?\s*L?(\d+)\s*(?:†[^】]*)?】?\s*$").match(value)
    new = links.LINK_ID_RE.match(value)
    assert (new.group(1) if new else None) == (old.group(1) if old else None)


@given(_made_of("$", "1", "1,000", ".", "5", " ", "usd", "dollars", "/", "per ", "a ", "an ", "month", "mo", "x"))
def test_budget_amounts_are_read_as_before(raw: str) -> None:
    old = re.compile(
        r"^(?:\$\s*(?P<a>[\d,]*\.?\d+)|(?P<b>[\d,]*\.?\d+)\s*(?:\$|usd|dollars?))"
        r"\s*(?:(?:/|per\s+|a\s+|an\s+|each\s+)\s*(?P<period>[a-z]+))?$",
        re.IGNORECASE,
    ).match(raw)
    new = budgets.AMOUNT.match(raw)
    assert (new.groupdict() if new else None) == (old.groupdict() if old else None)


@given(_made_of("[", "]", "1", "[2]", " ", "\n", "\u00a0", "x"))
def test_footnote_marks_are_dropped_as_before(text: str) -> None:
    assert without_footnote_marks(text) == re.sub(r"\s*\[\d+\]", "", text)


@given(_text("#>+-=1.) \t\n\rx"))
def test_line_start_markup_is_escaped_as_before(text: str) -> None:
    old = re.compile(r"^(\s*)([#>+\-=]|\d{1,9}[.)])", re.MULTILINE)
    escape = lambda m: f"{m.group(1)}\\{m.group(2)}"  # noqa: E731
    assert canvas_markdown._LINE_START_SPECIAL.sub(escape, text) == old.sub(escape, text)


@given(_made_of("http", "s", ":", "//", "a", "1", "+", ".", "-", " ", "mailto"))
def test_the_scheme_is_read_as_before(url: str) -> None:
    old = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):").match(url)
    new = mrkdwn_escaping._SCHEME.match(url)
    assert (new.group(1) if new else None) == (old.group(1) if old else None)


@given(_made_of("[", "s", "1", " ", "\t", "\n", "x", "]"))
def test_a_cut_marker_is_dropped_as_before(text: str) -> None:
    assert salvage._without_cut_marker(text) == re.sub(r"\s*\[s?\d*$", "", text)
