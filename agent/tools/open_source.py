"""open_source(marker): what a citation marker points at, in full: the passage, where it was found,
when it was read, and the evidence around it. A follow-up's opening lists the thread's sources only
as an index; this opens one."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..activity import say
from ..markers import MARKER_RE
from .base import Tool, ToolContext, ToolResult

__all__ = ["OpenSource", "OpenSourceInput"]


class OpenSourceInput(BaseModel):
    marker: str = Field(
        description="A citation marker, e.g. 's12' or '[s12]', from the opening's source index or a result."
    )


class OpenSource(Tool):
    name = "open_source"
    stage = "re-reading a source"
    Input = OpenSourceInput
    description = (
        "Open a citation marker's source: its full passage, title, URL, when it was read, whether it is a "
        "verified page excerpt or only a search snippet, and the page text around it. Use it before you build "
        "on or re-check a source an earlier run of this thread read (the opening lists them by marker) or to "
        "see exactly what a marker supports. Not for new information (use web_search or read_page) and not "
        "for earlier tool results (use fetch_result). Cite the marker itself."
    )

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, OpenSourceInput)
        return say("rereading_source", marker=args.marker.strip())

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, OpenSourceInput)
        wanted = args.marker.strip()
        found = MARKER_RE.fullmatch(wanted) or MARKER_RE.fullmatch(f"[{wanted.strip('[]')}]")
        source = ctx.registry.get(f"s{found.group(1)}") if found else None
        if source is None or (source.private and not ctx.private_sources):
            count = len(ctx.registry)
            known = f"[s1]–[s{count}]" if count else "none yet"
            return ToolResult(
                f"There is no source {wanted!r} (markers registered: {known}). Pass a marker as it appears, e.g. 's3'.",
                is_error=True,
            )
        kind = (
            "a verified page excerpt"
            if source.kind == "excerpt"
            else "a search snippet only (read the page to verify it)"
        )
        lines = [
            f"[{source.marker}] {source.title}",
            f"URL: {source.url}",
            f"Read on {source.retrieved_at:%Y-%m-%d %H:%M} UTC · {kind}"
            + (f" · from {source.origin}" if source.origin else ""),
            "",
            "The passage (cite it as [" + source.marker + "]):",
            source.passage,
        ]
        if source.context:
            lines += ["", "Around it on the page:", source.context]
        if source.page_sha256:
            lines.append(f"Page text SHA-256: {source.page_sha256}")
        return ToolResult("\n".join(lines))
