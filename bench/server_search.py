"""Anthropic's web search: inline in the main request, or as the `anthropic` search provider?

    .venv/bin/python -m bench.server_search [--turns 40] [--searches 8] [--results-tokens 12000]

Runs the same scripted session twice against the fake Messages API (prompt caching modelled as
an exact prefix match at breakpoints, as the real API does), priced with the capability table:

- inline: the main model's request carries the `web_search_20260209` server tool; each search's
  `server_tool_use` and `web_search_tool_result` blocks (their encrypted content as large as
  real results, `--results-tokens`) stay in the assistant turn, and every later turn sends them
  back (they must go back unmodified, so elision cannot stub them);
- provider (the baseline): the main model calls our `web_search`; each call is one small-model
  request carrying the server tool, and only our rendered result (~8 hits with quoted snippets)
  enters the main context.

Both sessions have the same turns, searches and other tool results; the figure to compare is
the cost ratio inline / provider. The per-search price ($10 per 1,000) is the same for both.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass
from typing import Any

from anthropic import AsyncAnthropic

from agent.model_capabilities import WEB_SEARCH, capabilities
from agent.tools.search.anthropic import hits_of
from tests.fakes.anthropic import FakeAnthropic, Reply, scripted_search_model
from tests.fakes.server import ServerThread

MAIN, SMALL = "claude-sonnet-5-5", "claude-haiku-5-5"
TOOLS = [{"name": "web_search", "description": "Search the web.", "input_schema": {"type": "object"}},
         {"name": "read_page", "description": "Read a page.", "input_schema": {"type": "object"}}]
SYSTEM = [{"type": "text", "text": "You are a research agent. " * 200, "cache_control": {"type": "ephemeral"}}]
PAGE_TOKENS = 3_000  # a read_page result, as in bench.context
RESULTS_PER_SEARCH = 8


@dataclass
class Figures:
    cost: float
    main_input_tokens: int
    final_context: int
    small_requests: int


def index(results_tokens: int) -> Any:
    per_result = results_tokens * 4 // RESULTS_PER_SEARCH

    def answer(query: str) -> list[dict[str, Any]]:
        return [{"url": f"https://site{i}.example/{abs(hash(query)) % 1000}", "title": f"Result {i} for {query}",
                 "page_age": "March 3, 2026",
                 "text": f"Result {i} says the fee for {query} is 0.0{i}%. " + "Padding of the page. " * (per_result // 21)}
                for i in range(RESULTS_PER_SEARCH)]
    return answer


def price(model: str, usage: dict[str, Any]) -> float:
    searches = (usage.get("server_tool_use") or {}).get("web_search_requests", 0)
    return capabilities(model).cost_usd(usage["input_tokens"], usage["output_tokens"],
                                        usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"],
                                        searches)


def marked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last block carries the moving cache breakpoint, as agent/context/history.py places it."""
    out = [dict(m) for m in messages]
    last = dict(out[-1])
    blocks = [dict(b) for b in last["content"]]
    blocks[-1]["cache_control"] = {"type": "ephemeral"}
    last["content"] = blocks
    out[-1] = last
    return out


async def session(url: str, fake: FakeAnthropic, turns: int, searches: int, inline: bool) -> Figures:
    every = max(1, turns // max(1, searches))
    cost, main_input, small_requests = 0.0, 0, 0
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Compare VTI fees."}]}]
    async with AsyncAnthropic(api_key="bench", base_url=url, max_retries=0) as client:
        for turn in range(turns):
            search_now = turn % every == 0 and turn // every < searches
            query = f"vti fees {turn}"
            if inline:  # the server tool takes the name web_search; our read_page stays beside it
                fake.search_policy = (lambda q: lambda body: _inline_turn(body, q))(query if search_now else None)
                tools = [*TOOLS[1:], {"type": WEB_SEARCH, "name": "web_search", "max_uses": 1}]
            else:
                fake.policy = (lambda q: lambda body: _provider_turn(q))(query if search_now else None)
                tools = TOOLS
            body: dict[str, Any] = {"model": MAIN, "max_tokens": 2000, "system": SYSTEM, "tools": tools,
                                    "messages": marked(messages)}
            message = await client.messages.create(**body)
            usage = message.usage.model_dump()
            cost += price(MAIN, usage)
            main_input += usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
            assistant = [b.model_dump(exclude_none=True) for b in message.content]
            messages.append({"role": "assistant", "content": assistant})
            calls = [b for b in assistant if b["type"] == "tool_use"]
            results = []
            for call in calls:
                if call["name"] == "web_search":
                    small = await client.messages.create(
                        model=SMALL, max_tokens=1500, tools=[{"type": WEB_SEARCH, "name": "web_search", "max_uses": 1}],
                        messages=[{"role": "user", "content": f"<query>{call['input']['query']}</query>"}])
                    small_requests += 1
                    cost += price(SMALL, small.usage.model_dump())
                    hits = hits_of(small)
                    text = "\n".join(f"{n}. {h.title} — {h.url}\n   [s{n}] {h.snippet}" for n, h in enumerate(hits, 1))
                else:
                    text = "Excerpts: " + "A passage from the page. " * (PAGE_TOKENS * 4 // 25)
                results.append({"type": "tool_result", "tool_use_id": call["id"], "content": text})
            messages.append({"role": "user", "content": results or [{"type": "text", "text": "Continue."}]})
    final = sum(len(json.dumps(m)) for m in messages) // 4
    return Figures(cost, main_input, final, small_requests)


def _provider_turn(query: str | None) -> Reply:
    call = ("web_search", {"query": query}) if query else ("read_page", {"url": "https://example.org/p", "goal": "fees"})
    return Reply([{"type": "tool_use", "name": call[0], "input": call[1]}])


def _inline_turn(body: dict[str, Any], query: str | None) -> Reply:
    last = body["messages"][-1]
    if last["role"] == "assistant":  # after the server search: the model's citing text, then a page read
        said = scripted_search_model(body)
        return Reply([*said.content, {"type": "tool_use", "name": "read_page",
                                      "input": {"url": "https://example.org/p", "goal": "fees"}}])
    if query:
        return Reply([{"type": "server_tool_use", "name": "web_search", "input": {"query": query}}], "end_turn")
    return Reply([{"type": "tool_use", "name": "read_page", "input": {"url": "https://example.org/p", "goal": "f"}}])


async def main(turns: int, searches: int, results_tokens: int) -> int:
    fake = FakeAnthropic(min_cacheable_tokens=1024)
    fake.web_index = index(results_tokens)
    with ServerThread(fake.app()) as server:
        provider = await session(server.url, fake, turns, searches, inline=False)
        inline = await session(server.url, fake, turns, searches, inline=True)
    print(f"{turns} turns, {searches} searches, ~{results_tokens:,} tokens of results per search "
          f"(main {MAIN}, search model {SMALL})")
    for name, f in (("provider (baseline)", provider), ("inline", inline)):
        print(f"  {name:<20} est. ${f.cost:.3f} · main-model input {f.main_input_tokens:,} tokens · "
              f"final context ~{f.final_context:,} tokens · {f.small_requests} search requests")
    print(f"  inline / provider cost: {inline.cost / provider.cost:.2f}× · "
          f"main input: {inline.main_input_tokens / provider.main_input_tokens:.2f}×")
    return 0 if not fake.rejected else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--searches", type=int, default=8)
    parser.add_argument("--results-tokens", type=int, default=12_000)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.turns, args.searches, args.results_tokens)))
