"""The prompt surface as a real model reads it (issue 28 §6), each defect shown with the scripted
model: a task agent's gaps reach the lead, a turn of reflection does not end the run, a retried
page is read, each HTTP failure class gets its own advice, read_page cites past its first part."""
from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from anthropic import AsyncAnthropic
from hypothesis import given
from hypothesis import strategies as st

from agent import AgentConfig, Budget, FetchConfig, ResearchTask, RunEvent, SearchConfig, SourceRegistry, research
from agent.loop import REFLECTION_NUDGE
from agent.model import ModelClient
from agent.tools import fetch
from agent.tools.base import ToolContext
from agent.tools.read_page import ReadPage, ReadPageInput
from tests.fakes.web import FakeWeb
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


# ------------------------------------------------ read_page: retries and HTTP failure classes

@pytest.fixture
async def page_ctx(fake_model: FakeAnthropic, fake_web: FakeWeb) -> AsyncIterator[ToolContext]:
    fake_model.policy = extract

    async def emit(_: object) -> None:
        return None

    async with httpx.AsyncClient() as http, AsyncAnthropic(api_key="k", base_url=fake_model.url,
                                                           max_retries=0) as client:
        model = ModelClient(client, main_model="m", small_model="s", timeout=30)
        ctx = ToolContext(config=AgentConfig(fetch=FetchConfig(allow=["127.0.0.1"])), registry=SourceRegistry(),
                          http=http, model=model, emit=emit, goal_question="q")
        # The pages these tests read, as a search would have found them (read_page opens only URLs seen).
        ctx.seen.add(*(f"{fake_web.url}/pages/{page}" for page in ("etf-fees.html", "long-report.html")))
        yield ctx


GOAL = "the expense ratio of VTI"


@pytest.mark.parametrize("status", [503, 429, 500])
async def test_a_page_that_failed_for_a_while_is_read_when_retried(status: int, fake_web: FakeWeb,
                                                                   page_ctx: ToolContext) -> None:
    fake_web.page_fail_next("/pages/etf-fees.html", status)
    tool, url = ReadPage(), f"{fake_web.url}/pages/etf-fees.html"
    first = await tool.run(ReadPageInput(url=url, goal=GOAL), page_ctx)
    assert first.is_error and f"HTTP {status}" in first.text
    again = await tool.run(ReadPageInput(url=url, goal=GOAL), page_ctx)
    assert not again.is_error and "Excerpts:" in again.text, again.text
    third = await tool.run(ReadPageInput(url=url, goal=GOAL), page_ctx)
    assert third.is_error and "You already read this page" in third.text, "a page read once is not read twice"


async def test_a_page_whose_extraction_failed_is_read_when_retried(fake_web: FakeWeb, fake_model: FakeAnthropic,
                                                                   page_ctx: ToolContext) -> None:
    fake_model.fail_next(500, times=2)  # both extraction attempts fail
    tool, url = ReadPage(), f"{fake_web.url}/pages/etf-fees.html"
    first = await tool.run(ReadPageInput(url=url, goal=GOAL), page_ctx)
    assert first.is_error and "Could not read this page" in first.text
    fake_model.clear_failures()
    again = await tool.run(ReadPageInput(url=url, goal=GOAL), page_ctx)
    assert not again.is_error, again.text


# Every failure class and the advice it must carry; a code of each class is tried.
CLASSES = {
    "denied": ((401, 402, 403, 407), fetch.DENIED),
    "gone": ((404, 410), fetch.GONE),
    "legal": ((451,), fetch.LEGAL),
    "limited": ((429,), fetch.LIMITED),
    "broken": ((408, 500, 502, 503, 504, 599), fetch.BROKEN),
    "refused": ((400, 405, 418, 422), fetch.REFUSED),
}


@pytest.mark.parametrize(("status", "advice"), [(code, advice) for codes, advice in CLASSES.values()
                                                for code in codes])
async def test_each_http_failure_class_gets_its_own_advice(status: int, advice: str, fake_web: FakeWeb,
                                                           page_ctx: ToolContext) -> None:
    fake_web.page_fail_next("/pages/etf-fees.html", status)
    result = await ReadPage().run(ReadPageInput(url=f"{fake_web.url}/pages/etf-fees.html", goal=GOAL), page_ctx)
    assert result.is_error and f"answered HTTP {status}: {advice}" in result.text


def test_the_advice_of_the_classes_is_distinct_and_says_what_to_do() -> None:
    advice = [a for _, a in CLASSES.values()]
    assert len(set(advice)) == len(advice)
    assert all(re.search(r"\b(read it again once|do not read|read this one again at most once)", a, re.I)
               for a in advice), "each says whether a retry can help"
    assert "ask them to share the document in the thread" in fetch.DENIED, "what no tool can do goes to the requester"


@given(st.integers(min_value=400, max_value=599))
def test_every_http_failure_gets_one_of_the_classes(status: int) -> None:
    text = fetch.status_advice("https://example.org/p", status)
    assert text.startswith(f"https://example.org/p answered HTTP {status}: ")
    assert text.split(": ", 1)[1] in {a for _, a in CLASSES.values()}


# ------------------------------------------------ read_page cites past its first ~190k characters

def long_page(late: str) -> str:
    filler = "".join(f"<h2>Chapter {c}</h2>" + "".join(
        f"<p>Chapter {c} paragraph {i} discusses unrelated history of index funds at length, year {1990 + i}.</p>"
        for i in range(60)) for c in range(60))
    return f"<html><body><h1>Annual report</h1>{filler}<h2>Fees</h2><p>{late}</p></body></html>"


async def test_read_page_reads_on_from_near_and_cites_what_lies_past_its_first_parts(
        fake_web: FakeWeb, page_ctx: ToolContext) -> None:
    late = "The expense ratio of VTI was 0.03 percent for the fiscal year 2026."
    fake_web.add_page("/pages/long-report.html", long_page(late))
    tool, url = ReadPage(), f"{fake_web.url}/pages/long-report.html"
    first = await tool.run(ReadPageInput(url=url, goal=GOAL), page_ctx)
    assert not first.is_error and late not in first.text
    near = re.search(r"read on with near='([^']+)'", first.text)
    assert near, first.text
    second = await tool.run(ReadPageInput(url=url, goal=GOAL, near="the expense ratio of"), page_ctx)
    assert not second.is_error and f'"{late}"' in second.text, second.text
    cited = next(s for s in page_ctx.registry.all() if s.passage == late)
    assert f"[{cited.marker}]" in second.text
    onward = await tool.run(ReadPageInput(url=url, goal=GOAL, near=near.group(1)), page_ctx)
    assert not onward.is_error and "from '" in onward.text


async def test_a_near_that_is_not_on_the_page_names_its_headings(fake_web: FakeWeb, page_ctx: ToolContext) -> None:
    result = await ReadPage().run(ReadPageInput(url=f"{fake_web.url}/pages/etf-fees.html", goal=GOAL,
                                                near="Chapter 99 appendix"), page_ctx)
    assert result.is_error and "There is no 'Chapter 99 appendix' on this page. Its headings:" in result.text


# ------------------------------------------------ the delegation cap

async def test_a_run_past_its_task_agent_cap_is_told_to_research_the_rest_itself(page_ctx: ToolContext) -> None:
    from agent import defaults
    from agent.tools.spawn_tasks import SpawnTasks, SpawnTasksInput

    brief = {"objective": "SCHB fees", "output": "the fee", "background": "", "key_questions": ["the fee?"],
             "boundaries": "not VTI", "sources": "fact sheets", "call_budget": 5}
    tool = SpawnTasks()
    tool.restore({"spawned": defaults.MAX_TASK_AGENTS_PER_RUN})  # two full batches already ran
    page_ctx.tasks = object()  # type: ignore[assignment]  # never reached: the cap refuses first
    result = await tool.run(SpawnTasksInput.model_validate({"tasks": [brief]}), page_ctx)
    assert result.is_error and f"already used 6 of its {defaults.MAX_TASK_AGENTS_PER_RUN} task agents" in result.text
    assert "Research what is left yourself" in result.text
