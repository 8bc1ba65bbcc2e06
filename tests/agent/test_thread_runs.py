"""A run sees its thread: files, earlier messages and links in the question as markers it can open."""
from __future__ import annotations

import json
import re
from typing import Any

from agent import ResearchTask, RunEvent
from agent.events import SectionWritten, SourceAdded
from agent.workspace import FileInfo, MemoryWorkspace
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.file_reader import FilesPolicy, is_file_extraction, is_ranking
from tests.fakes.pdf import make_pdf
from tests.fakes.policies import _blocks, _text, is_extraction
from tests.helpers import research_events

PDF = make_pdf([["Vendor comparison 2024.", "This report compares three index fund providers."],
                ["The SCHB expense ratio was 0.03 percent in 2024.",
                 "Schwab lowered the SCHB expense ratio in March 2024."]], title="Vendor report")
CSV = b"Fund,Expense ratio,As of\nVTI,0.03%,2024-06-30\nSCHB,0.03%,2024-03-31\n"


def file(file_id: str, name: str, data: bytes, ts: str) -> FileInfo:
    return FileInfo(id=file_id, name=name, size=len(data), shared_by="UANA", shared_ts=ts,
                    filetype=name.rsplit(".", 1)[-1])


async def run(fake_model: FakeAnthropic, fake_web: Any, task: ResearchTask,
              workspace: MemoryWorkspace) -> list[RunEvent]:
    events, _ = await research_events(fake_model, fake_web, task, workspace=workspace)
    return events


def main_requests(fake_model: FakeAnthropic) -> list[dict[str, Any]]:
    return [r for r in fake_model.requests
            if not (is_file_extraction(r) or is_ranking(r) or is_extraction(r))]


async def test_a_question_with_an_attached_pdf_and_spreadsheet_cites_both_by_name_and_location(
        fake_model: FakeAnthropic, fake_web: Any) -> None:
    workspace = MemoryWorkspace([(file("F1", "vendor-report.pdf", PDF, "100.1"), PDF),
                                 (file("F2", "fees.csv", CSV, "100.1"), CSV)])
    workspace.post("UANA", "Here are the two vendor files", "100.1", files=["F1", "F2"])
    workspace.post("UBOB", "See https://example.org/schb-fees too", "100.2")
    fake_model.policy = FilesPolicy()
    task = ResearchTask(question="Check SCHB's 2024 fee in these files and at https://example.org/schb-fees",
                        started_ts="100.3")
    events = await run(fake_model, fake_web, task, workspace)

    opening = _text(main_requests(fake_model)[0]["messages"][0])
    assert "- F1 · vendor-report.pdf · PDF" in opening and "shared by <@UANA>" in opening
    assert "- F2 · fees.csv · CSV" in opening
    assert "Earlier messages in this thread: 2" in opening and "read_thread opens them" in opening
    assert re.search(r"Links in the request .*\n- 【\d+†example\.org†?[^】]*】 https://example.org/schb-fees", opening)
    assert "0.03 percent" not in opening, "markers, not content"

    sources = {e.source.marker: e.source for e in events if isinstance(e, SourceAdded)}
    [section] = [e for e in events if isinstance(e, SectionWritten)]
    cited = {sources[m].title for m in re.findall(r"\[(s\d+)\]", section.body)}
    assert "file: vendor-report.pdf, page 2" in cited
    assert any(t.startswith("file: fees.csv, row ") for t in cited), cited


async def test_a_file_shared_mid_run_reaches_the_loop_as_a_note(fake_model: FakeAnthropic, fake_web: Any) -> None:
    workspace = MemoryWorkspace([(file("F1", "vendor-report.pdf", PDF, "100.1"), PDF)])
    late = file("F9", "late-fees.csv", CSV, "100.9")
    fake_model.policy = FilesPolicy(on_turn_two=lambda: workspace.share(late, CSV), search_after=True)
    await run(fake_model, fake_web, ResearchTask(question="SCHB fee 2024", started_ts="100.2"), workspace)
    notes = [b["text"] for r in main_requests(fake_model) for b in _blocks(r["messages"][-1])
             if b.get("type") == "text" and "New in the thread" in b.get("text", "")]
    assert notes and "F9 · late-fees.csv · CSV" in notes[0]
    assert len({json.dumps(n) for n in notes}) == 1, "announced once, not every turn"
