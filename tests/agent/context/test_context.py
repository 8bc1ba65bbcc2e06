"""Context management, rule by rule: elision, stubs, compaction, projection, caching."""
from __future__ import annotations

import json
import re
from typing import Any

from anthropic import AsyncAnthropic

from agent import AgentConfig, Budget, ResearchTask, RunEvent, research
from agent.backend import RunBackend
from agent.context.elision import eligible, plan
from agent.context.history import History, ResultRecord
from agent.context.requestlog import MemoryRequestLog
from agent.context.stubs import stub_for
from agent.events import Progress
from tests.fakes.anthropic import FakeAnthropic, text_reply
from tests.fakes.bulk import bulk_tools
from tests.fakes.policies import LongRunPolicy, is_summary_request

BIG = "x" * 12_000  # ~3k tokens: over the 2k elision threshold


def record(step: int, tool: str = "web_search", text: str = BIG, n: int = 0, **arguments: Any) -> ResultRecord:
    rid = f"r_{step * 10 + n + 1:04x}"
    return ResultRecord(tool_use_id=f"toolu_{rid}", result_id=rid, tool=tool, arguments=arguments or {"query": "q"},
                        text=f"[{rid}]\n{text}", is_error=False, step=step)


def history_with(*steps: list[ResultRecord], texts: dict[int, str] | None = None) -> History:
    history = History("the task")
    for i, records in enumerate(steps):
        text = (texts or {}).get(i, "thinking")
        history.add_assistant([{"type": "text", "text": text}] + [
            {"type": "tool_use", "id": r.tool_use_id, "name": r.tool, "input": r.arguments} for r in records])
        history.add_results(records)
    return history


# --- elision rules ---------------------------------------------------------------------

def test_old_large_result_is_eligible_but_young_small_and_latest_are_not() -> None:
    old = record(0)
    small = record(1, text="tiny")
    young = record(5)
    latest = record(6)
    h = history_with([old], [small], [], [], [], [young], [latest])
    assert eligible(h) == [old]


def test_result_cited_in_recent_turns_is_kept() -> None:
    cited = record(0, text=BIG + " [s4] passage")
    other = record(1)
    h = history_with([cited], [other], [], [], [], [record(5)], texts={5: "VTI is cheap [s4]."})
    assert eligible(h) == [other]


def test_result_whose_id_was_used_recently_is_kept() -> None:
    fetched = record(0)
    h = history_with([fetched], [], [], [], [record(4)], texts={4: f"let me re-read {fetched.result_id}"})
    assert fetched not in eligible(h)


def test_most_recent_result_of_each_tool_is_kept_even_when_old() -> None:
    page = record(0, tool="read_page", url="https://a.org", goal="g")
    h = history_with([page], [], [], [], [], [record(5)])
    assert eligible(h) == []


def test_small_batches_wait_until_they_pay_for_the_cache_rewrite() -> None:
    h = history_with([record(0)], [], [], [], [], [record(5)])
    assert plan(h, budget_tokens=200_000, context_tokens=10_000) is None, "3k tokens freed is not worth a rewrite"
    h = history_with([record(0), record(0, n=1), record(0, n=2)], [], [], [], [], [record(5)])
    batch = plan(h, budget_tokens=200_000, context_tokens=10_000)
    assert batch is not None and len(batch.stubs) == 3, "9k of 12k tokens freed pays for the rewrite"
    below_threshold = "y" * 7_600  # ~1.9k tokens: never elided itself, but its cache is rewritten too
    padded = history_with([record(0), record(0, n=1), record(0, n=2)],
                          *[[record(i, text=below_threshold, n=5)] for i in range(1, 31)])
    assert plan(padded, 200_000, 30_000) is None, "a small share of a long history waits for a bigger batch"
    assert plan(padded, 200_000, 150_000) is not None, "under pressure a smaller share is enough"


def test_stub_says_what_was_skipped_and_how_to_get_it_back() -> None:
    text = ("8 results for \"vti fees\":\n1. Vanguard VTI — vanguard.com\n   https://vanguard.com/vti\n   [s3] Expense 0.03%\n"
            "2. Schwab SCHB — schwab.com\n   https://schwab.com/schb\n   [s4] Expense 0.03%\n" + BIG)
    stub = stub_for(record(0, text=text, query="vti fees"))
    assert stub.startswith("[r_0001 | web_search \"vti fees\" | 2 results, 3.") and "k tokens" in stub
    assert "top sources: vanguard.com, schwab.com" in stub and "covers: Vanguard VTI; Schwab SCHB" in stub
    assert "cites [s3][s4]" in stub and stub.endswith("fetch_result('r_0001')]")


def test_stubs_are_byte_stable_once_written() -> None:
    old = record(0)
    h = history_with([old], [record(1)], [], [], [], [record(5, n=1)], [record(6, n=2)])
    h.elide({old: stub_for(old)})
    written = old.stub
    before = json.dumps(h.messages())
    h.elide({old: "something else"})
    assert old.stub == written and json.dumps(h.messages()) == before


def test_projection_reuses_unchanged_steps_and_rebuilds_only_elided_ones() -> None:
    old = record(0)
    h = history_with([old], [record(1)], [], [], [], [record(5, n=1)])
    first = h.messages()
    second = h.messages()
    assert all(a is b for a, b in zip(first[:-1], second[:-1])), "unchanged messages are the same objects"
    h.elide({old: stub_for(old)})
    third = h.messages()
    assert third[1] is first[1] and third[2] is not first[2], "only the elided step's user message is rebuilt"


# --- the loop with context management --------------------------------------------------

async def long_run(fake_model: FakeAnthropic, turns: int, context_tokens: int, policy=None,
                   max_requests: int = 1000) -> tuple[list[RunEvent], MemoryRequestLog, Any]:
    fake_model.policy = policy or LongRunPolicy(turns)
    events: list[RunEvent] = []
    log = MemoryRequestLog()

    async def emit(event: RunEvent) -> None:
        events.append(event)

    task = ResearchTask(question="Compare VTI, ITOT and SCHB fees", constraints=["Only sources after 2020"],
                        budget=Budget(max_requests=max_requests, wall_seconds=3600))
    config = AgentConfig(context_tokens=context_tokens)
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        outcome = await research(task, config, anthropic=client, emit=emit, tools=bulk_tools(),
                                 backend=RunBackend(request_log=log))
    return events, log, outcome


def first_text(request: dict) -> str:
    content = request["messages"][0]["content"]
    return content[0]["text"] if isinstance(content, list) else content


async def test_pinned_task_survives_three_compactions_word_for_word(fake_model: FakeAnthropic) -> None:
    events, log, outcome = await long_run(fake_model, turns=120, context_tokens=40_000)
    assert outcome.status == "completed", outcome.reason
    turns = [r for r in fake_model.requests if not is_summary_request(r)]
    opening = first_text(turns[0]).split("</context>")[0]
    summaries = [r for r in log.records if r.kind == "summary"]
    assert len(summaries) >= 3
    assert all(first_text(r).startswith(opening) for r in turns), "every request carries the task verbatim"
    assert "Only sources after 2020" in first_text(turns[-1])
    assert any(isinstance(e, Progress) and e.activity == "Compacting notes before continuing" for e in events)
    assert not fake_model.rejected, "no request broke the API's rules (tool_use always with its result)"
    assert max(r.context_tokens for r in log.records if r.kind == "turn") <= 40_000


async def test_summary_segments_never_overlap_and_summaries_are_not_resummarised(fake_model) -> None:
    _, log, _ = await long_run(fake_model, turns=120, context_tokens=40_000)
    last = [r for r in log.records if r.kind == "turn"][-1]
    segments = [tuple(map(int, re.findall(r"\d+", s))) for s in last.summaries]
    assert len(segments) >= 3
    for (a1, b1), (a2, b2) in zip(segments, segments[1:]):
        assert a1 <= b1 < a2 <= b2, segments
    for request in fake_model.requests:
        if is_summary_request(request):
            instruction = request["messages"][-1]["content"][-1]["text"]
            first = int(re.search(r"steps (\d+)–", instruction).group(1))
            done = [b for a, b in segments if b < first]
            assert not done or first == max(done) + 1, "a new summary starts where the last one ended"


async def test_elided_result_comes_back_whole_with_fetch_result(fake_model: FakeAnthropic) -> None:
    policy = LongRunPolicy(60)
    _, log, _ = await long_run(fake_model, turns=60, context_tokens=60_000, policy=policy)
    assert policy.fetched, "the run elided something and the policy asked for it back"
    answers = [b for r in fake_model.requests for m in r["messages"] if m["role"] == "user"
               for b in (m["content"] if isinstance(m["content"], list) else [])
               if b.get("type") == "tool_result" and "characters 0–2,000 of" in str(b.get("content"))]
    assert answers and "more follows" in answers[0]["content"]


async def test_failed_summaries_leave_the_context_as_it_was_and_stop_after_three(fake_model) -> None:
    policy = LongRunPolicy(80, summary=lambda request: text_reply("Sorry, I cannot summarise that."))
    _, log, outcome = await long_run(fake_model, turns=80, context_tokens=40_000, policy=policy)
    summaries = [r for r in log.records if r.kind == "summary"]
    assert len(summaries) == 3, "three failures in a row stop further attempts"
    turns = [r for r in log.records if r.kind == "turn"]
    assert all(not r.summaries for r in turns), "no summary was ever adopted"
    after_failure = [r for r in fake_model.requests if not is_summary_request(r)]
    assert all("<pinned_state>" not in first_text(r) for r in after_failure), "the context was left as it was"
    assert outcome.status == "completed", "the run finishes from what it has when the context fills up"


async def test_compaction_is_deferred_after_a_turn_cut_off_before_its_action(fake_model) -> None:
    inner = LongRunPolicy(80)
    cut: list[int] = []

    def policy(request: dict) -> Any:
        # The turn that pushes the context past 75% is cut off mid-thought (max_tokens).
        size = len(json.dumps(request["messages"])) // 4
        if not cut and not is_summary_request(request) and size > 0.64 * 40_000:  # messages only: the system prompt and tools are the rest
            cut.append(len(fake_model.requests))  # the fake has recorded this request: the next is at this index
            thought = "I should next read the ITOT fact sheet, which " + "lists the holdings and fees " * 300
            return text_reply(thought, stop_reason="max_tokens")
        return inner(request)

    _, log, _ = await long_run(fake_model, turns=80, context_tokens=40_000, policy=policy)
    kinds = [r.kind for r in log.records]
    cut_turn = next(i for i, r in enumerate(log.records) if r.stop_reason == "max_tokens")
    assert kinds[cut_turn + 1] == "turn", "no summary right after a turn cut off before its action"
    assert "cut off at the output limit" in json.dumps(fake_model.requests[cut[0]]["messages"][-1])
    assert "summary" in kinds[cut_turn + 2:], "the compaction happens once the action is taken"


async def test_every_request_keeps_within_four_cache_breakpoints_and_reads_the_cache(fake_model) -> None:
    _, log, _ = await long_run(fake_model, turns=60, context_tokens=40_000)
    turns = [r for r in log.records if r.kind == "turn"]
    cached = sum(r.cache_read_tokens for r in turns)
    total = sum(r.context_tokens for r in turns)
    assert not fake_model.rejected
    assert cached / total > 0.6, f"only {cached / total:.0%} of input tokens came from the cache"


async def test_without_management_the_same_run_sends_far_more_tokens(fake_model) -> None:
    _, managed, _ = await long_run(fake_model, turns=60, context_tokens=30_000)
    events: list[RunEvent] = []
    log = MemoryRequestLog()

    async def emit(event: RunEvent) -> None:
        events.append(event)

    fake_model.policy = LongRunPolicy(60)
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        await research(ResearchTask(question="Compare VTI, ITOT and SCHB fees"),
                       AgentConfig(context_tokens=10_000_000, manage_context=False),
                       anthropic=client, emit=emit, tools=bulk_tools(),
                                 backend=RunBackend(request_log=log))
    unmanaged_peak = max(r.context_tokens for r in log.records)
    managed_peak = max(r.context_tokens for r in managed.records if r.kind == "turn")
    assert managed_peak <= 30_000 < unmanaged_peak
    unmanaged_total = sum(r.context_tokens for r in log.records)
    managed_total = sum(r.context_tokens for r in managed.records)
    assert managed_total < 0.7 * unmanaged_total


async def test_a_summary_that_saves_too_little_is_not_adopted(fake_model) -> None:
    def bloated(request: dict) -> Any:
        padding = [{"claim": "restated " + "figure " * 400, "handle": "[s1]"} for _ in range(30)]
        return text_reply(json.dumps({"established_facts": padding, "current_state": "x", "next_action": "y"}))

    _, log, _ = await long_run(fake_model, turns=50, context_tokens=40_000, policy=LongRunPolicy(50, summary=bloated))
    assert [r for r in log.records if r.kind == "summary"], "compaction was attempted"
    assert all(not r.summaries for r in log.records if r.kind == "turn"), "but never adopted"
