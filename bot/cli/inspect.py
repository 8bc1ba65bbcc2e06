"""`deepthread inspect RUN_ID`: every model request of a run as it was dispatched."""

from __future__ import annotations

import json
from typing import TextIO

from redis import Redis

from agent import RequestRecord, assemble, claim_line, cost_usd, usage_by_model
from jobs import RunNotFound, RunStore
from jobs.records.stores import load_request_body, load_request_records, refused_fetches


def _k(n: int) -> str:
    return f"{n:,}"


def summary_table(records: list[RequestRecord]) -> list[str]:
    header = f"{'#':>4}  {'kind':<14} {'context':>9} {'cached':>9} {'written':>8} {'new':>8} {'out':>6} {'think':>6}  {'stubs':>5}  summaries / budget"
    lines = [header]
    for r in records:
        budget = r.budget_block.splitlines()[1] if r.budget_block.count("\n") >= 1 else ""
        extra = ", ".join(r.summaries) + (" · " if r.summaries and budget else "") + budget
        if r.error:
            extra = f"FAILED: {r.error}"
        lines.append(
            f"{r.n:>4}  {r.kind:<14} {_k(r.context_tokens):>9} {_k(r.cache_read_tokens):>9} "
            f"{_k(r.cache_creation_tokens):>8} {_k(r.input_tokens):>8} {_k(r.output_tokens):>6} "
            f"{_k(r.thinking_tokens):>6}  "
            f"{len(r.stubs):>5}  {extra[:110]}"
        )
    return lines


def totals(records: list[RequestRecord]) -> list[str]:
    by_model = usage_by_model(records)
    lines = []
    total_cost = 0.0
    for model, c in by_model.items():
        context = c.context_tokens
        share = c.cache_read_tokens / context if context else 0.0
        cost = cost_usd(model, c)
        total_cost += cost
        thought = f" ({_k(c.thinking_tokens)} thinking)" if c.thinking_tokens else ""
        searched = f" · {c.web_search_requests} web searches" if c.web_search_requests else ""
        lines.append(
            f"{model}: input {_k(context)} tokens ({share:.0%} from cache, {_k(c.cache_creation_tokens)} written, "
            f"{_k(c.input_tokens)} uncached) · output {_k(c.output_tokens)}{thought}{searched} · est. ${cost:.2f}"
        )
    kinds = {k: sum(1 for r in records if r.kind == k) for k in dict.fromkeys(r.kind for r in records)}
    lines.append(
        f"{len(records)} requests ({', '.join(f'{n} {k}' for k, n in kinds.items())}) · est. ${total_cost:.2f} in all"
    )
    return lines


def sections(redis: Redis, run_id: str, out: TextIO) -> int:
    """Every section with its full revision history, oldest version first."""
    try:
        state = RunStore(redis).get(run_id)
    except RunNotFound:
        print(f"Run {run_id}: no run state (expired or unknown).", file=out)
        return 1
    for section in state.sections:
        print(f"== {section.section_id} {section.title} (revised ×{len(section.revisions)})", file=out)
        for n, revision in enumerate(section.revisions, 1):
            print(f"-- version {n} (replaced: {revision.reason})\n{revision.body}", file=out)
        print(f"-- current\n{section.body}\n", file=out)
        for claim in section.claims:  # the claim check: each cited sentence, its verdict and anchor
            mark = " (marked ⚠)" if claim.marked else ""
            anchor = (
                f' ← [{claim.anchor.marker}] "{claim.anchor.quote}" ({claim.anchor.score:.2f})' if claim.anchor else ""
            )
            print(
                f"   {claim.verdict}{mark} by {claim.by}: {section.body[claim.start : claim.end]!r}{anchor}", file=out
            )
            if claim.differs:
                print(f"      {claim.differs}", file=out)
    if not state.sections:
        print("No sections written.", file=out)
    return 0


def sources(redis: Redis, run_id: str, out: TextIO) -> int:
    """Every source of the run in full: what it says, where it stood on the page, when and how it was read.
    Numbered as the report's footnotes where cited; uncited sources follow under their markers."""
    try:
        state = RunStore(redis).get(run_id)
    except RunNotFound:
        print(f"Run {run_id}: no run state (expired or unknown).", file=out)
        return 1
    report = assemble(state.summary, state.sections, state.sources)
    numbers = {note.source.marker: note.number for note in report.footnotes}
    ordered = sorted(
        state.sources.values(),
        key=lambda s: (
            s.marker not in numbers,
            numbers.get(s.marker, 0),
            int(s.marker[1:]) if s.marker[1:].isdigit() else 0,
        ),
    )
    for source in ordered:
        label = f"[{numbers[source.marker]}]" if source.marker in numbers else "(not cited)"
        print(f"== {label} [{source.marker}] {source.title}\n{source.url}", file=out)
        print(
            f"{source.kind} · fetched {source.retrieved_at:%Y-%m-%d %H:%M:%S} UTC"
            + (f" · page text sha256 {source.page_sha256}" if source.page_sha256 else ""),
            file=out,
        )
        print(f"-- passage\n{source.passage}", file=out)
        if source.context and source.context != source.passage:
            print(f"-- around it\n{source.context}", file=out)
        print("", file=out)
    if not state.sources:
        print("No sources registered.", file=out)
    return 0


def inspect(redis: Redis, run_id: str, request: int | None, out: TextIO) -> int:
    records = load_request_records(redis, run_id)
    if not records:
        print(f"No model requests are logged for run {run_id}. Check the id (it is in the report footer).", file=out)
        return 1
    if request is not None:
        if not 1 <= request <= len(records):
            print(f"Request {request} does not exist: this run has requests 1–{len(records)}.", file=out)
            return 2
        record = records[request - 1]
        print(
            json.dumps(
                {
                    "record": record.model_dump(mode="json", exclude={"parts"}),
                    "request": load_request_body(redis, run_id, record),
                },
                indent=2,
                ensure_ascii=False,
            ),
            file=out,
        )
        return 0
    try:
        state = RunStore(redis).get(run_id)
        print(f"Run {run_id} · {state.status.value} · {state.run.question[:80]!r}", file=out)
        checked = claim_line(state.sections)
        if checked:
            print(f"Claim check: {checked}", file=out)
    except RunNotFound:
        print(f"Run {run_id}: its run state has expired; the request log follows", file=out)
    for line in (
        summary_table(records)
        + [""]
        + totals(records)
        + refused_lines(redis, run_id)
        + mcp_tools(redis, run_id, records)
    ):
        print(line, file=out)
    return 0


# Refused URLs listed in full up to this many (the count is always shown).
REFUSED_SHOWN = 20


def refused_lines(redis: Redis, run_id: str) -> list[str]:
    """How many fetches read_page refused (URLs never seen in the thread, search results or pages read:
    what a page asking the agent to send data out would produce), and which."""
    refused = refused_fetches(redis, run_id)
    lines = [f"Refused fetches: {len(refused)} (URLs not seen in the thread, search results or pages read)"]
    lines += [f"  {url[:200]}" for url in refused[:REFUSED_SHOWN]]
    if len(refused) > REFUSED_SHOWN:
        lines.append(f"  … and {len(refused) - REFUSED_SHOWN} more")
    return lines


# The team's MCP tools are named server__tool (agent/tools/mcp.py).
MCP_TOOL_SEPARATOR = "__"


def mcp_tools(redis: Redis, run_id: str, records: list[RequestRecord]) -> list[str]:
    """The MCP servers' tools the run was offered, each with its description as the model read it
    (the server's own words inside ours): the first request that offered any shows them."""
    for record in records:
        tools = load_request_body(redis, run_id, record).get("tools") or []
        offered = [t for t in tools if MCP_TOOL_SEPARATOR in str(t.get("name", ""))]
        if offered:
            lines = ["", "Tools of the team's MCP servers offered to the model, with their descriptions:"]
            return lines + [f"- {t['name']}: {t.get('description', '')}" for t in offered]
    return []
