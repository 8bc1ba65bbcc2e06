"""Thinking: on where the capability table allows it (adaptive on current models), off with
DEEPTHREAD_THINKING=off; blocks go back exactly as the API requires across tool-use turns (the
fake checks each signature, and that the current tool loop's thinking is kept); elision drops
old thinking but keeps the recent turns' (as the API's clear_thinking does); thinking tokens
count in the budget and show in the budget block and the request log."""
from __future__ import annotations

from typing import Any

from anthropic import AsyncAnthropic

from agent import AgentConfig, Budget, FetchConfig, ResearchTask, RunEvent, SearchConfig, research
from agent import defaults
from agent.backend import RunBackend
from agent.context.requestlog import MemoryRequestLog
from agent.events import Finished, Progress
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.bulk import bulk_tools
from tests.fakes.policies import LongRunPolicy, is_extraction, is_summary_request

THOUGHT = "The question compares fees; I should read the issuers' fact sheets before writing."


def think(request: dict[str, Any]) -> str:
    return f"{THOUGHT} (turn {len(request['messages'])})"


async def run(fake_model: FakeAnthropic, fake_web, **config: Any) -> tuple[list[RunEvent], MemoryRequestLog, Any]:
    events: list[RunEvent] = []
    log = MemoryRequestLog()

    async def emit(event: RunEvent) -> None:
        events.append(event)

    agent = AgentConfig(search=SearchConfig(provider="searxng", searxng_url=fake_web.url),
                        fetch=FetchConfig(allow=["127.0.0.1"]), **config)
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        outcome = await research(ResearchTask(question="expense ratio VTI SCHB ITOT", budget=Budget()), agent,
                                 anthropic=client, emit=emit, backend=RunBackend(request_log=log))
    return events, log, outcome


def turns(fake_model: FakeAnthropic) -> list[dict[str, Any]]:
    return [r for r in fake_model.requests if not is_extraction(r) and not is_summary_request(r)]


async def test_a_current_model_thinks_and_its_blocks_go_back_unmodified(fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.thinker = think
    events, log, outcome = await run(fake_model, fake_web)

    assert outcome.status == "completed", outcome.reason
    assert fake_model.rejected == [], "every thinking block went back signed and unmodified"
    main = turns(fake_model)
    assert all(r["thinking"] == {"type": "adaptive"} for r in main)
    assert not any("thinking" in r for r in fake_model.requests if is_extraction(r)), "side requests do not think"
    # Each turn after a tool call sends back the previous turn's thinking first, byte for byte.
    for request in main[1:]:
        assistant = request["messages"][-2]["content"]
        assert assistant[0]["type"] == "thinking" and assistant[0]["thinking"].startswith(THOUGHT)
        assert assistant[0]["signature"] == fake_model.signature(assistant[0]["thinking"])
    # Thinking tokens are counted, shown in the budget block, and logged per request.
    thought = sum(r["usage"].get("output_tokens_details", {}).get("thinking_tokens", 0) for r in fake_model.responses)
    assert thought > 0
    last_block = next(b["text"] for b in main[-1]["messages"][-1]["content"]
                      if b.get("type") == "text" and b["text"].startswith("<budget>"))
    assert "of them thinking" in last_block
    assert sum(r.thinking_tokens for r in log.records) == thought


async def test_thinking_off_sends_no_thinking_and_the_fake_thinks_nothing(fake_model: FakeAnthropic,
                                                                          fake_web) -> None:
    fake_model.thinker = think
    _, _, outcome = await run(fake_model, fake_web, thinking=False)
    assert outcome.status == "completed"
    assert not any("thinking" in r for r in fake_model.requests)
    assert not any(b["type"] == "thinking" for r in fake_model.responses for b in r["content"])
    last = turns(fake_model)[-1]["messages"][-1]["content"]
    assert not any("of them thinking" in b.get("text", "") for b in last)


async def test_a_model_the_table_does_not_know_gets_no_thinking(fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.thinker = think
    _, _, outcome = await run(fake_model, fake_web, main_model="local-gateway-model")
    assert outcome.status == "completed"
    assert not any("thinking" in r for r in fake_model.requests)


async def test_a_model_with_budgeted_thinking_gets_a_budget_below_max_tokens(fake_model: FakeAnthropic,
                                                                             fake_web) -> None:
    fake_model.thinker = think
    _, _, outcome = await run(fake_model, fake_web, main_model="claude-haiku-4-5-20251001")
    assert outcome.status == "completed" and fake_model.rejected == []
    thinking = turns(fake_model)[0]["thinking"]
    assert thinking["type"] == "enabled" and 1024 <= thinking["budget_tokens"] < turns(fake_model)[0]["max_tokens"]


async def test_elision_and_compaction_drop_old_thinking_and_keep_the_current_turns(fake_model: FakeAnthropic) -> None:
    fake_model.thinker = think
    events: list[RunEvent] = []

    async def emit(event: RunEvent) -> None:
        events.append(event)

    fake_model.policy = LongRunPolicy(60)
    task = ResearchTask(question="Compare VTI, ITOT and SCHB fees", budget=Budget(max_requests=1000, wall_seconds=3600))
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        outcome = await research(task, AgentConfig(context_tokens=40_000), anthropic=client, emit=emit,
                                 tools=bulk_tools(), backend=RunBackend())
    assert outcome.status == "completed", outcome.reason
    assert isinstance(events[-1], Finished) and fake_model.rejected == []
    main = turns(fake_model)

    def thinking_flags(request: dict[str, Any]) -> list[bool]:
        return [m["content"][0]["type"] == "thinking" for m in request["messages"] if m["role"] == "assistant"]

    recent = defaults.ELIDE_AFTER_STEPS
    # Every request keeps the recent turns' thinking (the current tool loop's among them)…
    assert all(all(flags[-recent:]) for flags in map(thinking_flags, main[1:]) if flags)
    # …and once elision has run, older turns have lost theirs (cleared in batches with the stubs, at no
    # cache rewrite of their own, so a few turns since the last batch still carry it).
    cleared = [flags for flags in map(thinking_flags, main) if len(flags) > recent and not all(flags[:-recent])]
    assert cleared, "old thinking was cleared"
    assert any(isinstance(e, Progress) and e.phase == "compacting" for e in events), "compaction ran too"
