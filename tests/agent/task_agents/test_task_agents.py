"""spawn_tasks: task agents run side by side, fail alone, cite into the report, stop with the run,
and survive a crash. The lead and its task agents are played by one scripted policy behind
the fake Messages API, told apart by their system prompts."""
from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest
from anthropic import AsyncAnthropic
from pydantic import BaseModel

from agent import AgentConfig, Budget, ResearchTask, RunEvent, SourceRegistry, research
from agent.backend import RunBackend
from agent.budget import Ledger
from agent.checkpoint import MemoryCheckpointStore
from agent.context.requestlog import MemoryRequestLog
from agent.control import MemoryControl, StopRequest
from agent.events import Progress, SectionWritten, SourceAdded
from agent.report import assemble
from agent.results import MemoryResultStore, StoredResult
from agent.task_agents.budget import TaskRefused, carve
from agent.task_agents.report import STORED_KIND, TaskReport, from_stored
from agent.tools import Calculator, FetchResult, Tool, ToolContext, ToolResult
from agent.tools.report_tools import ReviseSection, WriteSection
from agent.tools.spawn_tasks import SpawnTasks
from agent.tools.web_search import WebSearchInput
from tests.fakes.anthropic import FakeAnthropic, text_reply, tool_reply
from tests.fakes.bulk import BulkRead, BulkSearch
from tests.fakes.policies import TaskAgentsPolicy, brief_for, is_extraction, is_task_agent, objective_of

OBJECTIVES = ["VTI expense ratio", "ITOT tracking difference", "SCHB holdings count"]
RESEARCH_TOOLS = {"web_search", "read_page", "calculator", "fetch_result"}


class Gate:
    """Shared by a search tool and the task agents' copies of it: slow queries wait here."""

    def __init__(self, slow_seconds: float = 30.0) -> None:
        self.slow_seconds = slow_seconds
        self.started = 0
        self.cancelled = 0


class GatedSearch(BulkSearch):
    """BulkSearch whose queries containing "slow" take `gate.slow_seconds` (an in-flight call to cancel)."""

    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        assert isinstance(args, WebSearchInput)
        if "slow" in args.query and self.gate.slow_seconds:
            self.gate.started += 1
            try:
                await asyncio.sleep(self.gate.slow_seconds)
            except asyncio.CancelledError:
                self.gate.cancelled += 1
                raise
        return await super().run(args, ctx)


class KeepingStore(MemoryResultStore):
    """The in-memory result store, listing what was put (a test reads the task reports back)."""

    def __init__(self) -> None:
        super().__init__()
        self.put_ids: list[str] = []

    async def put(self, result: StoredResult) -> None:
        self.put_ids.append(result.id)
        await super().put(result)

    async def reports(self) -> list[TaskReport]:
        stored = [await self.get(i) for i in dict.fromkeys(self.put_ids)]
        return [from_stored(s) for s in stored if s is not None and s.kind == STORED_KIND]


def team_tools(search: Tool | None = None) -> list[Tool]:
    return [search or BulkSearch(), BulkRead(), Calculator(), FetchResult(), SpawnTasks(), WriteSection(),
            ReviseSection()]


async def run(fake_model: FakeAnthropic, *, tools: list[Tool] | None = None, events: list[RunEvent] | None = None,
              config: AgentConfig | None = None, budget: Budget | None = None, **kwargs: Any) -> tuple[list[RunEvent], Any]:
    events = [] if events is None else events

    async def emit(event: RunEvent) -> None:
        events.append(event)

    task = ResearchTask(question="Compare the fees and tracking of VTI, ITOT and SCHB",
                        constraints=["Only sources after 2020"], budget=budget or Budget())
    # No SDK retries: a scripted API error reaches the task agent at once.
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        outcome = await research(task, config or AgentConfig(model_max_retries=0, claim_check=False), anthropic=client, emit=emit,
                                 tools=tools if tools is not None else team_tools(), **kwargs)
    return events, outcome


def lead_requests(fake_model: FakeAnthropic) -> list[dict]:
    return [r for r in fake_model.requests if not is_task_agent(r) and not is_extraction(r)]


def task_requests(fake_model: FakeAnthropic, objective: str | None = None) -> list[dict]:
    return [r for r in fake_model.requests if is_task_agent(r) and objective in (None, objective_of(r))]


def spawn_result(fake_model: FakeAnthropic) -> str:
    """The one tool result the lead got for spawn_tasks."""
    for request in lead_requests(fake_model):
        for message in request["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result" and "task agent" in str(block.get("content")):
                    return str(block["content"])
    raise AssertionError("no spawn_tasks result reached the lead")


def activities(events: list[RunEvent]) -> list[str]:
    return [e.activity for e in events if isinstance(e, Progress)]


async def when(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


# --- running side by side -----------------------------------------------------------------

async def test_three_task_agents_run_at_the_same_time(fake_model: FakeAnthropic) -> None:
    policy = TaskAgentsPolicy(OBJECTIVES)
    fake_model.policy = policy
    fake_model.delay = 0.3  # every request takes this long: each task agent's span is observable
    log = MemoryRequestLog()
    events, outcome = await run(fake_model, backend=RunBackend(request_log=log))
    assert outcome.status == "completed", outcome.reason
    spans = {o: (min(policy.requests_of(o)) - fake_model.delay, max(policy.requests_of(o))) for o in OBJECTIVES}
    assert max(start for start, _ in spans.values()) < min(end for _, end in spans.values()), (
        f"all three were working at one moment: {spans}")
    assert "Tasks: 0 done, 3 running — 1. VTI expense ratio: starting · 2. ITOT tracking difference: starting · " \
           "3. SCHB holdings count: starting" in activities(events)
    assert any(a.startswith("Tasks: 3 done, 0 running — 1. VTI expense ratio: done") for a in activities(events))
    assert not fake_model.rejected


async def test_each_task_agent_has_its_own_context_research_tools_and_logged_history(fake_model) -> None:
    fake_model.policy = TaskAgentsPolicy(OBJECTIVES)
    log = MemoryRequestLog()
    store = KeepingStore()
    await run(fake_model, backend=RunBackend(results=store, request_log=log))
    children = task_requests(fake_model)
    assert {t["name"] for r in children for t in r["tools"]} == RESEARCH_TOOLS, "no report tools, no nesting"
    for objective in OBJECTIVES:
        opening = task_requests(fake_model, objective)[0]["messages"][0]["content"][0]["text"]
        assert opening.startswith('<task_brief number="') and f"Objective: {objective}" in opening
        assert "Out of scope (other task agents cover it): Do not cover:" in opening
        assert "- Only sources after 2020" in opening, "the requester's constraints bind task agents too"
    # Each task agent's requests are logged under its own label, numbered with the lead's.
    assert [r.n for r in log.records] == list(range(1, len(log.records) + 1))
    kinds = [r.kind for r in log.records]
    assert {"turn", "task:1", "task:2", "task:3"} <= set(kinds)
    last_of_task_1 = max(r.n for r in log.records if r.kind == "task:1")
    body = json.dumps(log.body(last_of_task_1))
    assert 'results for \\"vti expense ratio 1\\"' in body, "the task agent's history, as it was sent"
    # …but never in the lead's context: only the findings come back, as one tool result.
    for request in lead_requests(fake_model):
        assert 'results for \\"vti expense ratio 1\\"' not in json.dumps(request["messages"])
    result = spawn_result(fake_model)
    assert result.count("\n## Task ") == 3 and "3 task agent(s) reported (3 completed)" in result
    result_id = result.split("]", 1)[0].strip("[")
    stored = await store.get(result_id)
    assert stored is not None and stored.kind == "spawn_tasks" and f"[{result_id}]\n{stored.text}" == result, (
        "stored under its id like any other result: elision can stub it and fetch_result bring it back")


async def test_active_time_counts_parallel_task_agents_once(fake_model: FakeAnthropic) -> None:
    fake_model.policy = TaskAgentsPolicy(OBJECTIVES)
    fake_model.delay = 0.3
    store = KeepingStore()
    ledger = Ledger.start(Budget())
    await run(fake_model, backend=RunBackend(results=store), ledger=ledger)
    reports = await store.reports()
    branches = [r.active_seconds for r in reports]
    assert len(branches) == 3 and min(branches) > 0.8, branches
    lead_active = ledger.active(time.time())
    assert max(branches) < lead_active < sum(branches), (lead_active, branches)
    assert ledger.requests == sum(r.requests for r in reports) + 3, "task agents' requests count toward the run's"


# --- failures and budgets ---------------------------------------------------------------

async def test_a_failing_task_agent_does_not_sink_its_siblings(fake_model: FakeAnthropic) -> None:
    objectives = ["VTI expense ratio", "fail ITOT tracking difference", "SCHB holdings count"]
    fake_model.policy = TaskAgentsPolicy(objectives)
    events, outcome = await run(fake_model)
    assert outcome.status == "completed", outcome.reason
    result = spawn_result(fake_model)
    assert "(2 completed, 1 failed)" in result
    failed = result.split("## Task 2 — ")[1].split("## Task 3")[0]
    assert failed.startswith("fail ITOT tracking difference · failed")
    assert "Note: it failed: the model service kept failing (HTTP 500" in failed
    assert "It wrote no findings. Passages its searches and reads returned" in failed and "[s" in failed, (
        "it hands back what it met")
    for number in (1, 3):
        assert re.search(rf"## Task {number} — .* · completed \(\d+ requests\)\nFindings on ", result)
    titles = [e.title for e in events if isinstance(e, SectionWritten)]
    assert "Task 1: VTI expense ratio" in titles and "Task 3: SCHB holdings count" in titles
    assert any("2. fail ITOT tracking difference: failed" in a for a in activities(events))


async def test_a_task_agent_out_of_budget_returns_what_it_has_and_says_so(fake_model) -> None:
    policy = TaskAgentsPolicy(OBJECTIVES[:2], searches=3, call_budget=2)
    fake_model.policy = policy
    await run(fake_model)
    result = spawn_result(fake_model)
    assert "(2 incomplete)" in result
    assert "Note: it stopped at its budget (request limit (3 model requests) nearly reached)" in result
    assert result.count("Findings on ") == 2 and "[s" in result
    for objective in OBJECTIVES[:2]:
        assert len(policy.requests_of(objective)) == 3, "two research steps, then the findings from its reserve"
        final = task_requests(fake_model, objective)[-1]
        assert final.get("tool_choice") == {"type": "none"}


def test_child_budgets_are_carved_from_exploration_and_leave_the_lead_its_reserve() -> None:
    lead = Ledger.start(Budget(max_requests=40, reserve_requests=2, wall_seconds=1800, reserve_seconds=180,
                               max_cost_usd=2.0), clock=lambda: 0.0)
    lead.requests = 5
    budgets = carve(lead, 600.0, [10, 10, 15])
    assert [b.max_requests for b in budgets] == [10, 10, 10], "(40 - 2 reserved - 5 used - 3 kept) // 3 = 10 each"
    assert all(b.wall_seconds == 1800 - 180 - 600 - 15 for b in budgets), "they end before the lead must write"
    assert sum(b.max_cost_usd or 0 for b in budgets) <= 2.0 * 0.9
    for budget in budgets:  # every task agent spends all it was given…
        lead.absorb(budget.max_requests, 0, 0, 0.0)
    assert lead.decide(600.0).kind == "explore", "…and the lead can still write sections, then its answer"
    assert lead.budget.max_requests - lead.requests >= lead.budget.reserve_requests + 3
    tight = Ledger.start(Budget(max_requests=8), clock=lambda: 0.0)
    try:
        carve(tight, 0.0, [5, 5])
        raise AssertionError("should refuse")
    except TaskRefused as exc:
        assert "Not enough budget left for 2 task agent(s)" in str(exc) and "Give fewer tasks" in str(exc)


async def test_bad_calls_get_errors_that_say_what_to_do(fake_model: FakeAnthropic) -> None:
    four = [brief_for(f"topic {i}", [], 3) for i in range(4)]
    no_boundaries = {k: v for k, v in brief_for("topic", [], 3).items() if k != "boundaries"}
    same = [brief_for("VTI fees", [], 3), brief_for("vti  fees", [], 3)]
    two = [brief_for(f"angle {i}", [], 3) for i in range(2)]
    calls = iter([
        tool_reply(("spawn_tasks", {"tasks": four})),
        tool_reply(("spawn_tasks", {"tasks": [no_boundaries]})),
        tool_reply(("spawn_tasks", {"tasks": same})),
        tool_reply(("spawn_tasks", {"tasks": two[:1]}), ("spawn_tasks", {"tasks": two[1:]})),
    ])

    def policy(request: dict) -> Any:
        if is_task_agent(request):
            return text_reply("Findings: nothing found.")
        return next(calls, text_reply("Done."))

    fake_model.policy = policy
    await run(fake_model)
    answers = [b["content"] for r in lead_requests(fake_model)[1:]
               for b in r["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert "spawn_tasks takes at most 3 tasks per call; you gave 4. Merge the closest" in answers[0]
    assert "Invalid input for spawn_tasks: tasks.0.boundaries: Field required" in answers[1]
    assert "Two tasks have the same objective" in answers[2]
    assert "3 task agent(s)" not in answers[3] and "1 task agent(s) reported" in answers[3]
    assert "already running for another spawn_tasks call in this turn" in answers[4]
    assert len({objective_of(r) for r in task_requests(fake_model)}) == 1, "only the first of the two calls ran"


async def test_too_little_budget_refuses_to_spawn(fake_model: FakeAnthropic) -> None:
    fake_model.policy = TaskAgentsPolicy(OBJECTIVES)
    await run(fake_model, budget=Budget(max_requests=8))
    assert "Not enough budget left for 3 task agent(s)" in json.dumps(lead_requests(fake_model)[1]["messages"][-1])
    assert not task_requests(fake_model)


async def test_the_cap_is_configurable(fake_model: FakeAnthropic) -> None:
    fake_model.policy = TaskAgentsPolicy(OBJECTIVES)
    await run(fake_model, config=AgentConfig(model_max_retries=0, max_task_agents=2))
    assert "at most 2 tasks per call; you gave 3" in json.dumps(lead_requests(fake_model)[1]["messages"][-1])


@pytest.mark.parametrize("config, offered", [
    (AgentConfig(), True),
    (AgentConfig(max_task_agents=0), False),  # the operator turned task agents off
    (AgentConfig(context_tokens=8_000), False),  # too small a context to hold task agents' reports
])
async def test_spawn_tasks_and_its_rules_are_offered_only_where_task_agents_can_work(fake_model, config,
                                                                                    offered) -> None:
    fake_model.policy = lambda request: text_reply("Nothing to research.")
    await run(fake_model, config=config)
    request = fake_model.requests[0]
    assert ("spawn_tasks" in {t["name"] for t in request["tools"]}) is offered
    assert ("## Delegating to task agents" in request["system"][0]["text"]) is offered
    assert request["system"][0]["text"].startswith("You are Deepthread, a research agent")


# --- citations ----------------------------------------------------------------------------

async def test_markers_from_task_agents_resolve_in_the_final_report(fake_model: FakeAnthropic) -> None:
    fake_model.policy = TaskAgentsPolicy(OBJECTIVES)
    events, outcome = await run(fake_model)
    sources = {e.source.marker: e.source for e in events if isinstance(e, SourceAdded)}
    assert len(sources) == len({e.source.marker for e in events if isinstance(e, SourceAdded)}), "announced once"
    sections = [e for e in events if isinstance(e, SectionWritten)]
    assert len(sections) == 3
    for section in sections:
        cited = re.findall(r"\[(s\d+)\]", section.body)
        task = int(re.match(r"Task (\d)", section.title).group(1))
        objective = OBJECTIVES[task - 1]
        child_saw = json.dumps([r["messages"] for r in task_requests(fake_model, objective)])
        assert cited and all(f"[{m}]" in child_saw for m in cited), "the markers came from that task agent"
    from agent.report import Section
    report = assemble(outcome.summary, [Section(section_id=s.section_id, title=s.title, body=s.body) for s in sections],
                      sources)
    for section, body in report.sections:
        assert len(re.findall(r"\[\d+\]", body)) == len(re.findall(r"\[s\d+\]", section.body)), "every marker resolved"
    assert all(f.source.url.startswith("https://") for f in report.footnotes)


# --- stop and crash -----------------------------------------------------------------------

async def test_a_stop_cancels_every_task_agent_and_their_calls_in_flight(fake_model: FakeAnthropic) -> None:
    gate = Gate(slow_seconds=30)
    objectives = ["VTI expense ratio", "slow ITOT tracking", "slow SCHB holdings"]
    fake_model.policy = TaskAgentsPolicy(objectives)
    control = MemoryControl()
    events: list[RunEvent] = []
    stopped: list[int] = []

    async def stop_when_one_is_done() -> None:
        await when(lambda: gate.started == 2 and any("1 done, 2 running" in a for a in activities(events)))
        stopped.append(len(task_requests(fake_model)))
        control.stop = StopRequest(by="<@U0ANA>")

    stopper = asyncio.create_task(stop_when_one_is_done())
    _, outcome = await run(fake_model, tools=team_tools(GatedSearch(gate)), backend=RunBackend(control=control),
                           events=events)
    await stopper
    assert outcome.status == "stopped" and outcome.reason.startswith("stopped by <@U0ANA>")
    assert gate.cancelled == 2, "both in-flight searches were cancelled"
    assert len(task_requests(fake_model)) == stopped[0], "no task agent sent anything after the stop"
    last = json.dumps(lead_requests(fake_model)[-1]["messages"][-2:], ensure_ascii=False)
    assert "Not completed: stopped by <@U0ANA>" in last
    assert "Task agents that had finished before this" in last and "## Task 1 — VTI expense ratio" in last, (
        "the finished task's findings reach the stop's final answer")
    assert "## Task 2" not in last


async def test_finished_task_agents_are_not_run_again_after_a_crash(fake_model: FakeAnthropic) -> None:
    gate = Gate(slow_seconds=30)
    objectives = ["VTI expense ratio", "slow ITOT tracking", "slow SCHB holdings"]
    policy = TaskAgentsPolicy(objectives)
    fake_model.policy = policy
    events: list[RunEvent] = []
    tools = team_tools(GatedSearch(gate))
    backend = RunBackend(results=MemoryResultStore(), checkpoints=MemoryCheckpointStore())
    worker = asyncio.create_task(run(fake_model, tools=tools, events=events, backend=backend))
    await when(lambda: gate.started == 2 and any("1 done, 2 running" in a for a in activities(events)))
    worker.cancel()  # the worker dies with two task agents in flight
    await asyncio.gather(worker, return_exceptions=True)
    before = {o: len(policy.requests_of(o)) for o in objectives}
    lead_before = len(lead_requests(fake_model))

    gate.slow_seconds = 0  # the fresh worker's searches are quick
    registry = SourceRegistry(e.source for e in events if isinstance(e, SourceAdded))  # from run state
    resumed: list[RunEvent] = []
    _, outcome = await run(fake_model, tools=team_tools(GatedSearch(gate)), events=resumed, backend=backend,
                           registry=registry)
    assert outcome.status == "completed", outcome.reason
    assert len(policy.requests_of("VTI expense ratio")) == before["VTI expense ratio"], "task 1 was not run again"
    for objective in objectives[1:]:
        assert len(policy.requests_of(objective)) > before[objective], "unfinished tasks ran again"
    first_after = lead_requests(fake_model)[lead_before]
    result = json.dumps(first_after["messages"][-1], ensure_ascii=False)
    assert "1 of them had finished before the run was resumed and were not run again" in result
    assert all(f"## Task {n} — " in result for n in (1, 2, 3)), "same call, same task numbers"
    spawn_ids = {b["id"] for r in fake_model.responses for b in r["content"]
                 if b.get("type") == "tool_use" and b["name"] == "spawn_tasks"}
    assert len(spawn_ids) == 1, "the lead was not asked to delegate again"
    task_1 = [e for e in resumed if isinstance(e, SectionWritten) and e.title.startswith("Task 1")][0]
    assert all(registry.get(m) for m in re.findall(r"\[(s\d+)\]", task_1.body)), "its markers still resolve"
