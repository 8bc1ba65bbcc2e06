"""fetch_result(id): bring back a stored tool result or a page's full text, by range."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from ..activity import say
from .base import Tool, ToolContext, ToolResult

# Characters returned per call by default (~2.5k tokens): enough to read on, small enough to skim.
DEFAULT_LENGTH = 10_000
MAX_LENGTH = 40_000
RESULT_ID_RE = re.compile(r"^r_[0-9a-f]{4,}$")


class FetchResultInput(BaseModel):
    id: str = Field(description="The result id, e.g. r_0004, as shown at the top of a tool result or in a stub.")
    start: int = Field(default=0, ge=0, description="Character offset to start at (default 0).")
    length: int = Field(
        default=DEFAULT_LENGTH,
        ge=1,
        le=MAX_LENGTH,
        description=f"How many characters to return (default {DEFAULT_LENGTH:,}, at most {MAX_LENGTH:,}).",
    )


class FetchResult(Tool):
    name = "fetch_result"
    stage = "re-reading a stored result"
    Input = FetchResultInput
    description = (
        "Bring back, by id, a tool result you saw earlier (its id, like r_0004, heads every "
        "result) or the full text of a page that read_page stored. Use it when an earlier result "
        "was shortened to a stub or you need the exact wording again; page it with `start` and "
        "`length`. Not for new information (use web_search or read_page). Raw page text carries no "
        "citation markers: to cite a passage from it, call read_page on that page with a goal."
    )

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, FetchResultInput)
        return say("rereading_result", id=args.id)

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, FetchResultInput)
        result_id = args.id.strip().strip("'\"[]")
        stored = await ctx.results.get(result_id) if RESULT_ID_RE.match(result_id) else None
        if stored is None:
            last = f"r_0001–r_{ctx.result_ids.issued:04x}" if ctx.result_ids.issued else "none yet"
            return ToolResult(
                f"There is no stored result {args.id!r} (ids issued so far: {last}). "
                "Use an id exactly as it appears at the top of a result or in a stub.",
                is_error=True,
            )
        total = len(stored.text)
        if args.start >= total and total:
            return ToolResult(
                f"{result_id} has {total:,} characters; start {args.start:,} is past its end. "
                f"Use a start between 0 and {total - 1:,}.",
                is_error=True,
            )
        end = min(total, args.start + args.length)
        what = stored.locator.what
        more = f"more follows: fetch_result('{result_id}', start={end})" if end < total else "this is the end"
        header = f"{stored.kind} · {what} · characters {args.start:,}–{end:,} of {total:,} · {more}"
        return ToolResult(f"{header}\n{stored.text[args.start : end]}", is_error=stored.is_error and args.start == 0)
