"""Fault: the model service is overloaded (529) for a while, then back, or for longer than we wait.

Calls wait it out with jittered backoff; the run continues when the service returns; when
patience runs out, a run that has sections or sources still ends with an answer built from
them. The real `anthropic` SDK talks to the fake Messages API throughout; the process tests
run real `deepthread serve` and `deepthread worker` processes.
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic import APIStatusError, AsyncAnthropic
from hypothesis import given
from hypothesis import strategies as st

from agent import (
    AgentConfig,
    Budget,
    FetchConfig,
    Finished,
    ResearchTask,
    RunEvent,
    SearchConfig,
    research,
)
from agent.events import SectionWritten, SourceAdded
from agent.model import ModelClient, ModelUnavailable, Patience
from agent.report import Section
from agent.salvage import LEAD_CHARS, salvaged_summary
from tests.e2e.stack import CHANNEL, assert_cited_report_pinned, block_text, bot_replies, post_event
from tests.fakes.anthropic import FakeAnthropic, FakeAPIError, Reply
from tests.fakes.policies import ResearchPolicy, is_extraction
from tests.fakes.slack import FakeSlack, app_mention_event
from tests.processes import Stack, deepthread_stack, wait_for

QUICK = Patience(seconds=1.5, first_wait=0.1, max_wait=0.4)


class GoneAfterSection:
    """The research policy until a section is written; then the service answers `status` for good."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.inner = ResearchPolicy()
        self.gone = False

    def __call__(self, request: dict[str, Any]) -> Reply:
        if self.gone and not is_extraction(request):
            raise FakeAPIError(self.status)
        reply = self.inner(request)
        self.gone = self.gone or any(b.get("name") == "write_section" for b in reply.content)  # for good
        return reply


async def ask(fake: FakeAnthropic, config: AgentConfig, question: str = "expense ratio VTI SCHB ITOT"
              ) -> tuple[list[RunEvent], Any]:
    events: list[RunEvent] = []

    async def emit(event: RunEvent) -> None:
        events.append(event)

    async with AsyncAnthropic(api_key="test-key", base_url=fake.url) as client:
        outcome = await research(ResearchTask(question=question, budget=Budget()), config, anthropic=client, emit=emit)
    return events, outcome


def config_for(web_url: str, **extra: Any) -> AgentConfig:
    return AgentConfig(search=SearchConfig(provider="searxng", searxng_url=web_url),
                       fetch=FetchConfig(allow=["127.0.0.1"]), **extra)


# --- the backoff itself --------------------------------------------------------------------

@given(attempt=st.integers(0, 60), rand=st.floats(0, 1), retry_after=st.none() | st.floats(0, 1e6),
       first=st.floats(0.01, 10), largest=st.floats(0.01, 60))
def test_every_wait_is_jittered_within_its_bounds_and_never_past_the_largest(
        attempt: int, rand: float, retry_after: float | None, first: float, largest: float) -> None:
    patience = Patience(seconds=600, first_wait=first, max_wait=largest)
    ceiling = min(largest, first * 2 ** attempt)
    wait = patience.wait(attempt, retry_after, rand=lambda: rand)
    assert ceiling / 2 <= wait <= largest
    if retry_after is not None:
        assert wait >= min(retry_after, largest), "the service's Retry-After is honoured, up to the largest wait"


def test_two_clients_overloaded_together_do_not_retry_in_lockstep() -> None:
    patience = Patience()
    waits = {round(patience.wait(3), 6) for _ in range(50)}
    assert len(waits) > 40, "jitter spreads the retries of runs that failed at the same moment"


async def test_an_outage_from_the_first_request_lasts_its_time_however_late_the_request_comes(
        fake_model: FakeAnthropic) -> None:
    fake_model.policy = lambda _request: "back"
    fake_model.fail_for(0.4, from_first_request=True)
    await asyncio.sleep(0.6)  # a loaded machine reaching the model late: the outage has not begun
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url, max_retries=0) as client:
        with pytest.raises(APIStatusError):
            await client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        await asyncio.sleep(0.5)
        answer = await client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert answer.content[0].text == "back"  # type: ignore[union-attr]
    assert fake_model.served_failures == [529], "one answer inside the outage, then the service is back"


async def test_an_overload_shorter_than_the_patience_is_waited_out(fake_model: FakeAnthropic) -> None:
    fake_model.policy = lambda _request: "back"
    fake_model.fail_for(0.6)
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url, max_retries=0) as client:
        model = ModelClient(client, main_model="m", small_model="s", timeout=10, patience=QUICK)
        message = await model.turn(system="s", tools=[], messages=[{"role": "user", "content": "hi"}], max_tokens=50)
    assert message.content[0].text == "back"  # type: ignore[union-attr]
    assert fake_model.served_failures and set(fake_model.served_failures) == {529}
    assert model.usage.requests == 1, "failed attempts are not counted as model requests"


async def test_an_overload_longer_than_the_patience_gives_up_saying_so(fake_model: FakeAnthropic) -> None:
    fake_model.fail_always(529)
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url, max_retries=0) as client:
        model = ModelClient(client, main_model="m", small_model="s", timeout=10, patience=QUICK)
        with pytest.raises(ModelUnavailable, match="overloaded for longer than we wait"):
            await model.small(system="s", prompt="p", max_tokens=50)
    assert len(fake_model.served_failures) >= 3, "it tried several times before giving up"


async def test_an_overload_announced_mid_stream_is_retried_too(fake_model: FakeAnthropic) -> None:
    fake_model.policy = lambda _request: "after the hiccup"
    fake_model.fail_next_stream(times=2)
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url, max_retries=0) as client:
        model = ModelClient(client, main_model="m", small_model="s", timeout=10, patience=QUICK)
        message = await model.turn(system="s", tools=[], messages=[{"role": "user", "content": "hi"}], max_tokens=50)
    assert message.content[0].text == "after the hiccup"  # type: ignore[union-attr]


async def test_a_request_the_service_refuses_is_not_retried_as_an_overload(fake_model: FakeAnthropic) -> None:
    fake_model.fail_always(400, message="messages: roles must alternate")
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url, max_retries=0) as client:
        model = ModelClient(client, main_model="m", small_model="s", timeout=10, patience=QUICK)
        with pytest.raises(ModelUnavailable, match="refused a request as invalid"):
            await model.small(system="s", prompt="p", max_tokens=50)
    assert fake_model.served_failures == [400]


# --- the answer built without the model ----------------------------------------------------

WORDS = st.text(alphabet="abcdefghij 0.%", min_size=1, max_size=40)
SENTENCE = st.builds(lambda words, n, end: f"{words.strip() or 'x'} [s{n}]{end}", WORDS, st.integers(1, 300),
                     st.sampled_from([".", "!", "?", "", ";"]))


@given(bodies=st.lists(st.lists(SENTENCE, min_size=1, max_size=12).map(" ".join), min_size=1, max_size=5))
def test_a_summary_built_from_sections_cites_only_whole_markers_those_sections_cite(bodies: list[str]) -> None:
    sections = [Section(section_id=f"sec{i}", title=f"Part {i}", body=body) for i, body in enumerate(bodies, 1)]
    summary = salvaged_summary("HTTP 529", sections, [])
    cited = set(re.findall(r"\[s\d+\]", " ".join(bodies)))
    assert set(re.findall(r"\[s\d+\]", summary)) <= cited
    assert summary.count("[") == len(re.findall(r"\[s\d+\]", summary)), "no marker cut in half"
    for i, body in enumerate(bodies, 1):
        line = next(l for l in summary.splitlines() if l.startswith(f"- **Part {i}**: "))
        assert len(line) <= len(f"- **Part {i}**: ") + LEAD_CHARS + 2, "a lead, not the whole section"


# --- the run, in process -------------------------------------------------------------------

async def test_research_continues_once_the_overloaded_service_returns(fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.fail_for(2.0)
    events, outcome = await ask(fake_model, config_for(fake_web.url, model_max_retries=0))
    assert outcome.status == "completed" and not outcome.reason, outcome.reason
    assert 529 in fake_model.served_failures
    assert any(isinstance(e, SectionWritten) for e in events), "the research went on to write its section"


async def test_a_model_lost_after_a_section_still_gives_an_answer_built_from_it(
        fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.policy = GoneAfterSection(500)
    events, outcome = await ask(fake_model, config_for(fake_web.url, model_max_retries=0))

    section = next(e for e in events if isinstance(e, SectionWritten))
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.status == "completed", "not failed: it has a section"
    assert "model service became unavailable" in finished.summary
    assert f"**{section.title}**" in finished.summary
    markers = set(re.findall(r"\[(s\d+)\]", finished.summary))
    known = {e.source.marker for e in events if isinstance(e, SourceAdded)}
    assert markers and markers <= known, "the summary's citations resolve to footnotes"
    assert "without the model" in outcome.reason


async def test_a_model_lost_before_any_section_lists_the_sources_it_found(fake_model: FakeAnthropic, fake_web) -> None:
    searched: list[bool] = []

    def search_then_gone(request: dict[str, Any]) -> Reply:
        if searched:
            raise FakeAPIError(500)
        searched.append(True)
        return ResearchPolicy()(request)

    fake_model.policy = search_then_gone
    _, outcome = await ask(fake_model, config_for(fake_web.url, model_max_retries=0))
    assert outcome.status == "completed"
    assert "before any section was written" in outcome.summary and "[s1]" in outcome.summary


async def test_a_model_lost_with_nothing_gathered_fails_and_says_why(fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.fail_always(500)
    _, outcome = await ask(fake_model, config_for(fake_web.url, model_max_retries=0))
    assert outcome.status == "failed" and outcome.summary == ""
    assert "HTTP 500" in outcome.reason


# --- real processes ------------------------------------------------------------------------

@pytest.fixture
def stack_env() -> dict[str, str]:
    return {}


@pytest.fixture
def stack(tmp_path: Path, redis_url: str, fake_slack, fake_model, fake_web, stack_env) -> Iterator[Stack]:
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url, **stack_env) as s:
        yield s


def test_a_minute_of_overload_in_miniature_costs_the_run_time_not_its_answer(
        stack: Stack, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    # Longer than the SDK's own two retries take, from the run's first request: ours must wait it out.
    fake_model.fail_for(5.0, from_first_request=True)
    envelope = app_mention_event("expense ratio VTI SCHB ITOT", channel=CHANNEL)
    mention_ts = fake_slack.seed_event(envelope)
    post_event(stack, envelope)

    assert_cited_report_pinned(fake_slack, mention_ts, fake_web.url, timeout=60)
    assert fake_model.served_failures.count(529) >= 2
    assert "model service overloaded" in (stack.logs / "worker.log").read_text()




@pytest.mark.parametrize("stack_env", [{"DEEPTHREAD_MODEL_PATIENCE_SECONDS": "3"}])
def test_patience_running_out_after_a_section_ends_the_run_with_an_answer(
        stack: Stack, fake_slack: FakeSlack, fake_model: FakeAnthropic, fake_web) -> None:
    fake_model.policy = GoneAfterSection(529)
    envelope = app_mention_event("expense ratio VTI SCHB ITOT", channel=CHANNEL)
    mention_ts = fake_slack.seed_event(envelope)
    post_event(stack, envelope)

    replies = wait_for(lambda: len(bot_replies(fake_slack, mention_ts)) >= 2 and bot_replies(fake_slack, mention_ts),
                       10, "progress and report replies")
    progress, report = replies[0], replies[1]
    wait_for(lambda: "Final" in block_text(fake_slack.message(CHANNEL, report.ts)), 25, "the final report")
    text = block_text(fake_slack.message(CHANNEL, report.ts))
    assert "model service became unavailable" in text and "*Findings*" in text
    assert re.search(r"\|\[1\]>", text), "the summary's citations are footnotes"
    done = block_text(fake_slack.message(CHANNEL, progress.ts))
    assert "Done" in done and "overloaded" in done, "the progress line says why the answer was assembled"
