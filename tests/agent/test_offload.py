"""Page extraction in the process pool (agent/offload.py, agent/tools/extract.py): a worker carrying
many runs sends trafilatura to a forkserver pool and places the link markers in the parent, and a
run must read exactly what it reads when the page is extracted in a thread.

The pages are the ones the extraction tests use: tests/pages, and the real saved pages of
../shared/fixtures/pages when that folder is beside the checkout."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import offload
from agent.exceptions import UnreadableContent
from agent.tools import extract as extract_module
from agent.tools.extract import Extracted, extract_text
from agent.tools.fetch import Fetched
from agent.tools.links import LinkTable
from tests.paths import PAGES, SHARED_PAGES

NO_TEXT = "no readable article text was found on this page; try another source"
# The shipped pages' links are all in their navigation (trafilatura drops it): this article's are
# in its text, to the same site and to others, with a footnote and a repeated target.
FILLER = ("The quarterly review of the municipal water utility found that average household bills rose "
          "modestly while investment in pipe replacement doubled compared with the previous decade. ")
LINKED_HTML = (
    "<html><head><title>Water bills &amp; pipes | Utility Notes</title></head><body><article>"
    f"<h1>Water bills and pipes</h1><p>{FILLER * 3}</p>"
    "<p>The method is described in the <a href='methods.html'>methods note</a> and the "
    "<a href='/data/'>data page</a>, with a source note<a href='#note-1'>[1]</a>; the regulator's "
    "<a href='https://regulator.example.gov/reports/2024'>annual report</a> agrees.</p>"
    f"<h2>What changed</h2><p>{FILLER * 2} See the <a href='/data/'>data page</a> again, and "
    "<a href='https://stats.example.com/water?year=2024'>the statistics office's series</a>.</p>"
    "</article></body></html>"
).encode()


def _refuse(*args: object) -> None:
    raise AssertionError("the page was extracted in the parent process, not in the pool")


@pytest.fixture
def pool() -> Iterator[None]:
    offload.use_processes(workers=2)
    assert offload.pooled()
    yield
    offload.use_threads()


@pytest.fixture
def parent_does_not_extract(monkeypatch: pytest.MonkeyPatch) -> None:
    """trafilatura's extraction made unusable in this process only: the pool's processes are forked
    from a server that imported the extractor itself, so a page read there is read in the pool."""

    monkeypatch.setattr(extract_module, "_extracted", _refuse)
    monkeypatch.setattr(extract_module, "_extract_sync", _refuse)


def page_of(path: Path) -> Fetched:
    return Fetched(url=f"https://news.example.org/2024/{path.stem}", status=200, content_type="text/html",
                   charset=None, body=path.read_bytes(), truncated=False)


async def extract_all(paths: list[Path]) -> tuple[list[Extracted | str], LinkTable]:
    """Every page in turn with one run-wide link table (ids continue from page to page); a page
    with no article gives its refusal's message instead."""
    links = LinkTable()
    results: list[Extracted | str] = []
    for path in paths:
        try:
            results.append(await extract_text(page_of(path), links))
        except UnreadableContent as exc:
            results.append(f"unreadable: {exc}")
    return results, links


async def same_in_pool_as_in_threads(paths: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    assert not offload.pooled()
    in_threads, thread_links = await extract_all(paths)

    offload.use_processes(workers=2)
    try:
        with monkeypatch.context() as patch:
            patch.setattr(extract_module, "_extracted", _refuse)
            patch.setattr(extract_module, "_extract_sync", _refuse)
            in_pool, pool_links = await extract_all(paths)
    finally:
        offload.use_threads()

    for path, threaded, pooled in zip(paths, in_threads, in_pool, strict=True):
        assert pooled == threaded, f"{path.name}: the pool's extraction differs from the thread's"
    assert pool_links.urls == thread_links.urls
    assert pool_links.anchors == thread_links.anchors
    # The comparison covers pages with links, titles and headings, not only empty results.
    read = [result for result in in_threads if isinstance(result, Extracted)]
    assert read and all(result.kind == "html" and result.text.plain for result in read)
    assert any(result.text.link_ids for result in read) and thread_links.urls
    assert any(result.title for result in read)


@pytest.fixture
def linked_page(tmp_path: Path) -> Path:
    path = tmp_path / "water-bills.html"
    path.write_bytes(LINKED_HTML)
    return path


async def test_the_shipped_pages_read_the_same_in_the_pool_as_in_a_thread(
    linked_page: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await same_in_pool_as_in_threads([*sorted(PAGES.glob("*.html")), linked_page], monkeypatch)


@pytest.mark.skipif(not SHARED_PAGES.exists(), reason="../shared/fixtures/pages absent: real-page pool checks not run")
async def test_the_real_saved_pages_read_the_same_in_the_pool_as_in_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    await same_in_pool_as_in_threads(sorted(SHARED_PAGES.glob("*.html")), monkeypatch)


async def test_link_ids_come_from_the_run_s_own_table_in_the_parent(
    linked_page: Path, pool: None, parent_does_not_extract: None
) -> None:
    # A table that already holds the run's earlier links: the pool's page gets the next ids, and a
    # link seen before keeps its id (the pool's processes never see the table).
    page = page_of(linked_page)
    links = LinkTable()
    fresh = await extract_text(page, links)
    first_url = links.urls[0]

    earlier = LinkTable()
    earlier.add("https://elsewhere.example.com/one", "one")
    earlier.add(first_url, "seen before")
    again = await extract_text(page, earlier)

    assert earlier.urls[:2] == ["https://elsewhere.example.com/one", first_url]
    assert set(earlier.urls[2:]) == set(links.urls) - {first_url}
    assert 2 in again.text.link_ids and 1 not in again.text.link_ids
    assert again.text.plain == fresh.text.plain


@pytest.mark.parametrize("body", [
    b"",
    b"<html><body></body></html>",
    b"<html><head><title>Loading</title></head><body><script>var app = 1;</script></body></html>",
    b"<!doctype html><html>   </html>",
], ids=["empty", "empty-body", "script-only", "blank"])
async def test_a_page_without_text_is_refused_from_the_pool_with_its_message(
    body: bytes, pool: None, parent_does_not_extract: None
) -> None:
    page = Fetched(url="https://news.example.org/empty", status=200, content_type="text/html", charset=None,
                   body=body, truncated=False)
    with pytest.raises(UnreadableContent) as refused:
        await extract_text(page, LinkTable())
    assert str(refused.value) == NO_TEXT
    # Raised in a pool process: concurrent.futures attaches the child's traceback as the cause.
    assert "_extracted_portable" in str(refused.value.__cause__)
