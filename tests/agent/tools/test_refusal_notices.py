"""Every kind of file refusal reaches the thread once, in words a person can act on: listed by the
opening, read twice and searched, one notice per file, whether or not the model ever reads it.
Real slack_sdk client and httpx against the fake Slack; the real converter child for the sandbox."""
from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from anthropic import AsyncAnthropic
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from agent import AgentConfig, ResearchTask, SourceRegistry
from agent.model import ModelClient
from agent.opening import with_markers
from agent.tools.base import ToolContext
from agent.tools.file_library import FileLibrary
from agent.tools.find_in_files import FindInFiles, FindInFilesInput
from agent.tools.links import LinkTable
from agent.tools.read_file import ReadFile, ReadFileInput
from bot.slack.workspace import SlackWorkspace, _refusal
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.file_reader import ThreadPolicy
from tests.fakes.hostile_files import docx_malformed_xml
from tests.fakes.slack import FakeSlack
from tests.fakes.slack_files import delete_file, require_sign_in, share_file

CHANNEL = "C0TEST"
BIG = 21 * 1024 * 1024  # over MAX_FILE_BYTES
# What each kind asks a person to do: a refusal that reaches the thread without one is a dead end.
KINDS = {
    "not_found_on_listing": "Share it again in this thread",
    "not_member": "Share it again in this thread",
    "deleted": "Share it again in this thread",
    "missing_scope": "A workspace admin can reinstall Deepthread",
    "too_large": "Share a smaller export",
    "sign_in": "A workspace admin can check",
    "sandbox": "paste the relevant part into this thread",
}


@pytest.fixture
async def model(fake_model: FakeAnthropic) -> AsyncIterator[ModelClient]:
    fake_model.policy = ThreadPolicy()
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        yield ModelClient(client, main_model="m", small_model="s", timeout=30)


@pytest.mark.parametrize("kind", sorted(KINDS))
async def test_every_refusal_kind_reaches_the_thread_once_in_words_a_person_can_act_on(
        kind: str, model: ModelClient, fake_slack: FakeSlack) -> None:
    fake = fake_slack
    thread_ts = fake.add_user_message(CHANNEL, "<@UBOT> what did the board decide?", "UANA")
    name, content = ("malformed.docx", docx_malformed_xml()) if kind == "sandbox" else ("minutes.docx", b"minutes")
    if kind == "too_large":
        content = b"x" * BIG
    file_id = share_file(fake, CHANNEL, thread_ts, name, content, not_member=kind in ("not_member", "not_found_on_listing"),
                         thin=kind == "not_found_on_listing")
    events: list[object] = []

    async def emit(event: object) -> None:
        events.append(event)

    async with httpx.AsyncClient() as http:
        client = AsyncWebClient(token="xoxb-test", base_url=f"{fake.url}/api/")
        workspace = SlackWorkspace(client, CHANNEL, thread_ts, http=http)
        ctx = ToolContext(config=AgentConfig(), registry=SourceRegistry(), http=http, model=model, emit=emit,
                          goal_question="q", workspace=workspace)
        await with_markers(ResearchTask(question="q"), workspace, LinkTable(), emit)
        if kind == "deleted":
            delete_file(fake, file_id)
            workspace._infos.clear()  # noqa: SLF001 - a later turn lists the thread again
        if kind == "missing_scope":
            fake.scopes.discard("files:read")
        if kind == "sign_in":
            require_sign_in(fake)
        library = FileLibrary()
        for goal in ("what the board decided", "the budget vote"):
            result = await ReadFile(library).run(ReadFileInput(file=file_id, goal=goal), ctx)
            assert result.is_error, result.text
        await FindInFiles(library).run(FindInFilesInput(query="board decision"), ctx)

    notices = {e.notice for e in events if getattr(e, "type", "") == "file_unreadable"}
    assert len(notices) == 1, f"one notice for the file, however often it is met: {notices}"
    (said,) = notices
    assert said.startswith("I can't open ") and KINDS[kind] in said, said


@pytest.mark.parametrize("error", ["file_not_found", "file_deleted", "not_in_channel", "channel_not_found",
                                   "missing_scope"])
def test_every_slack_refusal_of_a_file_says_what_a_person_can_do(error: str) -> None:
    response = {"ok": False, "error": error, "needed": "files:read"}  # the body slack_sdk's error carries
    refusal = _refusal(SlackApiError(error, response), "file F1", "minutes.docx")
    said = getattr(refusal, "for_people", "")
    assert said.startswith("I can't open minutes.docx: ") and ("this thread" in said or "admin" in said), said


async def test_a_research_past_its_conversion_time_gets_a_tool_error_saying_what_to_do_not_a_file_refusal(
        model: ModelClient) -> None:
    """Past RUN_CONVERT_SECONDS, read_file refuses with what to do instead; the file is not marked
    unreadable (a later run, with its own budget, reads it) and the thread is not told."""
    from agent.converter.fair_queue import RUN_OF_CONVERSION, ConversionAccount
    from agent.results import MemoryFileRefusals
    from agent.workspace import FileInfo, MemoryWorkspace

    csv = b"Fund,Fee\nVTI,0.03%\n"
    workspace = MemoryWorkspace([(FileInfo(id="F1", name="fees.csv", mimetype="text/csv", size=len(csv)), csv)])
    refusals, events = MemoryFileRefusals(), []

    async def emit(event: object) -> None:
        events.append(event)

    async with httpx.AsyncClient() as http:
        ctx = ToolContext(config=AgentConfig(), registry=SourceRegistry(), http=http, model=model, emit=emit,
                          goal_question="q", workspace=workspace, refusals=refusals)
        RUN_OF_CONVERSION.set(ConversionAccount("spent", spent=10_000.0))
        spent = await ReadFile(FileLibrary()).run(ReadFileInput(file="F1", goal="fees"), ctx)
        assert spent.is_error and "spent its 120 s of document conversion" in spent.text
        assert "find_in_files" in spent.text and "paste" in spent.text, spent.text
        assert not refusals._reasons and not events, "about the run, not the file: not remembered, not told"  # noqa: SLF001
        RUN_OF_CONVERSION.set(ConversionAccount("fresh"))
        fresh = await ReadFile(FileLibrary()).run(ReadFileInput(file="F1", goal="fees"), ctx)
        assert not fresh.is_error, fresh.text
