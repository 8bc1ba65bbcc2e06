"""A run starts from what the team knows: before its first turn it searches the team's earlier reports,
and what it finds is its first tool result (`earlier_research`); their sources become fetchable, never
citable unread; a run whose search finds nothing opens as before; the agent may search again."""
from __future__ import annotations

from datetime import UTC, datetime

from agent import AgentConfig, ResearchTask, SourceRegistry
from agent.backend import RunBackend
from agent.earlier import EarlierReport, EarlierSource, MemoryEarlierResearch
from agent.events import EarlierFound, SourceAdded
from agent.tools.base import ToolContext
from agent.tools.earlier_research import EarlierResearchInput, EarlierResearchTool
from agent.tools.seen_urls import MemorySeenUrls, SeenUrls, normalise
from tests.fakes.policies import is_extraction
from tests.helpers import research_events

EARLIER = EarlierReport(
    run_id="run0earlier1",
    title="Expense ratio of VTI and SCHB",
    date=datetime(2026, 11, 12, tzinfo=UTC),
    permalink="https://team.slack.com/archives/C0PUB/p1700000000000100",
    summary="VTI and SCHB both charge 0.03%.",
    headings=["Fees", "Tracking"],
    sources=[EarlierSource(url="https://earlier-source.test/vti-fees", title="VTI fact sheet")],
)


def _tool_results(request: dict) -> list[dict]:
    return [b for m in request["messages"] if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


async def test_the_first_turn_sees_the_teams_earlier_report_as_a_tool_result(fake_model, fake_web) -> None:
    earlier = MemoryEarlierResearch([EARLIER])
    store = MemorySeenUrls()
    events, outcome = await research_events(fake_model, fake_web, "expense ratio VTI SCHB ITOT", earlier=earlier,
                                            backend=RunBackend(seen_urls=store))
    assert outcome.status == "completed"
    first = next(r for r in fake_model.requests if not is_extraction(r))
    assert "earlier_research" in {t["name"] for t in first["tools"]}
    opening = first["messages"][1]["content"]
    assert opening == [{"type": "tool_use", "id": "toolu_earlier_research_opening", "name": "earlier_research",
                        "input": {"query": "expense ratio VTI SCHB ITOT"}}]
    [result] = _tool_results(first)
    shown = result["content"] if isinstance(result["content"], str) else str(result["content"])
    for part in (EARLIER.title, EARLIER.permalink, "12 Nov 2026", "VTI and SCHB both charge 0.03%",
                 "https://earlier-source.test/vti-fees", "read it with read_page", "Fees; Tracking"):
        assert part in shown or part.replace("read it", "read one") in shown, part
    found = [e for e in events if isinstance(e, EarlierFound)]
    assert [[r.title for r in e.reports] for e in found] == [[EARLIER.title]]
    assert found[0].reports[0].permalink == EARLIER.permalink
    assert earlier.queries == ["expense ratio VTI SCHB ITOT"], "searched once, its answer primed"
    # A lead, not evidence: fetchable by this thread's runs, never registered as a source unread.
    assert normalise("https://earlier-source.test/vti-fees") in store.urls
    assert not [e for e in events if isinstance(e, SourceAdded) and "earlier-source.test" in e.source.url]


async def test_a_run_whose_search_finds_nothing_opens_as_before_with_the_tool_offered(fake_model, fake_web) -> None:
    earlier = MemoryEarlierResearch([EARLIER])
    events, _ = await research_events(fake_model, fake_web, "ocean heat content", earlier=earlier)
    first = next(r for r in fake_model.requests if not is_extraction(r))
    assert len(first["messages"]) == 1, "no opening call when nothing was found"
    assert "earlier_research" in {t["name"] for t in first["tools"]}
    assert not [e for e in events if isinstance(e, EarlierFound)]


async def test_without_a_library_the_tool_is_not_offered(fake_model, fake_web) -> None:
    await research_events(fake_model, fake_web, "expense ratio VTI")
    first = next(r for r in fake_model.requests if not is_extraction(r))
    assert "earlier_research" not in {t["name"] for t in first["tools"]}


async def test_a_continuation_does_not_search_again_before_its_first_turn(fake_model, fake_web) -> None:
    from agent.task import PriorRun

    earlier = MemoryEarlierResearch([EARLIER])
    task = ResearchTask(question="expense ratio VTI SCHB", follow_up="and ITOT?", prior=PriorRun(run_id="r0"))
    await research_events(fake_model, fake_web, task, earlier=earlier)
    assert earlier.queries == []


def _ctx(seen: SeenUrls, events: list) -> ToolContext:
    async def emit(event: object) -> None:
        events.append(event)

    return ToolContext(config=AgentConfig(), registry=SourceRegistry(), http=None, model=None,  # type: ignore[arg-type]
                       emit=emit, goal_question="q", seen=seen)


async def test_asking_again_with_the_same_words_is_refused_with_what_to_do_and_sources_become_seen_only_when_shown(
) -> None:
    events: list = []
    ctx = _ctx(SeenUrls(), events)
    tool = EarlierResearchTool(MemoryEarlierResearch([EARLIER]))
    assert not ctx.seen.allows("https://earlier-source.test/vti-fees", ctx)
    nothing = await tool.run(EarlierResearchInput(query="ocean heat"), ctx)
    assert not nothing.is_error and "No earlier report" in nothing.text
    assert not ctx.seen.allows("https://earlier-source.test/vti-fees", ctx)
    shown = await tool.run(EarlierResearchInput(query="VTI fees"), ctx)
    assert EARLIER.permalink in shown.text and ctx.seen.allows("https://earlier-source.test/vti-fees", ctx)
    again = await tool.run(EarlierResearchInput(query="  vti   FEES "), ctx)
    assert again.is_error and "Use other words" in again.text
    other = await tool.run(EarlierResearchInput(query="SCHB expense"), ctx)
    assert not other.is_error
    assert len([e for e in events if isinstance(e, EarlierFound)]) == 1, "each report announced once"
