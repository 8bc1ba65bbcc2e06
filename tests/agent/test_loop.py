"""The research loop against the fake Messages API and a fake web: tools, citations, failures."""
from __future__ import annotations

from typing import Any

import pytest
from anthropic import AsyncAnthropic

from agent import AgentConfig, Budget, FetchConfig, Finished, ResearchTask, RunEvent, SearchConfig, research
from agent.events import SectionWritten, SourceAdded, UsageRecorded
from tests.fakes.anthropic import FakeAnthropic, text_reply, tool_reply
from tests.fakes.policies import ResearchPolicy, extract, is_extraction


def config_for(web_url: str) -> AgentConfig:
    return AgentConfig(
        search=SearchConfig(provider="searxng", searxng_url=web_url),
        fetch=FetchConfig(allow=["127.0.0.1"]),
    )


async def run(fake_model: FakeAnthropic, web_url: str, question: str = "expense ratio VTI SCHB ITOT",
              budget: Budget | None = None) -> tuple[list[RunEvent], Any]:
    events: list[RunEvent] = []

    async def emit(event: RunEvent) -> None:
        events.append(event)

    task = ResearchTask(question=question, budget=budget or Budget())
    async with AsyncAnthropic(api_key="test-key", base_url=fake_model.url) as client:
        outcome = await research(task, config_for(web_url), anthropic=client, emit=emit)
    return events, outcome


async def test_research_cites_read_pages_and_answers(fake_model, fake_web) -> None:
    events, outcome = await run(fake_model, fake_web.url)

    assert outcome.status == "completed", outcome.reason
    sections = [e for e in events if isinstance(e, SectionWritten)]
    assert len(sections) == 1 and "[s" in sections[0].body
    sources = {e.source.marker: e.source for e in events if isinstance(e, SourceAdded)}
    cited = set(__import__("re").findall(r"\[(s\d+)\]", sections[0].body))
    assert cited <= set(sources), "every cited marker was registered"
    assert all(sources[m].kind == "excerpt" and sources[m].url.startswith(fake_web.url) for m in cited)
    assert isinstance(events[-1], Finished) and events[-1].summary
    assert not fake_model.rejected, "every request obeyed the API's rules"


async def test_parallel_reads_are_answered_together_in_one_user_turn(fake_model, fake_web) -> None:
    await run(fake_model, fake_web.url)
    main = [r for r in fake_model.requests if not is_extraction(r)]
    after_reads = next(r for r in main if any(
        b.get("type") == "tool_result" and "Excerpts:" in str(b.get("content"))
        for b in r["messages"][-1]["content"] if isinstance(b, dict)))
    results = [b for b in after_reads["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert len(results) == 2


async def test_every_turn_carries_a_budget_block(fake_model, fake_web) -> None:
    await run(fake_model, fake_web.url)
    main = [r for r in fake_model.requests if not is_extraction(r)]
    for request in main:
        last = request["messages"][-1]["content"]
        assert "<budget>" in last[-1]["text"] and "Model requests:" in last[-1]["text"]


async def test_unknown_citation_is_refused_with_instructions(fake_model, fake_web) -> None:
    calls = iter([
        tool_reply(("write_section", {"title": "Fees", "body": "VTI costs 0.03% [s99]."})),
        text_reply("Nothing more."),
    ])
    fake_model.policy = lambda req: extract(req) if is_extraction(req) else next(calls)
    events, outcome = await run(fake_model, fake_web.url)
    second = [r for r in fake_model.requests if not is_extraction(r)][1]
    result = second["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert "unknown citation [s99]" in result["content"] and "cite only markers" in result["content"]
    assert not any(isinstance(e, SectionWritten) for e in events)


async def test_fabricated_excerpts_never_become_sources(fake_model, fake_web) -> None:
    policy = ResearchPolicy()
    fake_model.policy = lambda req: extract(req, fabricate=True) if is_extraction(req) else policy(req)
    events, _ = await run(fake_model, fake_web.url)
    passages = [e.source.passage for e in events if isinstance(e, SourceAdded)]
    assert passages and not any("appears nowhere on the page" in p for p in passages)


async def test_model_error_then_success_is_retried(fake_model, fake_web) -> None:
    fake_model.fail_next(500, times=1)
    _, outcome = await run(fake_model, fake_web.url)
    assert outcome.status == "completed"


async def test_model_that_keeps_failing_ends_the_run_with_a_reason(fake_model, fake_web) -> None:
    fake_model.fail_always(500)
    events, outcome = await run(fake_model, fake_web.url)
    assert outcome.status == "failed"
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.status == "failed"
    assert "model service kept failing" in finished.reason and "500" in finished.reason


async def test_request_cap_forces_a_final_answer_without_tools(fake_model, fake_web) -> None:
    events, outcome = await run(fake_model, fake_web.url, budget=Budget(max_requests=3, reserve_requests=1))
    main = [r for r in fake_model.requests if not is_extraction(r)]
    assert len(main) == 3
    assert main[-1]["tool_choice"] == {"type": "none"}
    assert "FINAL TURN" in main[-1]["messages"][-1]["content"][-1]["text"]
    assert outcome.status == "completed" and outcome.summary
    usage = [e for e in events if isinstance(e, UsageRecorded)][-1]
    assert usage.requests >= 3


async def test_unreachable_private_address_is_refused(fake_model, fake_web) -> None:
    calls = iter([
        tool_reply(("read_page", {"url": "http://169.254.169.254/latest/meta-data/", "goal": "credentials"})),
        text_reply("Done."),
    ])
    fake_model.policy = lambda req: next(calls)
    events: list[RunEvent] = []

    async def emit(event: RunEvent) -> None:
        events.append(event)

    config = AgentConfig(search=SearchConfig(provider="searxng", searxng_url=fake_web.url))  # no allow-list
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        # The URL is in the question, so the seen-URL gate lets it through to the address guard.
        await research(ResearchTask(question="what is at http://169.254.169.254/latest/meta-data/ ?"), config,
                       anthropic=client, emit=emit)
    result = fake_model.requests[1]["messages"][-1]["content"][0]
    assert result["is_error"] and "private or reserved address" in result["content"]


@pytest.mark.parametrize("path, expected", [
    ("/binary", "not a readable page"),
    ("/redirect/9", "redirected more than 5 times"),
    ("/missing-page", "HTTP 404"),
])
async def test_hostile_pages_become_actionable_tool_errors(fake_model, fake_web, path: str, expected: str) -> None:
    calls = iter([tool_reply(("read_page", {"url": fake_web.url + path, "goal": "anything"})), text_reply("Done.")])
    fake_model.policy = lambda req: next(calls)
    await run(fake_model, fake_web.url, question=f"what does {fake_web.url + path} say?")  # a URL the run has seen
    result = fake_model.requests[1]["messages"][-1]["content"][0]
    assert result["is_error"] and expected in result["content"], result["content"]


async def test_a_checking_line_tells_the_thread_where_sources_disagree(fake_model, fake_web) -> None:
    from agent.events import Disagreement
    from bot.publishing.progress_render import render_progress
    from jobs import Run
    from jobs.records.models import RunState
    from jobs.records.state import apply_event

    calls = iter([
        tool_reply(("web_search", {"query": "itot tracking difference"}),
                   text="Checking: ITOT is 0.03% at iShares [s4] but 0.05% at Morningstar [s9] — different periods?"),
        text_reply("Done."),
    ])
    fake_model.policy = lambda request: next(calls)
    events, _ = await run(fake_model, fake_web.url)
    disagreements = [e for e in events if isinstance(e, Disagreement)]
    assert [d.text for d in disagreements] == [
        "ITOT is 0.03% at iShares  but 0.05% at Morningstar  — different periods?"], "markers never reach Slack raw"
    state = RunState(run=Run(question="q"))
    for event in events[:-1]:  # still running
        state = apply_event(state, event)
    assert "Checking: ITOT is 0.03% at iShares" in render_progress(state).text
