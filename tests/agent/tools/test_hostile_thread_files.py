"""Hostile files shared in a thread, through read_file and find_in_files: each one's failure is
that file's result (never the batch's), and a refusal is remembered per file version, so no call
(nor a later run) downloads and parses it again."""
from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from anthropic import AsyncAnthropic

from agent import AgentConfig, SourceRegistry
from agent.model import ModelClient
from agent.results import MemoryFileRefusals
from agent.tools.base import ToolContext
from agent.tools.file_library import FileLibrary
from agent.tools.find_in_files import FindInFiles, FindInFilesInput
from agent.tools.read_file import ReadFile, ReadFileInput
from agent.workspace import FileInfo, MemoryWorkspace
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.file_reader import ThreadPolicy
from tests.fakes.hostile_files import HOSTILE

FEES = b"Fund,Expense ratio,As of\nVTI,0.03%,2024-06-30\nSCHB,0.03%,2024-03-31\n"


@pytest.fixture
async def model(fake_model: FakeAnthropic) -> AsyncIterator[ModelClient]:
    fake_model.policy = ThreadPolicy()
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        yield ModelClient(client, main_model="m", small_model="s", timeout=30)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def _thread() -> MemoryWorkspace:
    files = [(FileInfo(id=f"F{n}", name=spec.name, size=len(data), version="1"), data)
             for n, spec in enumerate(HOSTILE, start=1) for data in [spec.build()]]
    files.append((FileInfo(id="F99", name="fees.csv", size=len(FEES), version="1"), FEES))
    return MemoryWorkspace(files)


def _context(model: ModelClient, http: httpx.AsyncClient, workspace: MemoryWorkspace,
             refusals: MemoryFileRefusals) -> ToolContext:
    async def emit(_: object) -> None:
        return None

    return ToolContext(config=AgentConfig(), registry=SourceRegistry(), http=http, model=model, emit=emit,
                       goal_question="q", workspace=workspace, refusals=refusals)


async def test_find_in_files_searches_what_it_can_and_names_each_refused_file_with_why(model, http) -> None:
    workspace, refusals = _thread(), MemoryFileRefusals()
    ctx = _context(model, http, workspace, refusals)
    result = await FindInFiles(FileLibrary()).run(FindInFilesInput(query="SCHB expense ratio"), ctx)
    assert not result.is_error, result.text
    assert "F99 · fees.csv" in result.text, "the readable file is searched"
    skipped = result.text.split("Not searched: ", 1)[1]
    for spec in HOSTILE:
        if spec.name != "wide.csv":  # read within its column cap, with a note
            assert spec.name in skipped and spec.expect in skipped.split(spec.name, 1)[1].split("; ")[0], spec.name
    downloaded = list(workspace.downloads)

    again = await FindInFiles(FileLibrary()).run(FindInFilesInput(query="SCHB"), ctx)  # a later run, same thread
    assert "Not searched" in again.text
    refused = {f"F{n}" for n, spec in enumerate(HOSTILE, start=1) if spec.name != "wide.csv"}
    assert not refused & set(workspace.downloads[len(downloaded):]), "a refused version is not downloaded again"


async def test_read_file_on_a_hostile_file_is_a_tool_result_remembered_for_that_version(model, http) -> None:
    workspace, refusals = _thread(), MemoryFileRefusals()
    ctx = _context(model, http, workspace, refusals)
    first = await ReadFile().run(ReadFileInput(file="F1", goal="the fees"), ctx)
    assert first.is_error and "Could not read this file: zeros.docx: its part" in first.text
    assert "ask the requester for a re-export" in first.text
    assert workspace.downloads == ["F1"]
    second = await ReadFile().run(ReadFileInput(file="F1", goal="the fees"), ctx)  # another run's tool
    assert second.is_error and second.text == first.text and workspace.downloads == ["F1"]
    # A new version of the file (re-uploaded, edited) is tried afresh.
    info = (await workspace.files())[0]
    fixed = HOSTILE[0].ordinary(20_000)
    workspace.share(info.model_copy(update={"version": "2", "size": len(fixed)}), fixed)
    third = await ReadFile().run(ReadFileInput(file="F1", goal="the quarterly fees"), ctx)
    assert not third.is_error, third.text
    assert workspace.downloads == ["F1", "F1"]
