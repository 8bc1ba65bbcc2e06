"""read_page and its fetcher: routing, links, PDFs, hostile pages and the address guard."""
from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

import httpx
import pytest
from anthropic import AsyncAnthropic

from agent import AgentConfig, FetchConfig, SourceRegistry
from agent.model import ModelClient
from agent.tools.base import ToolContext
from agent.tools.extract import Extracted, extract_text
from agent.tools.fetch import Fetched, FetchError, fetch
from agent.tools.fetch_result import FetchResult, FetchResultInput
from agent.tools.links import LinkTable
from agent.tools.netguard import BlockedURL, resolve_checked
from agent.tools.read_page import DIRECT_CHARS, ReadPage, ReadPageInput
from tests.helpers import seen
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.pdf import make_pdf
from tests.fakes.policies import extract, is_extraction
from tests.fakes.web import FakeWeb, Page
from tests.paths import SHARED_PAGES

ALLOW = FetchConfig(allow=["127.0.0.1"])


@pytest.fixture
async def ctx(fake_model: FakeAnthropic) -> AsyncIterator[ToolContext]:
    fake_model.policy = extract

    async def emit(_: object) -> None:
        return None

    async with httpx.AsyncClient() as http, AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        model = ModelClient(client, main_model="m", small_model="s", timeout=30)
        yield ToolContext(config=AgentConfig(fetch=ALLOW), registry=SourceRegistry(), http=http, model=model,
                          emit=emit, goal_question="q")


def paragraphs(n: int, topic: str) -> str:
    return "".join(f"<p>Paragraph {i} about {topic} says the figure was {i}.{i % 10} percent in 2024.</p>" for i in range(n))


async def read(ctx: ToolContext, url: str, goal: str) -> str:
    result = await ReadPage().run(ReadPageInput(url=seen(ctx, url), goal=goal), ctx)
    return result.text


async def test_links_become_markers_and_a_link_id_can_be_followed(ctx: ToolContext, fake_web: FakeWeb) -> None:
    fake_web.add_page("/hub", Page("<html><head><title>Hub</title></head><body><article>"
                                   "<p>Our fund overview covers many products in depth for investors.</p>"
                                   '<p>See the <a href="/factsheet">VTI factsheet</a> or the '
                                   '<a href="https://other.example.org/x">partner analysis</a> for details.</p>'
                                   "</article></body></html>"))
    fake_web.add_page("/factsheet", Page("<html><head><title>VTI factsheet</title></head><body><article>"
                                         "<p>The VTI factsheet states an expense ratio of 0.03% as of 2024.</p>"
                                         "</article></body></html>"))
    first = await read(ctx, f"{fake_web.url}/hub", "VTI factsheet expense ratio")
    link = re.search(r"Links worth following: 【(\d+)†VTI factsheet】", first)
    assert link, first
    assert "【" not in " ".join(s.passage for s in ctx.registry.all()), "passages are plain text"
    second = await read(ctx, link.group(1), "VTI factsheet expense ratio")
    assert "/factsheet" in second and re.search(r'\[s\d+\] "The VTI factsheet states an expense ratio of 0.03%', second)


async def test_unknown_link_id_and_non_url_get_instructions(ctx: ToolContext) -> None:
    assert "There is no link 99" in await read(ctx, "99", "anything")
    assert "neither a URL nor a link id" in await read(ctx, "vanguard fees", "anything")


async def test_same_page_same_goal_twice_is_nudged(ctx: ToolContext, fake_web: FakeWeb) -> None:
    url = f"{fake_web.url}/pages/etf-fees.html"
    tool = ReadPage()  # one instance per run, as default_tools() makes them
    first = await tool.run(ReadPageInput(url=seen(ctx, url), goal="expense ratio"), ctx)
    repeat = await tool.run(ReadPageInput(url=seen(ctx, url), goal="Expense  ratio"), ctx)
    assert not first.is_error
    assert repeat.is_error and "already read this page with this goal" in repeat.text


async def test_short_page_is_read_in_one_call(ctx: ToolContext, fake_web: FakeWeb, fake_model: FakeAnthropic) -> None:
    text = await read(ctx, f"{fake_web.url}/pages/etf-fees.html", "VTI expense ratio")
    assert "direct" in text and len(fake_model.requests) == 1


async def test_long_page_is_read_in_parallel_parts_and_merged(ctx: ToolContext, fake_web: FakeWeb, fake_model) -> None:
    body = "<h2>Early</h2>" + paragraphs(500, "bonds") + "<h2>Late</h2>" + paragraphs(400, "bonds") + \
        "<p>The hidden tracking difference of ITOT was 0.05 percent in 2023.</p>"
    fake_web.add_page("/long", Page(f"<html><head><title>Long</title></head><body><article>{body}</article></body></html>"))
    text = await read(ctx, f"{fake_web.url}/long", "ITOT hidden tracking difference")
    parts = [r for r in fake_model.requests if is_extraction(r)]
    assert len(parts) > 1 and re.search(rf"in {len(parts)} parts read in parallel", text)
    assert all(f'of {len(parts)}">' in r["messages"][0]["content"] for r in parts)
    assert "The hidden tracking difference of ITOT was 0.05 percent in 2023" in text, "found in the last part"


async def test_full_page_text_is_stored_and_paged_with_fetch_result(ctx: ToolContext, fake_web: FakeWeb) -> None:
    fake_web.add_page("/long", Page(f"<html><body><article>{paragraphs(3000, 'stocks')}</article></body></html>"))
    text = await read(ctx, f"{fake_web.url}/long", "stocks figure")
    page_id = re.search(r"Full text: fetch_result\('(r_[0-9a-f]+)'\)", text).group(1)
    first = await FetchResult().run(FetchResultInput(id=page_id, length=1000), ctx)
    assert "characters 0–1,000 of" in first.text and f"fetch_result('{page_id}', start=1000)" in first.text
    total = int(re.search(r"of ([\d,]+)", first.text).group(1).replace(",", ""))
    assert total > DIRECT_CHARS
    tail = await FetchResult().run(FetchResultInput(id=page_id, start=total - 10), ctx)
    assert "this is the end" in tail.text
    past = await FetchResult().run(FetchResultInput(id=page_id, start=total + 5), ctx)
    assert past.is_error and "past its end" in past.text
    missing = await FetchResult().run(FetchResultInput(id="r_ffff"), ctx)
    assert missing.is_error and "There is no stored result" in missing.text


async def test_pdf_is_read_with_page_numbers(ctx: ToolContext, fake_web: FakeWeb) -> None:
    pdf = make_pdf([["Annual report 2024."], ["The SCHB expense ratio was 0.03 percent in 2024."]], title="Schwab report")
    fake_web.add_page("/report.pdf", Page(pdf, content_type="application/pdf"))
    text = await read(ctx, f"{fake_web.url}/report.pdf", "SCHB expense ratio")
    assert "Read: PDF" in text and "2 pages" in text
    assert 'The SCHB expense ratio was 0.03 percent in 2024' in text
    assert "Page: Schwab report" in text


async def test_broken_pdf_says_what_to_do(ctx: ToolContext, fake_web: FakeWeb) -> None:
    fake_web.add_page("/broken.pdf", Page(b"%PDF-1.4\nthis is not really a pdf", content_type="application/pdf"))
    result = await ReadPage().run(ReadPageInput(url=seen(ctx, f"{fake_web.url}/broken.pdf"), goal="anything"), ctx)
    assert result.is_error and "look for an HTML version" in result.text


async def test_unparsable_extraction_answers_fail_with_advice(ctx: ToolContext, fake_web: FakeWeb, fake_model) -> None:
    fake_model.policy = lambda request: "I think the page is about fees."
    result = await ReadPage().run(ReadPageInput(url=seen(ctx, f"{fake_web.url}/pages/etf-fees.html"), goal="fees"), ctx)
    assert result.is_error and "no usable answer twice" in result.text
    assert len(fake_model.requests) == 2


async def test_gzip_bomb_costs_at_most_the_byte_cap(fake_web: FakeWeb) -> None:
    config = FetchConfig(allow=["127.0.0.1"], max_bytes=2_000_000)
    async with httpx.AsyncClient() as http:
        page = await fetch(http, f"{fake_web.url}/gzip-bomb", config)
    assert page.truncated and len(page.body) == 2_000_000


async def test_huge_page_is_cut_at_the_byte_cap(fake_web: FakeWeb) -> None:
    config = FetchConfig(allow=["127.0.0.1"], max_bytes=1_000_000)
    async with httpx.AsyncClient() as http:
        page = await fetch(http, f"{fake_web.url}/huge", config)
    assert page.truncated and len(page.body) == 1_000_000


async def test_slow_page_is_given_up_with_advice(fake_web: FakeWeb) -> None:
    fake_web.slow_seconds = 5
    config = FetchConfig(allow=["127.0.0.1"], total_seconds=0.5)
    async with httpx.AsyncClient() as http:
        with pytest.raises(FetchError, match="took longer than 0 s|did not answer in time"):
            await fetch(http, f"{fake_web.url}/slow", config)


async def test_mislabelled_charset_is_decoded_correctly(fake_web: FakeWeb) -> None:
    async with httpx.AsyncClient() as http:
        page = await fetch(http, f"{fake_web.url}/latin1", ALLOW)
    extracted = await extract_text(page, LinkTable())
    assert "Ã" not in extracted.text.plain, "UTF-8 bytes were not decoded as Latin-1"


async def test_redirect_to_a_private_address_is_refused_at_the_hop(fake_web: FakeWeb) -> None:
    async with httpx.AsyncClient() as http:
        with pytest.raises(FetchError, match="private or reserved address"):
            await fetch(http, f"{fake_web.url}/redirect-to?url=http://169.254.169.254/latest/", ALLOW)


async def test_host_name_is_kept_when_connecting_to_the_checked_address(fake_web: FakeWeb) -> None:
    port = fake_web.url.rsplit(":", 1)[1]
    config = FetchConfig(allow=["localhost", "127.0.0.1", "::1"])
    async with httpx.AsyncClient() as http:
        page = await fetch(http, f"http://localhost:{port}/pages/etf-fees.html", config)
    assert page.status == 200 and page.url.startswith("http://localhost:")


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/", "http://2130706433/", "http://0x7f.0.0.1/", "http://0177.0.0.1/", "http://localhost/",
    "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/",
    "http://192.168.1.1/", "http://172.16.0.1/", "http://100.64.0.1/", "http://224.0.0.1/", "http://0.0.0.0/",
    "http://[fe80::1]/", "http://[fc00::1]/",
])
async def test_private_and_disguised_addresses_are_refused(url: str) -> None:
    with pytest.raises(BlockedURL, match="private or reserved"):
        await resolve_checked(url)


@pytest.mark.parametrize("url, message", [
    ("file:///etc/passwd", "only http and https"), ("ftp://example.com/x", "only http and https"),
    ("http:///nohost", "no host name"),
])
async def test_other_schemes_and_broken_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(BlockedURL, match=message):
        await resolve_checked(url)


async def test_allow_list_exempts_named_addresses() -> None:
    assert str(await resolve_checked("http://127.0.0.1:8080/", ["127.0.0.1"])) == "127.0.0.1"
    assert str(await resolve_checked("http://127.0.0.5/", ["127.0.0.0/8"])) == "127.0.0.5"


@pytest.mark.skipif(not SHARED_PAGES.exists(), reason="../shared/fixtures/pages absent: real-page extraction checks not run")
async def test_real_saved_pages_extract_with_their_expected_text() -> None:
    index = json.loads((SHARED_PAGES / "index.json").read_text())
    passed = total = 0
    for entry in index["pages"]:
        html = (SHARED_PAGES / entry["file"]).read_bytes()
        page = Fetched(url=entry["url"] or "https://example.org/", status=200, content_type="text/html",
                       charset=entry.get("declared_charset"), body=html, truncated=False)
        try:
            extracted: Extracted = await extract_text(page, LinkTable())
        except Exception as exc:  # the paywalled stub and status pages may have no article
            extracted = None
            assert "readable" in str(exc), exc
        if not entry.get("expected_snippets"):
            continue
        expected = json.loads((SHARED_PAGES / entry["expected_snippets"]).read_text())
        text = " ".join(extracted.text.plain.split()) if extracted else ""
        for snippet in expected.get("with", []):
            total += 1
            passed += " ".join(snippet.split()) in text
        for snippet in expected.get("without", []):
            total += 1
            passed += " ".join(snippet.split()) not in text
    print(f"real pages: {passed}/{total} snippet checks pass")
    assert total >= 100 and passed / total >= 0.93, f"{passed}/{total}"


SHARED_PDF = SHARED_PAGES.parent / "pdf" / "R-intro.pdf"


@pytest.mark.skipif(not SHARED_PDF.exists(), reason="../shared/fixtures/pdf absent: real-PDF reading check not run")
async def test_real_113_page_pdf_is_read_in_parts(ctx: ToolContext, fake_web: FakeWeb, fake_model) -> None:
    fake_web.add_page("/R-intro.pdf", Page(SHARED_PDF.read_bytes(), content_type="application/pdf"))
    text = await read(ctx, f"{fake_web.url}/R-intro.pdf", "how R vectors and assignment work")
    assert "Read: PDF" in text and "113 pages" in text and "parts read in parallel" in text, text[:400]
    assert re.search(r'\[s\d+\] "', text), "verbatim passages from the PDF"


@pytest.mark.parametrize("location", ["http:127.0.0.1/", "http://[::1/", "http://[::ffff:169.254.169.254]/", "https://bücher.de/"])
async def test_read_page_turns_a_bad_redirect_into_a_could_not_read_result(
    ctx: ToolContext, fake_web: FakeWeb, location: str
) -> None:
    from urllib.parse import quote

    result = await ReadPage().run(ReadPageInput(url=seen(ctx, f"{fake_web.url}/redirect-to?url={quote(location)}"), goal="anything"), ctx)
    assert result.is_error and result.text.startswith("Could not read this page:")
    assert "try another source" in result.text or "search for the page" in result.text


async def test_hostile_web_documents_are_refused_as_tool_results(ctx: ToolContext, fake_web: FakeWeb) -> None:
    """PDFs and Office files from the web go through the converter's limits like shared files do."""
    from tests.fakes.hostile_files import docx_with_zero_image, pdf_shared_stream

    docx_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    fake_web.add_page("/shared.pdf", Page(pdf_shared_stream(), content_type="application/pdf"))
    fake_web.add_page("/zeros.docx", Page(docx_with_zero_image(), content_type=docx_type))
    pdf = await ReadPage().run(ReadPageInput(url=seen(ctx, f"{fake_web.url}/shared.pdf"), goal="the expense ratio"), ctx)
    assert pdf.is_error and "Could not read this page: this PDF was not read: the PDF has no text" in pdf.text
    assert "look for an HTML version or another source" in pdf.text
    docx = await ReadPage().run(ReadPageInput(url=seen(ctx, f"{fake_web.url}/zeros.docx"), goal="the expense ratio"), ctx)
    assert docx.is_error and "this Word document was not read: its part 'word/media/unused.png' would inflate" in docx.text


async def test_a_word_document_on_the_web_is_read(ctx: ToolContext, fake_web: FakeWeb) -> None:
    from tests.fakes.hostile_files import docx_with_random_image

    docx_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    fake_web.add_page("/fees.docx", Page(docx_with_random_image(20_000), content_type=docx_type))
    text = await read(ctx, f"{fake_web.url}/fees.docx", "Quarterly fees")
    assert "Read: DOCX" in text and "Quarterly fees: 0.03% for VTI." in text
