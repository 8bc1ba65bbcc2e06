"""The converter: every hostile file is refused clearly or read within its limits, in a child
process the OS limits and a deadline kills; hostile files are generated here, at test time."""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agent.converter import ConversionRefused, ConvertLimits, convert, last_stats
from agent.converter.process import CHILD
from agent.tools.file_text import convert as convert_file
from agent.workspace import FileInfo
from tests.fakes import hostile_files as hostile
from tests.fakes.hostile_files import HOSTILE, MB, Hostile

OFF = 10**12  # a limit set this high is out of the way, to show the one under test


def _info(name: str, data: bytes) -> FileInfo:
    return FileInfo(id="F1", name=name, size=len(data))


def _children() -> list[int]:
    """Our own child processes still running the converter (none may outlive its conversion)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and str(CHILD).encode() in cmdline:
            found.append(int(pid))
    return found


@pytest.mark.parametrize("spec", HOSTILE, ids=lambda s: s.name)
async def test_each_hostile_file_is_refused_with_what_to_do_or_read_within_its_limits(spec: Hostile) -> None:
    data = spec.build()
    try:
        text = await convert_file(_info(spec.name, data), data)
    except Exception as exc:  # noqa: BLE001 - the refusal's type and words are what is checked
        message = str(exc)
        assert type(exc).__name__ == "UnsupportedFile", message
        assert message.startswith(f"{spec.name}: ") and spec.expect in message, message
        assert "ask the requester for a re-export" in message, "every refusal says what to do instead"
    else:
        assert spec.expect in text.note, text.note
        assert len(text.text) <= ConvertLimits().max_chars
    assert last_stats.peak_rss_bytes <= ConvertLimits().memory_bytes
    assert _children() == []


@pytest.mark.parametrize("spec", HOSTILE, ids=lambda s: s.name)
async def test_the_ordinary_file_of_the_same_size_is_read(spec: Hostile) -> None:
    size = len(spec.build())
    data = spec.ordinary(size)
    text = await convert_file(_info(spec.name, data), data)
    assert text.text.strip()


async def test_the_memory_limit_is_the_os_s_when_no_check_stops_a_file_first() -> None:
    limits = ConvertLimits(memory_bytes=160 * MB, zip_max_ratio=OFF, zip_max_total_bytes=OFF)
    with pytest.raises(ConversionRefused, match="memory"):
        await convert("docx", hostile.docx_with_zero_image(400 * MB), limits=limits)
    assert _children() == []


async def test_the_cpu_limit_is_the_os_s_and_ends_the_child() -> None:
    limits = ConvertLimits(cpu_seconds=1, soft_seconds=OFF, wall_seconds=120, pdf_max_page_bytes=OFF, pdf_max_bytes=OFF)
    with pytest.raises(ConversionRefused, match=r"more than 1 s of processing"):
        await convert("pdf", hostile.pdf_shared_stream(pages=2, stream_bytes=6 * MB), limits=limits)


async def test_the_wall_deadline_kills_the_child() -> None:
    limits = ConvertLimits(wall_seconds=1, cpu_seconds=600, soft_seconds=OFF, pdf_max_page_bytes=OFF, pdf_max_bytes=OFF)
    with pytest.raises(ConversionRefused, match=r"took longer than 1 s, so it was stopped"):
        await convert("pdf", hostile.pdf_shared_stream(pages=2, stream_bytes=8 * MB), limits=limits)
    assert _children() == []


async def test_a_caller_that_stops_waiting_leaves_no_child_running() -> None:
    """A tool's deadline cancels the await; cancelling kills the child, so nothing outlives the tool."""
    limits = ConvertLimits(wall_seconds=600, cpu_seconds=600, soft_seconds=OFF, pdf_max_page_bytes=OFF, pdf_max_bytes=OFF)
    task = asyncio.create_task(convert("pdf", hostile.pdf_shared_stream(pages=2, stream_bytes=8 * MB), limits=limits))
    for _ in range(200):
        await asyncio.sleep(0.05)
        if _children():
            break
    assert _children(), "the conversion runs in a child process"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(task, 0.5)
    assert _children() == []


async def test_the_soft_clock_returns_what_was_read_with_a_note() -> None:
    limits = ConvertLimits(soft_seconds=0, pdf_max_page_bytes=OFF)
    text = await convert("pdf", hostile.pdf_ordinary(60_000), limits=limits)
    assert "stopped after 0 s of reading at page 2" in text.note and "[page 1]" in text.text


async def test_pages_sharing_one_content_stream_are_read_once() -> None:
    text = await convert("pdf", hostile.pdf_shared_stream(pages=30, stream_bytes=64 * 1024))
    assert text.text.count("[page ") == 1
    assert "29 pages repeat an earlier page's content and were read once" in text.note


async def test_columns_and_rows_are_capped_with_a_note() -> None:
    limits = ConvertLimits(max_columns=3, max_rows=2)
    text = await convert("csv", b"a,b,c,d,e\n1,2,3,4,5\n6,7,8,9,10\n11,12,13,14,15\n", limits=limits)
    assert "first 3 of 5 columns" in text.note and "first 2 rows" in text.note
    assert "d" not in text.text.split("\n")[0] and "11" not in text.text


async def test_the_child_gets_nothing_of_the_worker_s_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Isolated: a secret in the worker's environment is not in the child's (a parser exploit finds none)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    limits = ConvertLimits()
    task = asyncio.create_task(convert("pdf", hostile.pdf_shared_stream(pages=2, stream_bytes=6 * MB),
                                       limits=limits.model_copy(update={"pdf_max_page_bytes": OFF,
                                                                        "soft_seconds": OFF})))
    environ = b""
    for _ in range(200):
        await asyncio.sleep(0.05)
        children = _children()
        if children:
            environ = Path(f"/proc/{children[0]}/environ").read_bytes()
            break
    task.cancel()
    with pytest.raises((asyncio.CancelledError, ConversionRefused)):
        await task
    assert b"sk-ant-secret" not in environ and b"ANTHROPIC" not in environ
