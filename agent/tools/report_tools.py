"""write_section / revise_section: the agent's only way to put text in the pinned report."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from ..activity import say
from ..citations import UnknownCitation
from ..events import SectionRevised, SectionWritten
from ..report import Revision, Section
from .base import Tool, ToolContext, ToolResult
from .claim_check import ClaimReport, check_claims
from .figure_check import FigureReport, check_figures

MAX_TITLE_CHARS = 120
MAX_SECTION_CHARS = 12_000


class WriteSectionInput(BaseModel):
    title: str = Field(description="Short section heading, e.g. 'Expense ratios'.")
    body: str = Field(description="Markdown. Every claim ends with the [sN] marker(s) of the passage that supports it.")


class ReviseSectionInput(BaseModel):
    section_id: str = Field(description="The id returned by write_section, e.g. 'sec2'.")
    body: str = Field(description="The complete new Markdown body; it replaces the old one.")
    reason: str = Field(description="One line: what was wrong or incomplete, e.g. 'ITOT figure was from 2019'.")


@dataclass
class CheckedBody:
    cited: list[str]
    figures: FigureReport
    claims: ClaimReport


async def _check_body(body: str, ctx: ToolContext) -> ToolResult | CheckedBody:
    if not body.strip():
        return ToolResult("The body is empty: write the section's findings with their [sN] markers.", is_error=True)
    if len(body) > MAX_SECTION_CHARS:
        return ToolResult(
            f"The body is {len(body):,} characters; the limit is {MAX_SECTION_CHARS:,}. "
            "Split it into two sections or tighten it.",
            is_error=True,
        )
    try:
        cited = ctx.registry.check(body)
    except UnknownCitation as exc:
        return ToolResult(f"Not saved: {exc}", is_error=True)
    if not cited:
        return ToolResult(
            "Not saved: this section cites nothing. End each claim with the [sN] marker of the "
            "search snippet or page excerpt that supports it; if you have no source yet, research first.",
            is_error=True,
        )
    figures = check_figures(body, ctx)
    if figures.refusal is not None:
        return ToolResult(figures.refusal, is_error=True)
    claims = await check_claims(body, ctx, figures.flags)
    if claims.refusal is not None:
        return ToolResult(claims.refusal, is_error=True)
    return CheckedBody(cited, figures, claims)


def _flag_note(checked: CheckedBody) -> str:
    flags = checked.figures.flags
    shown = ", ".join(f.figure for f in flags)
    figures = f"\nMarked for the reader as not found in its source: {shown}." if flags else ""
    return figures + checked.claims.note()


class WriteSection(Tool):
    name = "write_section"
    stage = "writing the report"
    Input = WriteSectionInput
    description = (
        "Add a new section to the pinned report the team reads in Slack. Write a section once "
        "its evidence is in: takeaway first, every figure, date and attributed opinion followed "
        "by the [sN] marker of the passage that supports it; no narration of your process. "
        "Answers with the new section's id as `section_id: <id>`. Not for correcting an "
        "existing section (use revise_section) and not for the overall summary, which is your "
        "final answer."
    )

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, WriteSectionInput)
        return say("writing_section", title=args.title)

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, WriteSectionInput)
        title = " ".join(args.title.split())[:MAX_TITLE_CHARS]
        if not title:
            return ToolResult("The title is empty: give the section a short heading.", is_error=True)
        for existing in ctx.sections.values():
            if existing.title.lower() == title.lower():
                return ToolResult(
                    f'A section titled "{title}" exists already (section_id: {existing.section_id}); '
                    "use revise_section to change it.",
                    is_error=True,
                )
        checked = await _check_body(args.body, ctx)
        if isinstance(checked, ToolResult):
            return checked
        section_id = f"sec{len(ctx.sections) + 1}"
        figures, claims = checked.figures, checked.claims.claims
        ctx.sections[section_id] = Section(
            section_id=section_id,
            title=title,
            body=args.body,
            figures_checked=figures.checked,
            flags=figures.flags,
            claims=claims,
        )
        await ctx.emit(
            SectionWritten(
                section_id=section_id,
                title=title,
                body=args.body,
                figures_checked=figures.checked,
                flags=figures.flags,
                claims=claims,
            )
        )
        cited = ", ".join(f"[{m}]" for m in checked.cited)
        return ToolResult(f'section_id: {section_id}\nSaved "{title}" citing {cited}.{_flag_note(checked)}')


class ReviseSection(Tool):
    name = "revise_section"
    stage = "writing the report"
    Input = ReviseSectionInput
    description = (
        "Replace the body of a report section you wrote earlier, when new evidence corrects or "
        "completes it. The old text is kept in the run's history and the section is marked as "
        "revised; never append errata. Not for new topics (use write_section)."
    )

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, ReviseSectionInput)
        return say("revising", section=args.section_id, reason=args.reason)

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, ReviseSectionInput)
        section = ctx.sections.get(args.section_id.strip())
        if section is None:
            known = ", ".join(f"{s.section_id} ({s.title})" for s in ctx.sections.values()) or "none yet"
            return ToolResult(
                f"There is no section {args.section_id!r}. Existing sections: {known}. "
                "Use write_section for a new one.",
                is_error=True,
            )
        refusal = ctx.ledger.correction_refusal(section.section_id) if ctx.ledger else None
        if refusal:
            return ToolResult(f"Not revised: {refusal}", is_error=True)
        checked = await _check_body(args.body, ctx)
        if isinstance(checked, ToolResult):
            return checked
        if ctx.ledger:
            ctx.ledger.record_correction(section.section_id)
        reason = " ".join(args.reason.split()) or "revised"
        section.revisions.append(Revision(body=section.body, reason=reason))
        section.body = args.body
        section.figures_checked, section.flags = checked.figures.checked, checked.figures.flags
        section.claims = checked.claims.claims
        await ctx.emit(
            SectionRevised(
                section_id=section.section_id,
                body=args.body,
                reason=reason,
                figures_checked=checked.figures.checked,
                flags=checked.figures.flags,
                claims=checked.claims.claims,
            )
        )
        return ToolResult(
            f'section_id: {section.section_id}\nRevised "{section.title}" ({reason}).{_flag_note(checked)}'
        )
