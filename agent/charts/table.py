"""The chart's table, checked before anything is drawn.

Every value is one figure followed by the marker(s) of the passage that states it, e.g.
"0.03% [s4]". A value is checked exactly like a figure in a report sentence
(agent/figures.py: stated by a cited passage, or a calculator result of stated inputs),
except that small whole numbers are checked too: on a chart every bar is a claim. Values
must share one unit (all percentages, all one currency, or all plain numbers) so one axis
can carry them. Problems come back as one actionable message; nothing is drawn until the
table is clean.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from ..figures import Calculation, Figure, check_sentence, figures_in, figures_said
from ..markers import MARKER_RE
from .models import ChartKind, ChartRow

__all__ = [
    "MAX_CATEGORIES",
    "MAX_SERIES",
    "MAX_VALUES",
    "CheckedTable",
    "Point",
    "check_table",
]

# A chart is for a comparison a reader takes in at a glance; more than this is a table's job.
MAX_VALUES = 40
MAX_SERIES = 6  # groups of a grouped bar, or lines of a line chart
MAX_CATEGORIES = 15  # bars (or groups of bars) along the x axis
MAX_LABEL_CHARS = 40
PROBLEMS_SHOWN = 6  # a refusal quotes at most this many problems; the rest are counted

# Currency as written → one name, so "$5" and "USD 5" are the same unit and "$5" and "€5" are not.
_CURRENCIES = {
    "$": "USD",
    "us$": "USD",
    "usd": "USD",
    "€": "EUR",
    "eur": "EUR",
    "£": "GBP",
    "gbp": "GBP",
    "¥": "JPY",
    "₹": "INR",
    "a$": "AUD",
    "c$": "CAD",
}
_CURRENCY_PREFIX = re.compile(r"^\s*(US\$|A\$|C\$|\$|€|£|¥|₹|USD|EUR|GBP)", re.I)


@dataclass(frozen=True)
class Point:
    label: str
    series: str
    value: Decimal  # normalised: magnitudes applied ("$1.2bn" → 1200000000)
    written: str  # the figure as written, for the chart's tooltip-free labels and the alt text
    markers: tuple[str, ...]


@dataclass
class CheckedTable:
    points: list[Point] = field(default_factory=list)
    unit_kind: str = ""  # "%", a currency name ("USD") or "" for plain numbers
    sources: list[str] = field(default_factory=list)  # markers in order of first use
    refusal: str | None = None


def _unit_of(figure: Figure) -> str:
    if figure.percent:
        return "%"
    if figure.currency:
        match = _CURRENCY_PREFIX.match(figure.text)
        return _CURRENCIES.get(match.group(1).lower(), match.group(1)) if match else "currency"
    return ""


def _describe_unit(unit: str) -> str:
    return {"%": "percentages", "": "plain numbers"}.get(unit, f"{unit} amounts")


def _shape_problems(rows: Sequence[ChartRow], kind: ChartKind) -> list[str]:
    """What the table's shape gets wrong for this kind of chart (no figures read yet)."""
    problems: list[str] = []
    if len(rows) < 2:
        problems.append("a chart needs at least 2 values; state a single figure in the section's text instead.")
    if len(rows) > MAX_VALUES:
        problems.append(
            f"{len(rows)} values is too many for a chart (at most {MAX_VALUES}): keep the comparison the "
            "section makes, e.g. the latest year or the main funds."
        )
    labels = list(dict.fromkeys(r.label.strip() for r in rows))
    series = list(dict.fromkeys(r.series.strip() for r in rows))
    if any(not r.label.strip() for r in rows):
        problems.append("every row needs a label (the x-axis category or date).")
    if any(len(r.label) > MAX_LABEL_CHARS or len(r.series) > MAX_LABEL_CHARS for r in rows):
        problems.append(f"labels and series names are at most {MAX_LABEL_CHARS} characters: shorten them.")
    if kind == "bar" and series != [""]:
        problems.append('a bar chart has one series: leave "series" empty, or use kind "grouped_bar".')
    if kind == "grouped_bar" and (len(series) < 2 or "" in series):
        problems.append('a grouped bar chart needs a "series" name on every row and at least 2 series.')
    if kind == "line" and len(series) > 1 and "" in series:
        problems.append('give every row a "series" name (one per line), or none at all for a single line.')
    if len(series) > MAX_SERIES:
        problems.append(f"{len(series)} series is too many (at most {MAX_SERIES}): keep the ones the section compares.")
    if kind != "line" and len(labels) > MAX_CATEGORIES:
        problems.append(f"{len(labels)} categories is too many for bars (at most {MAX_CATEGORIES}).")
    seen: set[tuple[str, str]] = set()
    for r in rows:
        key = (r.label.strip(), r.series.strip())
        if key in seen:
            where = f'"{key[0]}"' + (f' / "{key[1]}"' if key[1] else "")
            problems.append(f"{where} appears twice: give each label (and series) one value.")
            break
        seen.add(key)
    return problems


def _where(row: ChartRow) -> str:
    return f'row "{row.label.strip()}"' + (f' / "{row.series.strip()}"' if row.series.strip() else "")


def check_table(
    rows: Sequence[ChartRow],
    kind: ChartKind,
    unit: str,
    passages: Mapping[str, str],
    calculations: Sequence[Calculation],
) -> CheckedTable:
    """The table's points, or a refusal saying what to fix. Unknown markers are the caller's
    check (the source registry names them); here a marker without a passage states nothing."""
    problems = _shape_problems(rows, kind)
    out = CheckedTable()
    units: dict[str, str] = {}  # unit → first row that uses it
    for row in rows:
        value = row.value.strip()
        markers = tuple(dict.fromkeys(f"s{m}" for m in MARKER_RE.findall(value)))
        figures = figures_in(value, checked_only=False)
        if len(figures) != 1:
            found = "no number" if not figures else f"{len(figures)} numbers"
            problems.append(
                f'{_where(row)}: "{value}" has {found}; write one figure and its marker, e.g. "0.03% [s4]".'
            )
            continue
        figure = figures[0]
        units.setdefault(_unit_of(figure), _where(row))  # every value counts toward mixed units
        if not markers:
            problems.append(f'{_where(row)}: "{value}" has no marker: append the [sN] of the passage that states it.')
            continue
        verdict = check_sentence(value, dict(passages), calculations, checked_only=False)
        if verdict.missing:
            said = "; ".join(
                f"[{m}] says {', '.join(figures_said(passages.get(m, ''))) or 'no figures'}" for m in markers
            )
            problems.append(f"{_where(row)}: {said}, not {figure.text}.")
            continue
        out.points.append(Point(row.label.strip(), row.series.strip(), figure.value, figure.text, markers))
        for m in markers:
            if m not in out.sources:
                out.sources.append(m)
    if len(units) > 1:
        mixed = ", ".join(f"{_describe_unit(u)} ({where})" for u, where in units.items())
        problems.append(
            f"the values mix units: {mixed}. One chart has one unit: chart each unit separately, "
            "or convert with the calculator (citing its inputs) so every value has the same unit."
        )
    out.unit_kind = next(iter(units), "")
    declared = unit.lower()
    if out.unit_kind == "%" and declared and "%" not in declared and "percent" not in declared:
        problems.append(f'the values are percentages but unit is "{unit}": set unit to "%" (or leave it empty).')
    if out.unit_kind not in ("%", "") and ("%" in declared or "percent" in declared):
        problems.append(f'the values are {_describe_unit(out.unit_kind)} but unit is "{unit}": fix the unit.')
    if problems:
        lines = [f"Not drawn: {len(problems)} problem(s) with the table."]
        lines += [f"- {p}" for p in problems[:PROBLEMS_SHOWN]]
        if len(problems) > PROBLEMS_SHOWN:
            lines.append(f"- … and {len(problems) - PROBLEMS_SHOWN} more.")
        if any(" says " in p for p in problems):
            lines.append(
                "A value must be stated by the passage it cites, as for figures in a section: correct the value, "
                "or cite the passage that states it (read_page if you only have a snippet). A value you computed "
                "must come from the calculator, with its inputs' markers on the value."
            )
        out.refusal = "\n".join(lines)
    return out
