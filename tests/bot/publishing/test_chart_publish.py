"""A drawn chart reaches the thread: the publisher uploads its PNG, the report links it from its
section with the table's sources under it, and a redraw replaces the file (old one deleted).

Real parts: the chart tool draws and stores its PNG in Redis (the run's result store), its
events go through the RunStore, and the publisher talks to the fake Slack with slack_sdk."""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from anthropic import AsyncAnthropic
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.web.async_client import AsyncWebClient

from agent import AgentConfig, SourceAdded, SourceRegistry
from agent.charts.blobs import load_png
from agent.model import ModelClient
from agent.tools.base import ToolContext
from agent.tools.chart import ChartInput, ChartTool
from agent.tools.report_tools import WriteSection, WriteSectionInput
from bot import keys
from bot.publishing.publisher import Publisher
from jobs import Run, RunState, RunStatus, RunStore
from jobs.records.continuation import create_successor, successor
from jobs.records.stores import RedisResultStore
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack

CHANNEL = "C0CHART"
THREAD = "1700000000.000100"


@pytest.fixture
async def client(fake_slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    yield AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")



class Run_:
    """A posted run whose tools write through the RunStore, as a worker's would."""

    def __init__(self, store: RunStore, state: RunState, ctx: ToolContext) -> None:
        self.store, self.state, self.ctx = store, state, ctx


@pytest.fixture
async def posted(redis: Redis, async_redis: AsyncRedis, client: AsyncWebClient,
                 fake_model: FakeAnthropic) -> AsyncIterator[Run_]:
    store = RunStore(redis)
    state = store.create(Run(channel=CHANNEL, thread_ts=THREAD, requester="U0ANA", question="Fees of VTI, ITOT, SCHB?"))
    progress = await client.chat_postMessage(channel=CHANNEL, thread_ts=THREAD, text="…")
    report = await client.chat_postMessage(channel=CHANNEL, thread_ts=THREAD, text="…")
    state = store.set_messages(state.run.id, progress=progress["ts"], report=report["ts"])
    holder: dict[str, RunState] = {"state": state}

    async def emit(event: Any) -> None:
        holder["state"] = await asyncio.to_thread(store.apply, holder["state"], event)

    async with httpx.AsyncClient() as http, AsyncAnthropic(api_key="k", base_url=fake_model.url) as anthropic:
        ctx = ToolContext(config=AgentConfig(), registry=SourceRegistry(), http=http,
                          model=ModelClient(anthropic, main_model="m", small_model="s", timeout=30),
                          emit=emit, goal_question="q", results=RedisResultStore(async_redis, state.run.id))
        for url, passage in (("https://investor.vanguard.com/vti", "Expense ratio 0.03% as of 04/29/2024."),
                             ("https://www.ishares.com/itot", "Net expense ratio 0.03%; gross 0.05%."),
                             ("https://www.schwab.com/schb", "SCHB expense ratio 0.03%, down from 0.04%.")):
            source, _ = ctx.registry.add(url, url.split("/")[2], passage)
            await emit(SourceAdded(source=source))
        await WriteSection().run(WriteSectionInput(title="Fees", body="VTI and ITOT charge 0.03% [s1][s2]."), ctx)
        run = Run_(store, holder["state"], ctx)
        yield run


def latest(run: Run_) -> RunState:
    return run.store.get(run.state.run.id)


def report_text(fake_slack: FakeSlack, state: RunState) -> str:
    message = fake_slack.message(CHANNEL, state.run.report_message or "")
    assert message is not None
    return str(message.blocks)


def chart(**changes: Any) -> ChartInput:
    args: dict[str, Any] = dict(
        section_id="sec1", title="Expense ratios, 2024", kind="bar", x_label="Fund", y_label="Expense ratio", unit="%",
        rows=[{"label": "VTI", "value": "0.03% [s1]"}, {"label": "ITOT", "value": "0.03% [s2]"},
              {"label": "SCHB", "value": "0.03% [s3]"}],
    )
    args.update(changes)
    return ChartInput(**args)


async def test_a_drawn_chart_is_uploaded_to_the_thread_and_linked_from_its_section(
        redis: Redis, async_redis: AsyncRedis, client: AsyncWebClient, fake_slack: FakeSlack, posted: Run_) -> None:
    result = await ChartTool().run(chart(), posted.ctx)
    assert not result.is_error, result.text
    state = latest(posted)
    assert [c.chart_id for c in state.charts] == ["chart1"], "run state lists the chart (not its bytes)"

    assert await Publisher(redis, async_redis, posted.store, client).sync(state)

    [upload] = fake_slack.files()
    png = await load_png(RedisResultStore(async_redis, state.run.id), state.charts[0].blob_id)
    assert upload.content == png and upload.content.startswith(b"\x89PNG")
    assert (upload.channel_id, upload.thread_ts) == (CHANNEL, THREAD), "in the run's thread"
    assert upload.title == "Expense ratios, 2024"
    shown = report_text(fake_slack, state)
    permalink = f"https://deepthread-test.slack.com/files/UBOT/{upload.id}/{upload.filename}"
    assert f"<{permalink}|📊 Expense ratios, 2024>" in shown, "the report links the chart's file"
    # Its sources under it: [1] and [2] are the section's footnotes; SCHB's page is cited only by the chart.
    assert "_Chart sources:_ [1] [2] <https://www.schwab.com/schb|schwab.com>" in shown
    assert await async_redis.hexists(keys.charts(state.run.team, CHANNEL, state.run.report_message or ""), f"{state.run.id}:chart1")

    assert await Publisher(redis, async_redis, posted.store, client).sync(latest(posted))
    assert len(fake_slack.calls_of("files.completeUploadExternal")) == 1, "an unchanged chart is not uploaded again"


async def test_a_redrawn_chart_replaces_its_file_and_the_old_one_is_deleted(
        redis: Redis, async_redis: AsyncRedis, client: AsyncWebClient, fake_slack: FakeSlack, posted: Run_) -> None:
    tool = ChartTool()
    publisher = Publisher(redis, async_redis, posted.store, client)
    await tool.run(chart(), posted.ctx)
    assert await publisher.sync(latest(posted))
    [old] = fake_slack.files()

    redrawn = await tool.run(chart(chart_id="chart1", kind="grouped_bar", rows=[
        {"label": "ITOT", "series": "net", "value": "0.03% [s2]"},
        {"label": "ITOT", "series": "gross", "value": "0.05% [s2]"}]), posted.ctx)
    assert not redrawn.is_error, redrawn.text
    state = latest(posted)
    assert await publisher.sync(state)

    [new] = fake_slack.files()
    assert new.id != old.id and new.filename.endswith("-chart1-v2.png")
    assert [c["file"] for c in fake_slack.calls_of("files.delete")] == [old.id], "one file per chart in the thread"
    shown = report_text(fake_slack, state)
    assert f"/{new.id}/" in shown and f"/{old.id}/" not in shown
    assert "_updated ×1_" in shown


async def test_a_chart_with_a_value_not_in_its_passage_is_refused_and_nothing_reaches_the_thread(
        redis: Redis, async_redis: AsyncRedis, client: AsyncWebClient, fake_slack: FakeSlack, posted: Run_) -> None:
    wrong = chart(rows=[{"label": "VTI", "value": "0.04% [s1]"}, {"label": "SCHB", "value": "0.03% [s3]"}])
    result = await ChartTool().run(wrong, posted.ctx)
    assert result.is_error and '[s1] says 0.03%' in result.text and "not 0.04%" in result.text

    state = latest(posted)
    assert state.charts == []
    assert await Publisher(redis, async_redis, posted.store, client).sync(state)
    assert fake_slack.files() == [] and "📊" not in report_text(fake_slack, state)


async def test_a_follow_up_run_keeps_linking_its_parents_chart_without_uploading_it_again(
        redis: Redis, async_redis: AsyncRedis, client: AsyncWebClient, fake_slack: FakeSlack, posted: Run_) -> None:
    """A continuation edits the same pinned report: the parent's chart stays under its section,
    linked to the same file, and a chart the follow-up draws is its own (chart1 of another run)."""
    await ChartTool().run(chart(), posted.ctx)
    publisher = Publisher(redis, async_redis, posted.store, client)
    parent = latest(posted)
    assert await publisher.sync(parent)
    [upload] = fake_slack.files()
    parent = posted.store.finish(parent.run.id, RunStatus.completed, "")

    child = create_successor(posted.store, parent, successor(posted.store, parent, "Add ITOT's history", "U0ANA"))
    assert [(c.chart_id, c.run_id) for c in child.charts] == [("chart1", parent.run.id)]
    assert await publisher.sync(child)
    permalink = f"https://deepthread-test.slack.com/files/UBOT/{upload.id}/{upload.filename}"
    assert f"<{permalink}|📊 Expense ratios, 2024>" in report_text(fake_slack, child), "the same file, still linked"
    assert len(fake_slack.calls_of("files.completeUploadExternal")) == 1, "not uploaded again"

    own = child.model_copy(update={"charts": [*child.charts, parent.charts[0].model_copy(update={"title": "History"})]})
    assert len({c.key(own.run.id) for c in own.charts}) == 2, "its own chart1 is not its parent's"
