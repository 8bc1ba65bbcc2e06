"""Anthropic's own web search as the `anthropic` provider: one small-model request carrying the
`web_search_20260209` server tool, answered by the fake in the wire format (`server_tool_use`,
`web_search_tool_result`, citations, error codes), normalised into cited results, charged to the
run's ledger."""
from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from anthropic import AsyncAnthropic

from agent import AgentConfig, RunEvent, SearchConfig, SourceRegistry, cost_usd
from agent.budget import Ledger
from agent.config import Budget
from agent.model import ModelClient
from agent.tools.base import ToolContext
from agent.tools.search.anthropic import ERRORS
from agent.tools.web_search import WebSearch, WebSearchInput
from agent.usage import Usage
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.web import FakeWeb

SMALL = "claude-haiku-5-5"


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


async def searched(fake_model: FakeAnthropic, http: httpx.AsyncClient, config: SearchConfig, *,
                   small: str = SMALL, provider: str = "anthropic", query: str = "VTI expense ratio"):
    ledger = Ledger.start(Budget(), lambda: 0.0)

    async def emit(event: RunEvent) -> None:
        pass

    def charge(message, is_turn: bool) -> None:
        ledger.charge(message.model, Usage.of(message), count_request=is_turn)

    async with AsyncAnthropic(api_key="k", base_url=fake_model.url, max_retries=0) as client:
        model = ModelClient(client, main_model="claude-sonnet-5-5", small_model=small, timeout=30,
                            on_usage=charge, provider=provider)  # type: ignore[arg-type]
        ctx = ToolContext(config=AgentConfig(search=config), registry=SourceRegistry(), http=http, model=model,
                          emit=emit, goal_question="", ledger=ledger)
        result = await WebSearch().run(WebSearchInput(query=query), ctx)
    return result, ctx, ledger


async def test_one_small_model_request_searches_and_its_results_become_cited_hits(
        fake_model: FakeAnthropic, http: httpx.AsyncClient) -> None:
    result, ctx, ledger = await searched(fake_model, http, SearchConfig(provider="anthropic"))

    assert not result.is_error, result.text
    (request,) = fake_model.requests
    assert request["model"] == SMALL
    assert request["tools"] == [{"type": "web_search_20260209", "name": "web_search", "max_uses": 1}]
    assert fake_model.searches == ["VTI expense ratio"]
    assert result.text.startswith('3 results for "VTI expense ratio" from Anthropic web search:')
    first = ctx.registry.get("s1")
    # The snippet is what the model quoted, with the API's citation; the page age comes through.
    assert first is not None and first.url == "https://example.org/vti-expense-ratio"
    assert first.passage == "example.org reports on VTI expense ratio: the figure for 2026 is 1.1%."
    assert f"[s1] {first.passage}" in result.text and "March 3, 2026" in result.text
    assert "2 days ago" in result.text  # a relative page age is kept as the API wrote it
    assert "enc1" not in result.text  # the encrypted content is left alone


async def test_the_search_and_its_tokens_are_charged_to_the_run(fake_model: FakeAnthropic,
                                                                 http: httpx.AsyncClient) -> None:
    _, _, ledger = await searched(fake_model, http, SearchConfig(provider="anthropic"))
    (response,) = fake_model.responses
    assert response["usage"]["server_tool_use"]["web_search_requests"] == 1
    tokens_only = cost_usd(SMALL, Usage(input_tokens=response["usage"]["input_tokens"],
                                        output_tokens=response["usage"]["output_tokens"]))
    assert ledger.cost_usd == pytest.approx(tokens_only + 0.01)  # $10 per 1,000 searches
    assert ledger.requests == 0  # a tool's model call, not a research step


@pytest.mark.parametrize("code", sorted(ERRORS))
async def test_each_search_error_code_gets_its_own_advice_and_the_chain_moves_on(
        code: str, fake_model: FakeAnthropic, fake_web: FakeWeb, http: httpx.AsyncClient) -> None:
    kind, advice = ERRORS[code]
    fake_model.fail_next_search(code)
    alone, ctx, _ = await searched(fake_model, http, SearchConfig(provider="anthropic"))
    assert alone.is_error and advice in alone.text and len(ctx.registry) == 0
    if kind == "rate_limited":
        assert "Do not rephrase the query" in alone.text

    fake_model.fail_next_search(code)
    chain = SearchConfig(providers=["anthropic", "searxng"], searxng_url=fake_web.url)  # type: ignore[attr-defined]
    handed, _, _ = await searched(fake_model, http, chain, query="ITOT SCHB")
    assert not handed.is_error and "from SearXNG" in handed.text and advice in handed.text


async def test_domain_filters_reach_the_server_tool(fake_model: FakeAnthropic, http: httpx.AsyncClient) -> None:
    config = SearchConfig(provider="anthropic", anthropic_allowed_domains=["example.org"])
    result, ctx, _ = await searched(fake_model, http, config)
    assert fake_model.requests[0]["tools"][0]["allowed_domains"] == ["example.org"]
    assert [s.url for s in ctx.registry.all()] == ["https://example.org/vti-expense-ratio"]


@pytest.mark.parametrize(("small", "provider"), [("claude-haiku-5-5", "bedrock"), ("my-local-model", "anthropic")])
async def test_a_model_without_the_server_tool_is_a_configuration_failure(
        small: str, provider: str, fake_model: FakeAnthropic, http: httpx.AsyncClient) -> None:
    result, _, _ = await searched(fake_model, http, SearchConfig(provider="anthropic"), small=small, provider=provider)
    assert result.is_error and f"the small model {small} cannot run Anthropic's web search" in result.text
    assert fake_model.requests == []  # nothing was sent


async def test_a_rate_limited_api_answers_the_tool_instead_of_failing_the_run(
        fake_model: FakeAnthropic, http: httpx.AsyncClient) -> None:
    # A 429 that says the organization's spend limit is reached is not waited out (agent/capacity.py):
    # the tool answers with what went wrong, and the run goes on.
    fake_model.fail_next(429, times=5, message="You have reached your specified API usage spend limit.")
    result, _, _ = await searched(fake_model, http, SearchConfig(provider="anthropic"))
    assert result.is_error and "Anthropic's web search could not be used" in result.text
