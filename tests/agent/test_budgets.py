"""Limits that name themselves, a report that always gets written, stop and upgrade mid-run."""
from __future__ import annotations

import json
import time
from typing import Any

import pytest
from anthropic import AsyncAnthropic

from agent import AgentConfig, Budget, FetchConfig, Finished, ResearchTask, RunEvent, SearchConfig, research
from agent.backend import RunBackend
from agent.budget import Ledger
from agent.config import PROFILES, Caps, budget_for
from agent.control import MemoryControl, Note, StopRequest
from agent.events import SectionRevised, SectionWritten
from agent.report import Revision, Section
from tests.fakes.anthropic import FakeAnthropic, text_reply, tool_reply
from tests.fakes.policies import ResearchPolicy, is_extraction


class Clock:
    """A clock the scripted model moves forward: each model turn takes `per_turn` seconds."""

    def __init__(self, per_turn: float = 0.0) -> None:
        self.now = 1_000_000.0
        self.per_turn = per_turn

    def __call__(self) -> float:
        return self.now


async def run(fake_model: FakeAnthropic, fake_web, *, budget: Budget | None = None, clock=time.time,
              control: MemoryControl | None = None, question: str = "expense ratio VTI SCHB ITOT",
              sections: list[Section] | None = None) -> tuple[list[RunEvent], Any]:
    events: list[RunEvent] = []

    async def emit(event: RunEvent) -> None:
        events.append(event)

    config = AgentConfig(search=SearchConfig(provider="searxng", searxng_url=fake_web.url),
                         fetch=FetchConfig(allow=["127.0.0.1"]), claim_check=False)  # scripted in a fixed order
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        outcome = await research(ResearchTask(question=question, budget=budget or Budget()), config,
                                 anthropic=client, emit=emit, backend=RunBackend(control=control or MemoryControl()),
                                 clock=clock, sections=sections)
    return events, outcome


def ticking(policy, clock: Clock):
    def answer(request: dict) -> Any:
        if not is_extraction(request):
            clock.now += clock.per_turn
        return policy(request)
    return answer


def main_requests(fake_model: FakeAnthropic) -> list[dict]:
    return [r for r in fake_model.requests if not is_extraction(r)]


def budget_text(request: dict) -> str:
    return request["messages"][-1]["content"][-1]["text"]


# --- limits --------------------------------------------------------------------------

@pytest.mark.parametrize("budget, per_turn, name", [
    (Budget(wall_seconds=1800, reserve_seconds=600), 600, "wall-time limit (30 min)"),
    (Budget(active_seconds=1200, reserve_seconds=400), 400, "active-time limit (20 min)"),
    (Budget(max_requests=4, reserve_requests=1), 0, "request limit (4 model requests)"),
])
async def test_each_limit_fires_names_itself_and_still_yields_a_report(fake_model, fake_web, budget, per_turn, name) -> None:
    clock = Clock(per_turn)
    fake_model.policy = ticking(ResearchPolicy(), clock)
    events, outcome = await run(fake_model, fake_web, budget=budget, clock=clock)
    final = main_requests(fake_model)[-1]
    assert final.get("tool_choice") == {"type": "none"}, "the last request is the forced final answer"
    assert f"FINAL TURN ({name}" in budget_text(final)
    assert outcome.summary, "a report summary is written from the reserve"
    finished = events[-1]
    assert isinstance(finished, Finished) and name in finished.reason


async def test_cost_and_token_limits_name_themselves(fake_model, fake_web) -> None:
    events, outcome = await run(fake_model, fake_web, budget=Budget(max_input_tokens=12_000))
    assert "input-token limit (12,000)" in events[-1].reason and outcome.summary
    # Priced at Sonnet 5.5's $2/$10 per MTok (the capability table), this run costs about $0.015.
    events, outcome = await run(fake_model, fake_web, budget=Budget(max_cost_usd=0.01))
    assert "cost limit ($0.01)" in events[-1].reason and outcome.summary


async def test_operator_cap_of_zero_requests_wins_and_says_so(fake_model, fake_web) -> None:
    budget = budget_for("deep", Caps(max_requests=0))
    events, outcome = await run(fake_model, fake_web, budget=budget)
    assert fake_model.requests == []
    assert outcome.status == "failed"
    assert "request limit (0 model requests) reached before a final answer was written" == events[-1].reason


def test_operator_caps_lower_every_profile_but_never_raise_it() -> None:
    caps = Caps(max_requests=10, wall_minutes=500, max_cost_usd=2.5)
    for profile in PROFILES:
        budget = budget_for(profile, caps)
        assert budget.max_requests == 10 and budget.max_cost_usd == 2.5
        assert budget.wall_seconds == PROFILES[profile].wall_seconds, "a cap above the profile changes nothing"


async def test_time_limit_mid_tool_names_the_stage(fake_model, fake_web) -> None:
    fake_web.slow_seconds = 30
    calls = iter([tool_reply(("read_page", {"url": f"{fake_web.url}/slow", "goal": "fees"}))])
    fake_model.policy = lambda request: next(calls, text_reply("What I have: nothing verified."))
    events, outcome = await run(fake_model, fake_web, budget=Budget(wall_seconds=3.0, reserve_seconds=2.0),
                                question=f"the fees on {fake_web.url}/slow")  # a URL the run has seen
    assert fake_web.slow_served == 0, "the run ended without waiting for the 30 s page"
    assert "wall-time limit (3 s) reached while reading a page" in events[-1].reason
    cancelled = main_requests(fake_model)[-1]["messages"][-1]["content"][0]
    assert cancelled["type"] == "tool_result" and "Not completed: wall-time limit" in cancelled["content"]
    assert outcome.summary == "What I have: nothing verified."


def test_active_time_counts_parallel_work_once() -> None:
    ledger = Ledger.start(Budget(), clock=lambda: 0.0)
    ledger.begin(10.0)   # a model call
    ledger.end(20.0)
    ledger.begin(30.0)   # two tools in parallel: 30–40 and 32–45
    ledger.begin(32.0)
    ledger.end(40.0)
    ledger.end(45.0)
    assert ledger.active(100.0) == 25.0 and ledger.wall(100.0) == 100.0
    ledger.begin(90.0)
    ledger.close_after_crash(95.0)
    assert ledger.active(200.0) == 30.0, "an interval open at a crash is counted, not refunded"


async def test_correction_capacity_is_enforced_with_advice(fake_model, fake_web) -> None:
    body = "VTI is the cheapest of the three [s1]."
    calls = iter([
        tool_reply(("web_search", {"query": "vti expense ratio"})),
        tool_reply(("write_section", {"title": "Fees", "body": body})),
        *[tool_reply(("revise_section", {"section_id": "sec1", "body": body, "reason": f"check {i}"})) for i in range(3)],
        text_reply("<summary>Done [s1].</summary>"),
    ])
    fake_model.policy = lambda request: next(calls)
    events, _ = await run(fake_model, fake_web)
    assert len([e for e in events if isinstance(e, SectionRevised)]) == 2, "standard: 2 revisions per section"
    refused = main_requests(fake_model)[-1]["messages"][-1]["content"][0]
    assert refused["is_error"] and "revised 2 times in this thread already, the per-section limit" in refused["content"]


async def test_correction_capacity_counts_the_revisions_earlier_runs_of_the_thread_made(fake_model, fake_web) -> None:
    # A continuation inherits sec1 already revised twice (the standard per-section limit) by earlier runs.
    inherited = Section(section_id="sec1", title="Fees", body="VTI is the cheapest [s1].",
                        revisions=[Revision(body="v1", reason="r1"), Revision(body="v2", reason="r2")])
    calls = iter([
        tool_reply(("web_search", {"query": "vti expense ratio"})),
        tool_reply(("revise_section", {"section_id": "sec1", "body": "VTI is cheapest [s1].", "reason": "again"})),
        text_reply("<summary>Done [s1].</summary>"),
    ])
    fake_model.policy = lambda request: next(calls)
    events, _ = await run(fake_model, fake_web, sections=[inherited])
    assert not [e for e in events if isinstance(e, SectionRevised)]
    refused = main_requests(fake_model)[-1]["messages"][-1]["content"][0]
    assert refused["is_error"] and "revised 2 times in this thread already" in refused["content"]
    assert "standard profile" in refused["content"], "the limit is named"


# --- stop, upgrade, notes -------------------------------------------------------------

async def test_stop_cancels_in_flight_work_and_keeps_sections(fake_model, fake_web) -> None:
    fake_web.slow_seconds = 30
    control = MemoryControl()
    calls = iter([
        tool_reply(("web_search", {"query": "vti expense ratio"})),
        tool_reply(("write_section", {"title": "Fees", "body": "VTI is the cheapest of the three [s1]."})),
        tool_reply(("read_page", {"url": f"{fake_web.url}/slow", "goal": "more"})),
    ])

    def policy(request: dict) -> Any:
        if request.get("tool_choice") == {"type": "none"}:
            return text_reply("Stopped early: VTI costs 0.03% [s1].")
        reply = next(calls)
        if reply.content[0]["name"] == "read_page":
            # The stop lands while the slow page is being read.
            control.stop = StopRequest(by="<@U0ANA>")
        return reply

    fake_model.policy = policy
    events, outcome = await run(fake_model, fake_web, control=control)
    assert fake_web.slow_served == 0, "stopped at once, not after the 30 s page"
    assert outcome.status == "stopped" and outcome.reason.startswith("stopped by <@U0ANA> at ")
    assert outcome.summary == "Stopped early: VTI costs 0.03% [s1]."
    assert [e.title for e in events if isinstance(e, SectionWritten)] == ["Fees"]
    assert "STOP: the run was stopped by <@U0ANA>" in json.dumps(main_requests(fake_model)[-1]["messages"][-1])


async def test_upgrade_is_adopted_at_the_next_step(fake_model, fake_web) -> None:
    control = MemoryControl()
    inner = ResearchPolicy()

    def policy(request: dict) -> Any:
        if not is_extraction(request) and len(main_requests(fake_model)) == 2:
            control.budget = PROFILES["deep"]
        return inner(request)

    fake_model.policy = policy
    await run(fake_model, fake_web, control=control)
    blocks = [budget_text(r) for r in main_requests(fake_model)]
    assert "Profile: standard (budget revision 1)" in blocks[1]
    assert "Profile: deep (budget revision 2)" in blocks[2]
    assert f"of {PROFILES['deep'].max_requests} used" in blocks[2], "admission reads the same revision"


async def test_user_note_reaches_the_next_turn(fake_model, fake_web) -> None:
    control = MemoryControl()
    inner = ResearchPolicy()

    def policy(request: dict) -> Any:
        if not is_extraction(request) and len(main_requests(fake_model)) == 1:
            control.pending.append(Note(author="<@U0BEN>", text="only use sources after 2020"))
        return inner(request)

    fake_model.policy = policy
    await run(fake_model, fake_web, control=control)
    second = json.dumps(main_requests(fake_model)[1]["messages"][-1])
    assert 'user_note from=\\"<@U0BEN>\\">only use sources after 2020' in second


async def test_progress_counts_requests_with_the_counter_the_budget_enforces(fake_model, fake_web) -> None:
    from agent.events import UsageRecorded

    events, _ = await run(fake_model, fake_web)  # page reads make small-model requests too
    usage = [e for e in events if isinstance(e, UsageRecorded)]
    assert usage and all(u.requests + u.requests_left == Budget().max_requests for u in usage)
    assert usage[-1].requests < len(fake_model.requests), "page reading is not a model request of the budget"


def test_the_budget_block_says_what_the_model_spends() -> None:
    from agent.budget import Ledger
    from agent.usage import Usage

    ledger = Ledger.start(Budget(max_input_tokens=500_000), lambda: 0.0)
    ledger.charge("claude-sonnet-5-5", Usage(input_tokens=40_000, output_tokens=3_100, thinking_tokens=1_900))
    block = ledger.block(60.0, 12, ["sec1 Fees"], None, context=(61_200, 200_000), thinking=True)
    assert "Tokens: 40,000 of 500,000 input used, 3,100 output (1,900 of them thinking)." in block
    assert "Context: 61,200 of 200,000 tokens (31%); older notes are compacted into a summary at 75%." in block
    plain = Ledger.start(Budget(), lambda: 0.0).block(0.0, 0, [], None)
    assert "Tokens: 0 input used, 0 output." in plain and "thinking" not in plain and "Context:" not in plain
