"""Page extraction keeps every word of trafilatura's plain text and marks links in it.

Checked three ways: on the real saved pages (../shared/fixtures/pages), on the pages the tests
ship (tests/pages), and on hostile HTML generated with hypothesis (links with and without the
spaces beside them, long labels, headings and list items run into the next word, block
elements followed by loose tail text).
"""
from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import lxml.html
import pytest
import trafilatura
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.tools import extract as extract_module
from agent.tools.extract import (
    TRAFILATURA_OPTIONS,
    UnreadableContent,
    extract_text,
    html_text,
)
from agent.tools.fetch import Fetched
from agent.tools.links import (
    ANCHOR_CHARS,
    LINK_MARKER_RE,
    LinkTable,
    resolve_href,
    strip_markers,
)
from agent.tools.page_text import PageText
from agent.tools.read_page import verified_excerpts
from tests.paths import PAGES, SHARED_PAGES

SHIPPED_PAGES = PAGES
MIN_RECALL = 0.999
PAGE_URL = "https://news.example.org/2024/article"


def words(text: str) -> Counter[str]:
    return Counter(text.split())


def recall(ours: str, theirs: str) -> float:
    wanted = words(theirs)
    total = sum(wanted.values())
    return sum((wanted & words(ours)).values()) / total if total else 1.0


def new_words(ours: str, theirs: str) -> list[str]:
    """Words of ours that trafilatura's text does not have (a glued pair shows up here); heading marks aside."""
    return [word for word in (words(ours) - words(theirs)) if set(word) != {"#"}]


def glued_words(ours: str, theirs: str) -> list[str]:
    """Words of ours that are two adjacent words of trafilatura's text run together (a lost space)."""
    sequence = theirs.split()
    pairs = {a + b for a, b in zip(sequence, sequence[1:], strict=False)}
    return [word for word in new_words(ours, theirs) if word in pairs]


def invented_words(ours: str, theirs: str, html: bytes | str) -> list[str]:
    """Words of ours that neither trafilatura's text nor the page's own text has anywhere."""
    squeezed = "".join(lxml.html.fromstring(html).text_content().split())
    return [word for word in new_words(ours, theirs) if set(word) - {"-", "|"} and word not in squeezed]


def trafilatura_text(html: bytes | str, url: str) -> str:
    return trafilatura.extract(html, url=url, **TRAFILATURA_OPTIONS) or ""


def source_links(html: bytes | str, url: str) -> set[str]:
    document = lxml.html.fromstring(html)
    return {target for href in document.xpath("//a/@href") if (target := resolve_href(str(href), url))}


def assert_markers_sound(text: PageText, links: LinkTable, html: bytes | str, url: str, name: str) -> None:
    """Removing the markers gives the text excerpts are checked against; each leads to a link of the page."""
    assert strip_markers(text.linked) == text.plain, f"{name}: markers change the text excerpts are checked against"
    on_page = source_links(html, url)
    for match in LINK_MARKER_RE.finditer(text.linked):
        target = links.get(int(match.group(1)))
        assert target in on_page, f"{name}: marker {match.group(0)} leads to {target}, not a link of the page"


def assert_same_words(text: PageText, theirs: str, name: str, html: bytes | str | None = None) -> None:
    """The issue's measure: word recall against trafilatura's plain text, and no glued or invented
    words. On real pages the one linked extraction may keep a few lines the plain one drops (a
    "Jump to navigation", more of an article): those are the page's own words, so they are checked
    against the page (`html`); without it (generated pages) no new word at all is allowed."""
    assert recall(text.plain, theirs) >= MIN_RECALL, f"{name}: words lost"
    assert recall(strip_markers(text.linked), theirs) >= MIN_RECALL, f"{name}: words lost in the linked text"
    assert not glued_words(text.plain, theirs), f"{name}: glued words {glued_words(text.plain, theirs)[:5]}"
    if html is None:
        assert not new_words(text.plain, theirs), f"{name}: new words {new_words(text.plain, theirs)[:5]}"
    else:
        invented = invented_words(text.plain, theirs, html)
        assert not invented, f"{name}: invented words {invented[:5]}"


def shared_pages() -> Iterator[tuple[str, bytes, str]]:
    for entry in json.loads((SHARED_PAGES / "index.json").read_text())["pages"]:
        yield entry["file"], (SHARED_PAGES / entry["file"]).read_bytes(), entry["url"] or "https://example.org/"


@pytest.mark.skipif(not SHARED_PAGES.exists(), reason="../shared/fixtures/pages absent: the 43 real pages are not checked")
def test_real_pages_keep_every_word_of_trafilaturas_text_with_resolvable_markers() -> None:
    marked = 0
    for name, html, url in shared_pages():
        links = LinkTable()
        try:
            text = html_text(html, url, links)
        except UnreadableContent:
            assert not trafilatura_text(html, url).strip(), f"{name}: trafilatura reads text we refused"
            continue
        assert_markers_sound(text, links, html, url, name)
        assert_same_words(text, trafilatura_text(html, url), name, html)
        marked += len(LINK_MARKER_RE.findall(text.linked))
    assert marked > 400, "the real pages' links are marked"


@pytest.mark.skipif(not SHARED_PAGES.exists(), reason="../shared/fixtures/pages absent: the real-page cases are not checked")
def test_real_page_keeps_the_space_before_a_link_and_long_labels_whole() -> None:
    html = (SHARED_PAGES / "netbits.us.stunnel_rsync.html").read_bytes()
    links = LinkTable()
    text = html_text(html, "http://netbits.us/docs/stunnel_rsync.html", links)
    assert "source code from 【" in text.linked and "from http://www.stunnel.org" in text.plain
    wiki = html_text((SHARED_PAGES / "en.wikipedia.org.tsne.html").read_bytes(),
                     "https://en.wikipedia.org/wiki/T-distributed_stochastic_neighbor_embedding", LinkTable())
    long_labels = [m.group(2) for m in LINK_MARKER_RE.finditer(wiki.linked) if len(m.group(2)) > ANCHOR_CHARS]
    assert long_labels and all(label in wiki.plain for label in long_labels)


def test_shipped_pages_keep_every_word_with_resolvable_markers() -> None:
    for path in sorted(SHIPPED_PAGES.glob("*.html")):
        links = LinkTable()
        html = path.read_bytes()
        text = html_text(html, PAGE_URL, links)
        assert_markers_sound(text, links, html, PAGE_URL, path.name)
        assert_same_words(text, trafilatura_text(html, PAGE_URL), path.name)


# --- generated hostile pages ------------------------------------------------------------

FILLER = ("The quarterly review of the municipal water utility found that average household bills rose "
          "modestly while investment in pipe replacement doubled compared with the previous decade. ")


@dataclass
class Page:
    """A generated page: its HTML, and what it says in words and links."""

    parts: list[str] = field(default_factory=list)
    link_urls: dict[str, str] = field(default_factory=dict)  # label -> absolute URL
    counter: int = 0

    def word(self) -> str:
        self.counter += 1
        return f"w{self.counter}x"  # a digit between letters: two glued words show as x…w

    def words(self, n: int) -> str:
        return " ".join(self.word() for _ in range(n))

    def html(self) -> str:
        body = "".join(self.parts)
        return (f"<html><head><title>Generated</title></head><body><header><a href='/'>Home</a></header>"
                f"<article><h1>Generated article</h1><p>{FILLER * 3}</p>{body}<p>{FILLER * 2}</p></article>"
                f"<footer>Footer</footer></body></html>")


@st.composite
def link(draw: st.DrawFn, page: Page) -> str:
    """A link with the space beside it inside or outside the tag, or a long label."""
    label = page.words(draw(st.sampled_from([1, 2, 3, 12])))
    same_site = draw(st.booleans())
    url = f"https://news.example.org/p/{page.counter}" if same_site else f"https://other{page.counter}.example.com/a"
    href = f"/p/{page.counter}" if same_site else url
    page.link_urls[label] = url
    space_inside_before, space_inside_after = draw(st.booleans()), draw(st.booleans())
    before = "" if space_inside_before else " "
    after = "" if space_inside_after else " "
    inner = f"{' ' if space_inside_before else ''}{label}{' ' if space_inside_after else ''}"
    wrap = draw(st.sampled_from(["{}", "<b>{}</b>", "<em>{}</em>"]))
    return f"{before}<a href=\"{href}\">{wrap.format(inner)}</a>{after}"


@st.composite
def inline(draw: st.DrawFn, page: Page) -> str:
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            pieces.append(draw(link(page)))
        else:
            pieces.append(f" {page.words(draw(st.integers(1, 6)))} ")
    return "".join(pieces).strip() or page.word()


@st.composite
def block(draw: st.DrawFn, page: Page) -> str:
    kind = draw(st.sampled_from(["p", "heading", "list", "tail", "div-text", "quote"]))
    if kind == "p":
        return f"<p>{draw(inline(page))} {page.words(12)}</p>"
    if kind == "heading":  # no space between the heading and what follows
        level = draw(st.integers(1, 4))
        return f"<h{level}>{draw(inline(page))}</h{level}><p>{page.words(10)} {draw(inline(page))}</p>"
    if kind == "list":
        items = "".join(f"<li>{draw(inline(page))}</li>" for _ in range(draw(st.integers(1, 4))))
        return f"<ul>{items}</ul>{page.words(8) if draw(st.booleans()) else ''}"
    if kind == "tail":  # loose text after a block element, inside the same container
        return f"<div><p>{page.words(10)}</p>{page.words(draw(st.integers(3, 20)))} {draw(inline(page))}</div>"
    if kind == "quote":
        return f"<blockquote>{draw(inline(page))} {page.words(8)}</blockquote>"
    return f"<div>{page.words(6)}<br>{draw(inline(page))}</div>"


@st.composite
def pages(draw: st.DrawFn) -> Page:
    page = Page()
    for _ in range(draw(st.integers(1, 6))):
        page.parts.append(draw(block(page)))
    return page


GLUED = re.compile(r"x(?:[^\sw]*)w\d")  # the end of one generated word run into the next
GENERATED_WORD = re.compile(r"(w\d+x)")


def unglued(text: str) -> str:
    """trafilatura's text with its own glued words apart (it joins the text around a block it drops)."""
    return GENERATED_WORD.sub(r" \1 ", text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(page=pages())
def test_generated_hostile_pages_keep_every_word_unglued_with_whole_resolvable_labels(page: Page) -> None:
    html = page.html()
    links = LinkTable()
    try:
        text = html_text(html, PAGE_URL, links)
    except UnreadableContent:
        assert not trafilatura_text(html, PAGE_URL).strip()
        return
    assert_markers_sound(text, links, html, PAGE_URL, "generated page")
    assert recall(text.plain, unglued(trafilatura_text(html, PAGE_URL))) >= MIN_RECALL, "words lost"
    assert not GLUED.search(text.plain), f"two words glued: {GLUED.search(text.plain)}"
    for match in LINK_MARKER_RE.finditer(text.linked):
        label = match.group(2)
        assert label in page.link_urls, f"marker label {label!r} is not a whole link label"
        assert links.get(int(match.group(1))) == page.link_urls[label]
    for label, url in page.link_urls.items():
        if f" {label} " in f" {text.plain} ".replace("\n", " "):
            assert url in links.urls, f"the link {label!r} kept in the text has no marker"


def test_heading_list_item_and_tail_text_stay_words_and_lines() -> None:
    html = ("<html><body><article><h2>OpenSSL</h2>This is the tail text that follows a heading directly. "
            f"<p>{FILLER * 3}</p><ul><li>first item</li><li>second item</li></ul>Loose words after the list."
            "<p>Read <a href='https://other.example.com/x'>a very long label that runs well past sixty characters "
            "of anchor text</a>, then continue.</p></article></body></html>")
    links = LinkTable()
    text = html_text(html, PAGE_URL, links)
    theirs = trafilatura_text(html, PAGE_URL)
    assert recall(text.plain, theirs) == 1.0 and not new_words(text.plain, theirs)
    assert "OpenSSLThis" not in text.plain and "## OpenSSL\n" in text.linked
    assert "- first item\n- second item" in text.plain
    long_label = "a very long label that runs well past sixty characters of anchor text"
    assert f"【1†{long_label}†other.example.com】, then continue." in text.linked
    excerpt = f"Read {long_label}, then continue."
    assert verified_excerpts([excerpt], text.plain) == [excerpt], "an excerpt across a long link label verifies"


async def test_extraction_runs_in_a_worker_thread_not_on_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[threading.Thread] = []
    real = extract_module.html_text

    def recording(*args: object) -> PageText:
        threads.append(threading.current_thread())
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(extract_module, "html_text", recording)
    html = (SHIPPED_PAGES / "etf-fees.html").read_bytes()
    page = Fetched(url=PAGE_URL, status=200, content_type="text/html", charset="utf-8", body=html, truncated=False)
    extracted = await extract_text(page, LinkTable())
    assert extracted.kind == "html" and extracted.text.plain
    assert threads and threads[0] is not threading.main_thread()


def test_links_resolve_against_the_page_and_footnote_links_stay_text() -> None:
    html = (f"<html><body><article><p>{FILLER * 3}</p><p>The method is described in the "
            "<a href='methods.html'>methods note</a> and the <a href='/data/'>data page</a>, with a source "
            "note<a href='#note-1'>[1]</a> and a <a href='article'>link to this same page</a>.</p></article></body></html>")
    links = LinkTable()
    text = html_text(html, PAGE_URL, links)
    assert "【1†methods note】 and the 【2†data page】" in text.linked
    assert links.urls[:2] == ["https://news.example.org/2024/methods.html", "https://news.example.org/data/"]
    assert "note[1] and a link to this same page." in text.linked, "no marker for a footnote or a self-link"
    assert len(links.urls) == 2
