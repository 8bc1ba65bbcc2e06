"""earlier_research(query): the team's earlier reports on the question, to build on rather than redo.

The run asks it once before its first turn (run.py primes the answer, so the model's first look at
the task already shows what the team knows); the model may ask again with other words. Only reports
everyone in this thread may read come back: the search behind it decides (agent/earlier.py). An
earlier report's sources are leads, not evidence: their URLs become fetchable (seen_urls.py), and a
source is cited only once read_page has read it again and registered a passage with a marker.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from ..display import shorten
from ..earlier import EarlierReport, EarlierResearch
from ..events import EarlierFound, EarlierRef
from .base import Tool, ToolContext, ToolResult

__all__ = ["EARLIER_SHOWN", "EarlierResearchInput", "EarlierResearchTool"]

MAX_QUERY_CHARS = 300
EARLIER_SHOWN = 3  # reports per answer: the best few, each with its summary and sources
SUMMARY_CHARS = 600
SOURCES_SHOWN = 12
NOTHING = (
    "No earlier report of the team matches that (only reports everyone in this thread may read are "
    "searched). Research it from the web: web_search, then read_page."
)


class EarlierResearchInput(BaseModel):
    query: str = Field(description="What the earlier report would be about: a few words or the question itself.")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is empty: write what the earlier report would be about")
        if len(value) > MAX_QUERY_CHARS:
            raise ValueError(f"query is {len(value)} characters; keep it under {MAX_QUERY_CHARS}")
        return value.strip()


def _report(n: int, report: EarlierReport) -> list[str]:
    lines = [f'{n}. "{report.title}" · {report.date:%-d %b %Y} · {report.permalink or "(no link)"}']
    if report.summary:
        lines.append(f"   Summary: {shorten(report.summary, SUMMARY_CHARS)}")
    if report.headings:
        lines.append(f"   Sections: {'; '.join(report.headings)}")
    if report.sources:
        lines.append("   Its sources (leads: read one with read_page before citing it):")
        lines += [f"   - {shorten(s.title, 120) or 'untitled'} — {s.url}" for s in report.sources[:SOURCES_SHOWN]]
    return lines


class EarlierResearchTool(Tool):
    name = "earlier_research"
    stage = "looking through the team's earlier reports"
    Input = EarlierResearchInput
    description = (
        "Search the team's earlier research reports (finished reports of this workspace that everyone in "
        "this thread may read): each comes back with its title, date, Slack link, summary, section headings "
        "and its sources' URLs. The run already called it once with the question: call it again only with "
        "different words (another angle, a name from the question). Build on what an earlier report settled; "
        "check time-sensitive figures again. Its sources are leads, not citable as they are: read one with "
        "read_page to get a passage with a citation marker, then cite that marker. Not for the web (use "
        "web_search) or the team's Slack messages (use search_workspace)."
    )

    def __init__(self, source: EarlierResearch) -> None:
        self.source = source
        self._asked: set[str] = set()
        self._primed: dict[str, list[EarlierReport]] = {}
        self._shown: set[str] = set()

    def prime(self, query: str, reports: list[EarlierReport]) -> None:
        """The answer the run's own first search got, so answering its opening call asks nothing again."""
        self._primed[_key(query)] = reports

    def snapshot(self) -> Any:
        return {"asked": sorted(self._asked), "shown": sorted(self._shown)}

    def restore(self, state: Any) -> None:
        state = state if isinstance(state, dict) else {}
        self._asked = set(state.get("asked", []))
        self._shown = set(state.get("shown", []))
        self._primed = {}

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, EarlierResearchInput)
        return f"Looking through the team's earlier reports: {args.query}"

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, EarlierResearchInput)
        key = _key(args.query)
        if key in self._asked:
            return ToolResult(
                f'The team\'s earlier reports were already searched for "{args.query}": the same reports would '
                "come back. Use other words, or go on with web_search.",
                is_error=True,
            )
        self._asked.add(key)
        reports = self._primed.pop(key, None)
        if reports is None:
            try:
                reports = await self.source.search(args.query, limit=EARLIER_SHOWN)
            except Exception as exc:  # the library is context, not the task: say so and go on
                return ToolResult(
                    f"The team's earlier reports could not be searched just now ({exc}). Go on with web_search.",
                    is_error=True,
                )
        if not reports:
            return ToolResult(NOTHING)
        for report in reports:  # its sources may be read again (never cited unread)
            ctx.seen.add(*(s.url for s in report.sources if s.url.startswith(("http://", "https://"))))
        new = [r for r in reports if r.run_id not in self._shown]
        self._shown.update(r.run_id for r in new)
        if new:
            refs = [EarlierRef(title=r.title, date=r.date, permalink=r.permalink) for r in new]
            await ctx.emit(EarlierFound(reports=refs))
        lines = [f"The team's earlier reports on this ({len(reports)}), best match first:"]
        for n, report in enumerate(reports, 1):
            lines += _report(n, report)
        lines.append(
            "Build on these rather than redo them: say in the report what an earlier report already "
            "established, check anything that may have changed since, and cite only what you read again."
        )
        return ToolResult("\n".join(lines))


def _key(query: str) -> str:
    return " ".join(query.lower().split())
