"""The thread's files through the fake Slack, when Slack will not give one: the model is told what to
do, the people in the thread are told in their words (`for_people`), and Slack is asked about a
refused file once however often the run tries it. Real slack_sdk client and httpx, fake Slack over HTTP."""
from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from slack_sdk.web.async_client import AsyncWebClient

from agent import FileUnavailable
from bot.slack.workspace import SlackWorkspace
from tests.fakes.slack import FakeSlack
from tests.fakes.slack_files import delete_file, require_sign_in, share_file

CHANNEL = "C0TEST"
NAME = "board-minutes-q3.docx"


@pytest.fixture
async def thread(fake_slack: FakeSlack) -> AsyncIterator[tuple[FakeSlack, AsyncWebClient, str, httpx.AsyncClient]]:
    client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    thread_ts = fake_slack.add_user_message(CHANNEL, "<@UBOT> what did the board decide?", "UANA")
    async with httpx.AsyncClient() as http:
        yield fake_slack, client, thread_ts, http


async def refusal(workspace: SlackWorkspace, file_id: str, **download: int) -> FileUnavailable:
    with pytest.raises(FileUnavailable) as refused:
        await workspace.download(file_id, **download)
    return refused.value


async def test_a_file_slack_refuses_is_listed_and_asked_about_once_however_often_it_is_read(thread) -> None:
    fake, client, thread_ts, http = thread
    file_id = share_file(fake, CHANNEL, thread_ts, NAME, b"minutes", not_member=True)
    workspace = SlackWorkspace(client, CHANNEL, thread_ts, http=http)
    assert [f.name for f in await workspace.files()] == [NAME], "the model can still name it"
    for _ in range(9):
        refused = await refusal(workspace, file_id)
        assert "does not exist or the bot cannot see it (file_not_found)" in str(refused)
    assert [c["file"] for c in fake.calls_of("files.info")] == [file_id], "asked once, the refusal remembered"


async def test_a_thin_file_object_slack_refuses_does_not_break_the_listing(thread) -> None:
    fake, client, thread_ts, http = thread
    readable = share_file(fake, CHANNEL, thread_ts, "fees.csv", b"Fund,Fee\nVTI,0.03%\n")
    hidden = share_file(fake, CHANNEL, thread_ts, NAME, b"minutes", not_member=True, thin=True)
    workspace = SlackWorkspace(client, CHANNEL, thread_ts, http=http)
    for _ in range(3):  # every turn looks for new files
        assert [f.id for f in await workspace.files()] == [readable, hidden]
        await refusal(workspace, hidden)
    assert [c["file"] for c in fake.calls_of("files.info")] == [hidden], "asked once, for the listing"


@pytest.mark.parametrize("case", ["not_member", "deleted", "missing_scope", "external", "sign_in", "too_large"])
async def test_each_refusal_a_person_can_fix_is_said_in_words_they_can_act_on(thread, case: str) -> None:
    fake, client, thread_ts, http = thread
    file_id = share_file(fake, CHANNEL, thread_ts, NAME, b"minutes" * 100, not_member=case == "not_member",
                         external=case == "external")
    workspace = SlackWorkspace(client, CHANNEL, thread_ts, http=http)
    await workspace.files()
    if case == "deleted":
        delete_file(fake, file_id)
    if case == "missing_scope":
        fake.scopes.discard("files:read")
    if case == "sign_in":
        require_sign_in(fake)
    refused = await refusal(workspace, file_id, **({"max_bytes": 100} if case == "too_large" else {}))
    said = refused.for_people
    assert said.startswith(f"I can't open {NAME}: "), said
    expected = {
        "not_member": "it was deleted, or shared where I'm not a member. Share it again in this thread.",
        "deleted": "it was deleted, or shared where I'm not a member. Share it again in this thread.",
        "missing_scope": "my Slack app lacks the files:read permission. A workspace admin can reinstall",
        "external": "it is a link to a file outside Slack, or a Slack post. Upload the file itself",
        "sign_in": "Slack won't let my app download files. A workspace admin can check",
        "too_large": "over my 0 MB limit. Share a smaller export",
    }[case]
    assert expected in said, said
