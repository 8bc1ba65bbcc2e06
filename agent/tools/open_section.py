"""open_section(section_id): the full text of a report section, which the opening lists only as markers."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..activity import say
from .base import Tool, ToolContext, ToolResult

# Earlier versions shown with a section (newest first); the rest are counted.
REVISIONS_SHOWN = 3


class OpenSectionInput(BaseModel):
    section_id: str = Field(description="A section id from the report outline, e.g. 'sec2'.")


class OpenSection(Tool):
    name = "open_section"
    stage = "reading the report"
    Input = OpenSectionInput
    description = (
        "Open a section of this thread's pinned report: its full Markdown text with the [sN] markers it "
        "cites, and why it was revised. The opening of a follow-up run lists earlier sections only as an "
        "outline (id, title, first sentence); open one before you build on it or revise it. Not for web pages "
        "(use read_page) and not for earlier tool results (use fetch_result)."
    )

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, OpenSectionInput)
        return say("rereading_section", section=args.section_id)

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, OpenSectionInput)
        section = ctx.sections.get(args.section_id.strip())
        if section is None:
            known = ", ".join(f"{s.section_id} ({s.title})" for s in ctx.sections.values()) or "none yet"
            return ToolResult(
                f"There is no section {args.section_id!r}. The report's sections: {known}.", is_error=True
            )
        lines = [
            f"section_id: {section.section_id}",
            f"Title: {section.title}",
            f"Revisions so far in this thread: {len(section.revisions)}",
            "",
            section.body.strip(),
        ]
        if section.revisions:
            lines += ["", "Why it was revised (newest first):"]
            lines += [f"- {r.reason}" for r in reversed(section.revisions[-REVISIONS_SHOWN:])]
            if len(section.revisions) > REVISIONS_SHOWN:
                lines.append(f"- … and {len(section.revisions) - REVISIONS_SHOWN} earlier revision(s)")
        return ToolResult("\n".join(lines))
