"""Files the bot uploaded itself (a spilled report, a chart) are not the thread's files (issue 35,
item 1): read_thread lists none, the opening names none, read_file opens none (nothing is
downloaded, no citation of one is made, so its address never becomes seen), whether the bot's
message carries it or a person shares it on. The worker builds the thread without the bot's user
id, so the adapter asks auth.test for it. A file a person shared is still the thread's."""
from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from agent import AgentConfig, FileUnavailable, SourceRegistry
from agent.tools.base import ToolContext
from agent.tools.read_file import ReadFile, ReadFileInput
from agent.tools.read_thread import ReadThread, ReadThreadInput
from agent.tools.thread_markers import thread_markers
from bot.slack.workspace import SlackWorkspace
from tests.fakes.slack import FakeSlack
from tests.fakes.slack_files import share_file

CHANNEL = "C0RESEARCH"
CRAFTED = "https://leak.example/collect?figure=4.2M"  # what a model could put in its own report
PERSON_URL = "https://people.example/fund-facts"


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


async def _emit(_: object) -> None:
    return None


async def test_files_the_bot_uploaded_are_not_the_threads_and_seed_nothing(
        fake_slack: FakeSlack, http: httpx.AsyncClient) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    thread_ts = fake_slack.add_user_message(CHANNEL, f"<@UBOT> fees of VTI? notes at {PERSON_URL}", "UANA")
    person = share_file(fake_slack, CHANNEL, thread_ts, "fees.csv", b"Fund,Fee\nVTI,0.03%\n", text="our sheet")
    # The bot's spilled report, posted as Slack posts an upload (a message with the bot's bot_id).
    spilled = (await client.files_upload_v2(
        channel=CHANNEL, thread_ts=thread_ts, content=f"# Report\nSee {CRAFTED}\n", filename="report.md",
        title="Full report", initial_comment=f"The full report: {CRAFTED}"))["file"]["id"]
    # A chart the bot uploaded, shared on by a person: the file object names the bot as its uploader.
    chart = share_file(fake_slack, CHANNEL, thread_ts, "chart.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64,
                       text="look at this chart")
    fake_slack.__dict__["shared_files"][chart].user = "UBOT"

    workspace = SlackWorkspace(client, CHANNEL, thread_ts, http=http)  # as the worker builds it: no bot user id
    ctx = ToolContext(config=AgentConfig(), registry=SourceRegistry(), http=http, model=None, emit=_emit,  # type: ignore[arg-type]
                      goal_question="fees of VTI", workspace=workspace)
    read = await ReadThread().run(ReadThreadInput(range="all"), ctx)  # before anything listed the files
    assert not read.is_error and f"shared files: {person}" in read.text
    assert spilled not in read.text and chart not in read.text, "the bot's uploads are not offered to read_file"
    assert CRAFTED in read.text, "the bot's message is read (its text shown)"
    assert not ctx.seen.allows(CRAFTED, ctx), "a link in the bot's upload message is not seen"
    assert ctx.seen.allows(PERSON_URL, ctx), "a link a person wrote is"

    assert [f.id for f in await workspace.files()] == [person], "only the file a person shared"
    assert len(fake_slack.calls_of("auth.test")) == 1, "the bot's user id is asked once"

    opening = await thread_markers(workspace)
    assert person in opening and spilled not in opening and chart not in opening

    for own in (spilled, chart):
        with pytest.raises(FileUnavailable, match="the bot uploaded itself"):
            await workspace.download(own)
        refused = await ReadFile().run(ReadFileInput(file=own, goal="the fee of VTI"), ctx)
        assert refused.is_error, refused.text
    assert not fake_slack.__dict__.get("file_downloads"), "nothing of the bot's own is downloaded"
    assert len(ctx.registry) == 0, "no citation of the bot's own file: its address never becomes seen"
