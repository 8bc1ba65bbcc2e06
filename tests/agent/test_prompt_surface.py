"""The prompt surface as a real model reads it (issue 28 §6), each defect shown with the scripted
model: a task agent's gaps reach the lead, a turn of reflection does not end the run, a retried
page is read, each HTTP failure class gets its own advice, read_page cites past its first part."""
from __future__ import annotations

import re
from typing import Any

from anthropic import AsyncAnthropic

from agent import AgentConfig, Budget, FetchConfig, ResearchTask, RunEvent, SearchConfig, research
from agent.loop import REFLECTION_NUDGE
from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply, tool_reply
from tests.fakes.policies import (
    URL,
    ResearchPolicy,
    TaskAgentsPolicy,
    _blocks,
    _text,
    extract,
    is_extraction,
    is_task_agent,
)

GAP = "Still missing: SCHB's 2023 tracking difference (the annual report was not reachable)."
NEXT = "Next: the lead could try Schwab's 2023 annual report PDF."


def config_for(web_url: str, **extra: Any) -> AgentConfig:
    return AgentConfig(search=SearchConfig(provider="searxng", searxng_url=web_url),
                       fetch=FetchConfig(allow=["127.0.0.1"]), model_max_retries=0, **extra)


async def run(fake_model: FakeAnthropic, config: AgentConfig, *, tools=None,
              question: str = "expense ratio VTI SCHB ITOT") -> tuple[list[RunEvent], Any]:
    events: list[RunEvent] = []

    async def emit(event: RunEvent) -> None:
        events.append(event)

    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        outcome = await research(ResearchTask(question=question, budget=Budget()), config, anthropic=client,
                                 emit=emit, tools=tools)
    return events, outcome


def main_turns(fake_model: FakeAnthropic) -> list[dict[str, Any]]:
    return [r for r in fake_model.requests if not is_extraction(r)]


# ------------------------------------------------ a task agent's gaps reach the lead

class GapsPolicy(TaskAgentsPolicy):
    """Task agents hand back their findings untagged, ending with what they could not establish."""

    @staticmethod
    def findings(objective: str, messages: list[dict[str, Any]]) -> Reply:
        found = TaskAgentsPolicy.findings(objective, messages).content[0]["text"]
        return text_reply(f"{found}\n{GAP}\n{NEXT}")


async def test_a_task_agents_gaps_reach_the_lead_whole(fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.policy = GapsPolicy(["VTI fees", "SCHB tracking"])
    await run(fake_model, config_for(fake_web.url))
    lead = [r for r in fake_model.requests if not is_task_agent(r) and not is_extraction(r)]
    handed = next(_text(r["messages"][-1]) for r in lead if "## Task 1" in _text(r["messages"][-1]))
    assert handed.count(GAP) == 2 and handed.count(NEXT) == 2, "each task's gaps and next step reach the lead"


# ------------------------------------------------ reflection does not end the run

class ReflectsFirst:
    """Searches, then writes a turn of reflection with no call and no <summary>, then (told the run goes on)
    reads a page and answers."""

    def __init__(self, reflections: int = 1) -> None:
        self.reflections = reflections

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            return extract(request)
        messages = request["messages"]
        said = _text(messages[-1])
        nudges = sum(REFLECTION_NUDGE in _text(m) for m in messages if m["role"] == "user")
        previous = [b["name"] for b in _blocks(messages[-2]) if b["type"] == "tool_use"] if len(messages) > 1 else []
        if len(messages) == 1:
            return tool_reply(("web_search", {"query": "expense ratio VTI"}))
        if previous == ["web_search"] or (REFLECTION_NUDGE in said and nudges < self.reflections):
            return text_reply("Found: a fee table. Missing: the issuer's own figure. Enough? Not yet. "
                              "Next: read the fee table.")
        if REFLECTION_NUDGE in said:
            urls = URL.findall("\n".join(_text(m) for m in messages if m["role"] == "user"))
            return tool_reply(("read_page", {"url": urls[0], "goal": "VTI expense ratio"}))
        return ResearchPolicy().final(messages)


async def test_a_turn_of_reflection_without_a_call_does_not_end_the_run(fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.policy = ReflectsFirst()
    _, outcome = await run(fake_model, config_for(fake_web.url))
    assert outcome.status == "completed" and outcome.summary.startswith("In short:"), outcome
    turns = main_turns(fake_model)
    nudged = [r for r in turns if REFLECTION_NUDGE in _text(r["messages"][-1])]
    assert len(nudged) == 1, "told once that the run goes on"
    assert any(b["type"] == "tool_use" and b["name"] == "read_page" for r in turns for m in r["messages"]
               if m["role"] == "assistant" for b in _blocks(m)), "and it went on to read the page"


async def test_a_model_that_keeps_reflecting_is_taken_at_its_word(fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.policy = ReflectsFirst(reflections=10)
    _, outcome = await run(fake_model, config_for(fake_web.url))
    assert outcome.status == "completed" and "read the fee table" in outcome.summary.lower()
    nudges = [r for r in main_turns(fake_model) if REFLECTION_NUDGE in _text(r["messages"][-1])]
    assert len(nudges) == 2, "at most REFLECTION_TURNS nudges in a row, then the text is the answer"
