"""Each cited excerpt keeps its evidence: the text around it and a hash of the page it came from."""
from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from anthropic import AsyncAnthropic

from agent import AgentConfig, FetchConfig, SourceRegistry
from agent.model import ModelClient
from agent.tools.base import ToolContext
from agent.tools.read_page import ReadPage, ReadPageInput
from tests.helpers import seen
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import extract
from tests.fakes.web import FakeWeb, Page

PAGE = ("<html><head><title>Fund facts</title></head><body><article>"
        "<p>Vanguard publishes a fact sheet every quarter for its largest funds and their share classes.</p>"
        "<p>The fund's expense ratio is 0.03% as of March 2026, unchanged from a year earlier.</p>"
        "<p>Assets under management reached $1.9 trillion at the end of the quarter, a new high.</p>"
        "</article></body></html>")


@pytest.fixture
async def ctx(fake_model: FakeAnthropic) -> AsyncIterator[ToolContext]:
    fake_model.policy = extract

    async def emit(_: object) -> None:
        return None

    async with httpx.AsyncClient() as http, AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        yield ToolContext(config=AgentConfig(fetch=FetchConfig(allow=["127.0.0.1"])), registry=SourceRegistry(),
                          http=http, model=ModelClient(client, main_model="m", small_model="s", timeout=30),
                          emit=emit, goal_question="q")


async def test_an_excerpt_keeps_its_surrounding_text_fetch_time_and_page_hash(
        ctx: ToolContext, fake_web: FakeWeb) -> None:
    fake_web.add_page("/facts", Page(PAGE))
    await ReadPage().run(ReadPageInput(url=seen(ctx, f"{fake_web.url}/facts"), goal="fund expense ratio as of March 2026"), ctx)
    [source] = [s for s in ctx.registry.all() if "expense ratio" in s.passage]
    assert source.kind == "excerpt" and source.retrieved_at is not None
    assert source.passage in source.context and len(source.context) > len(source.passage)
    assert "fact sheet every quarter" in source.context, "text before the passage is kept"
    assert len(source.page_sha256) == 64 and int(source.page_sha256, 16) >= 0  # sha256 of the page text


def test_a_malformed_source_url_is_shown_as_written_not_a_crash() -> None:
    from agent.report import domain_of

    assert domain_of("https://[x") == "https://[x"
    assert domain_of("https://www.example.org/a") == "example.org"
