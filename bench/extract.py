"""Page extraction on the 43 real saved pages: what our text-with-link-markers costs and keeps,
measured against plain trafilatura in the same run.

    .venv/bin/python -m bench.extract [--repeats 3] [--per-page]

Per page: extraction time (ours: one linked trafilatura extraction whose tree gives both the
text and the link markers, plus marker placement; theirs: `trafilatura.extract`, plain text),
word recall of our text against trafilatura's plain text, words glued together (a word of ours
that is two adjacent words of theirs: the space beside a link lost), tokens of our text with markers against trafilatura's Markdown with
raw links, and the share of sentences of our text that read_page's excerpt check accepts
verbatim (the model copies sentences, markers and all, from the text it is shown).
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import trafilatura

from agent.context.tokens import CHARS_PER_TOKEN
from agent.tools.extract import TRAFILATURA_OPTIONS, UnreadableContent, html_text
from agent.tools.links import LINK_MARKER_RE, LinkTable, strip_markers
from agent.tools.page_text import PageText
from agent.tools.read_page import verified_excerpts

from .common import percentile, report_checks

PAGES = Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures" / "pages"
MIN_RECALL = 0.999
# One extraction with links plus marker placement, against trafilatura's plain extraction.
MAX_TIME_RATIO = 1.3
# Shorter passages (after trimming quotes) are ignored by the excerpt check itself (read_page),
# so they are not sampled.
MIN_EXCERPT_CHARS = 12
EXCERPT_TRIM = " …\"'"
# A sentence ends at . ! ? or their CJK forms followed by space, or at a line break.
SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")
# A tokenizer-like count that works across scripts: a Latin word or digit run is one token,
# every other non-space character (CJK, punctuation, URL separators) one each.
TOKEN_PIECE = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")


@dataclass
class PageFigures:
    name: str
    ours_ms: float
    theirs_ms: float
    recall: float
    glued: int  # words of ours that are two adjacent words of trafilatura's text run together
    extra: int  # other words of ours its plain text lacks (lines the linked extraction keeps)
    markers: int
    tokens_ours: int
    tokens_markdown: int
    chars_ours: int
    chars_markdown: int
    sentences: int
    verbatim: int


def _words(text: str) -> Counter[str]:
    return Counter(text.split())


def _tokens(text: str) -> int:
    return len(TOKEN_PIECE.findall(text))


def _sentences(linked: str) -> list[str]:
    """Sentences as the model would copy them: a marker is never cut (its label may hold a full stop)."""
    inside = [(m.start(), m.end()) for m in LINK_MARKER_RE.finditer(linked)]
    cuts = [m for m in SENTENCE_END.finditer(linked) if not any(a < m.start() < b for a, b in inside)]
    starts = [0, *(m.end() for m in cuts)]
    ends = [*(m.start() for m in cuts), len(linked)]
    return [linked[a:b] for a, b in zip(starts, ends)]


def _timed_theirs(html: bytes, url: str) -> tuple[float, str]:
    started = time.perf_counter()
    text = trafilatura.extract(html, url=url, **TRAFILATURA_OPTIONS) or ""
    return (time.perf_counter() - started) * 1000, text


def _timed_ours(html: bytes, url: str) -> tuple[float, PageText | None]:
    started = time.perf_counter()
    try:
        text: PageText | None = html_text(html, url, LinkTable())
    except UnreadableContent:
        text = None
    return (time.perf_counter() - started) * 1000, text


def measure(name: str, html: bytes, url: str, repeats: int) -> PageFigures | None:
    ours_ms: list[float] = []
    theirs_ms: list[float] = []
    text: PageText | None = None
    theirs = ""
    for _ in range(repeats):  # interleaved, so a busy moment of the machine hits both alike
        elapsed, theirs = _timed_theirs(html, url)
        theirs_ms.append(elapsed)
        elapsed, text = _timed_ours(html, url)
        ours_ms.append(elapsed)
    if text is None:
        return None  # no article (status page, paywall stub): nothing to compare
    wanted, got = _words(theirs), _words(text.plain)
    total = sum(wanted.values())
    sequence = theirs.split()
    pairs = {a + b for a, b in zip(sequence, sequence[1:], strict=False)}
    unmatched = [word for word in (got - wanted).elements() if set(word) != {"#"}]
    markdown = trafilatura.extract(html, url=url, output_format="markdown", include_links=True, **TRAFILATURA_OPTIONS) or ""
    sentences = [s for s in _sentences(text.linked) if len(" ".join(strip_markers(s).split()).strip(EXCERPT_TRIM)) >= MIN_EXCERPT_CHARS]
    verbatim = sum(1 for s in sentences if verified_excerpts([s], text.plain) != [])
    return PageFigures(
        name=name, ours_ms=statistics.median(ours_ms), theirs_ms=statistics.median(theirs_ms),
        recall=sum((wanted & got).values()) / total if total else 1.0,
        glued=sum(1 for word in unmatched if word in pairs),
        extra=sum(1 for word in unmatched if word not in pairs),
        markers=len(LINK_MARKER_RE.findall(text.linked)),
        tokens_ours=_tokens(text.linked), tokens_markdown=_tokens(markdown),
        chars_ours=len(text.linked), chars_markdown=len(markdown),
        sentences=len(sentences), verbatim=verbatim,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed extractions per page (the median counts)")
    parser.add_argument("--per-page", action="store_true", help="also print one row per page")
    args = parser.parse_args()
    if not (PAGES / "index.json").exists():
        print(f"no pages at {PAGES}: this bench needs ../shared/fixtures/pages beside the checkout")
        return 2
    entries = json.loads((PAGES / "index.json").read_text())["pages"]
    figures: list[PageFigures] = []
    skipped: list[str] = []
    for entry in entries:
        found = measure(entry["file"], (PAGES / entry["file"]).read_bytes(), entry["url"] or "https://example.org/",
                        args.repeats)
        if found is None:
            skipped.append(entry["file"])
        else:
            figures.append(found)

    if args.per_page:
        print(f"\n  {'page':<42} {'ours ms':>8} {'traf ms':>8} {'recall':>7} {'markers':>7} {'tokens':>13} {'verbatim':>9}")
        for f in figures:
            print(f"  {f.name[:42]:<42} {f.ours_ms:8.1f} {f.theirs_ms:8.1f} {f.recall:7.4f} {f.markers:7d} "
                  f"{f.tokens_ours:6d}/{f.tokens_markdown:<6d} {f.verbatim:4d}/{f.sentences:<4d}")

    ours = [f.ours_ms for f in figures]
    theirs = [f.theirs_ms for f in figures]
    worst = min(figures, key=lambda f: f.recall)
    tokens_ours, tokens_md = sum(f.tokens_ours for f in figures), sum(f.tokens_markdown for f in figures)
    chars_ours, chars_md = sum(f.chars_ours for f in figures), sum(f.chars_markdown for f in figures)
    sentences, verbatim = sum(f.sentences for f in figures), sum(f.verbatim for f in figures)
    glued = sum(f.glued for f in figures)
    extra = sum(f.extra for f in figures)
    checks = [
        ("extraction time, median", (f"{statistics.median(ours):.1f} ms vs trafilatura.extract "
                                     f"{statistics.median(theirs):.1f} ms "
                                     f"(× {statistics.median(ours) / statistics.median(theirs):.2f})"),
         statistics.median(ours) / statistics.median(theirs) <= MAX_TIME_RATIO, f"≤ {MAX_TIME_RATIO}×"),
        ("extraction time, p95", (f"{percentile(ours, 95):.1f} ms vs {percentile(theirs, 95):.1f} ms "
                                  f"(× {percentile(ours, 95) / percentile(theirs, 95):.2f})"), True, "measured"),
        ("word recall vs trafilatura text, min", f"{worst.recall:.4f} ({worst.name})", worst.recall >= MIN_RECALL,
         f"≥ {MIN_RECALL} on every page"),
        ("words glued together (a link's space lost)", str(glued), glued == 0, "0"),
        ("other words not in trafilatura's plain text", f"{extra:,}", True, "measured"),
        ("tokens, markers vs Markdown raw links", (f"{tokens_ours:,} / {tokens_md:,} = {tokens_ours / tokens_md:.2f} "
                                                   f"(chars/{CHARS_PER_TOKEN}: {chars_ours / chars_md:.2f}); "
                                                   f"{sum(f.markers for f in figures):,} markers"), True, "measured"),
        ("sentences verified verbatim", f"{verbatim:,} / {sentences:,} = {verbatim / sentences:.1%}",
         verbatim == sentences, "100%"),
    ]
    print(f"\nextract bench — {len(figures)} pages with article text ({len(skipped)} without: {', '.join(skipped) or '-'}), "
          f"{args.repeats} timed runs each\n")
    return report_checks(checks)


if __name__ == "__main__":
    sys.exit(main())
