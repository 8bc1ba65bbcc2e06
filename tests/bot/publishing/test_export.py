"""The report as a file: Markdown, PDF (opened again with pypdf) and Word (with python-docx) each hold the
title, every cited source's URL (written out and linked) and the footer's counts; a link the model wrote
to anywhere but a source or a Slack permalink loses its target in every format; any text a section holds
(generated: markup, XML's specials, control characters, other scripts) still makes a valid file."""
from __future__ import annotations

import io
import re
from datetime import UTC, datetime

import pytest
from docx import Document
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pypdf import PdfReader

from agent import Section, Source
from bot.publishing.export import blocks, claims_part, export_document, export_file, format_of
from jobs import Run, RunState, RunStatus

URLS = [f"https://source{i}.example.org/fact-sheets/{i}/vti-2026.pdf?share=class-{i}&year=2026" for i in range(1, 7)]


def _state(body: str = "", summary: str = "") -> RunState:
    sources = {f"s{i}": Source(marker=f"s{i}", url=url, title=f"Fact sheet {i}", passage=f"Passage {i} says 0.0{i}%.")
               for i, url in enumerate(URLS, 1)}
    sections = [
        Section(section_id="sec1", title="Fees", body=body or "**VTI** charges 0.03% [s1] and *ITOT* 0.03% [s2].\n\n"
                "- SCHB: 0.03% [s3]\n- see [the issuer](https://evil.example/collect?d=secret) and "
                "[the fact sheet](" + URLS[3] + ") [s4]"),
        Section(section_id="sec2", title="Tracking", body="1. First [s5]\n2. Second [s6]\n\n> quoted\n\n`code`"),
    ]
    run = Run(id="run0export01", team="T1", channel="C1", thread_ts="1.1", requester="U1",
              question="Compare the fees of VTI, ITOT and SCHB")
    return RunState(run=run, status=RunStatus.completed, sections=sections, sources=sources,
                    summary=summary or "In short: all three charge 0.03% [s1].", finished_at=datetime(2026, 11, 12, tzinfo=UTC))


def _text(fmt: str, content: bytes) -> str:
    if fmt == "pdf":
        return "".join(page.extract_text() for page in PdfReader(io.BytesIO(content)).pages)
    if fmt == "docx":
        return "\n".join(p.text for p in Document(io.BytesIO(content)).paragraphs)
    return content.decode()


def _links(fmt: str, content: bytes) -> set[str]:
    if fmt == "pdf":
        return {str(a.get_object()["/A"].get("/URI")) for page in PdfReader(io.BytesIO(content)).pages
                for a in page.get("/Annots") or [] if "/A" in a.get_object()}
    if fmt == "docx":
        rels = Document(io.BytesIO(content)).part.rels.values()
        return {r.target_ref for r in rels if r.is_external}
    return set(re.findall(r"\]\((https?://[^)\s]+)\)", content.decode()))


@pytest.mark.parametrize("fmt", ["md", "pdf", "docx"])
def test_each_format_holds_the_title_every_source_url_and_the_counts(fmt: str) -> None:
    state = _state()
    file = export_file(state, format_of(fmt))  # type: ignore[arg-type]
    assert file.filename == f"deepthread-compare-the-fees-of-vti-itot-and-schb.{fmt}"
    text = _text(fmt, file.content)
    flat = "".join(text.split())
    assert "ComparethefeesofVTI,ITOTandSCHB" in flat
    for url in URLS:
        assert url in flat, f"{url} written out"
    assert set(URLS) <= _links(fmt, file.content), "and linked"
    assert "2sections·6sources" in flat and "runrun0export01" in flat, "the footer's counts"
    assert "0.03%" in text and "Tracking" in text


@pytest.mark.parametrize("fmt", ["md", "pdf", "docx"])
def test_a_link_the_model_composed_loses_its_target_and_keeps_its_words(fmt: str) -> None:
    file = export_file(_state(), fmt)  # type: ignore[arg-type]
    if fmt == "md":
        assert "evil.example/collect" not in file.content.decode(), "not even as text to click in a viewer"
    assert not any("evil.example" in link for link in _links(fmt, file.content))
    assert "the issuer" in _text(fmt, file.content)
    assert URLS[3] in _links(fmt, file.content), "a source's link stays live"


def test_markdown_reads_into_blocks_of_runs_for_the_pdf_and_word_writers() -> None:
    read = blocks("## Head\n\nSome **bold** and [a link](https://a.test/) text.\n\n- one\n  - two\n1. first\n\n| a | b |\n|---|---|\n| 1 | 2 |")
    kinds = [(b.kind, b.bullet, b.depth) for b in read]
    assert kinds[:2] == [("heading", "", 0), ("paragraph", "", 0)]
    assert ("item", "•", 0) in kinds and ("item", "•", 1) in kinds and ("item", "1.", 0) in kinds
    paragraph = read[1].runs
    assert any(r.bold and r.text == "bold" for r in paragraph) and any(r.href == "https://a.test/" for r in paragraph)
    assert "".join(r.text for r in read[-1].runs) == "1 · 2", "a table row, its cells joined"


def _checked_state() -> RunState:
    """Fees: its first sentence held by the source sentence that says it, its second kept unsupported."""
    from agent.claims.models import Anchor, ClaimCheck

    state = _state(body="VTI charges 0.03% a year [s1]. SCHB is the oldest of the three [s3].")
    body = state.sections[0].body
    second = body.index("SCHB")
    claims = [
        ClaimCheck(start=0, end=second - 1, markers=["s1"], verdict="supported", by="rules",
                   anchors=[Anchor(marker="s1", where="passage", start=0, end=20, quote="Passage 1 says 0.01%.",
                                   score=0.9)]),
        ClaimCheck(start=second, end=len(body), markers=["s3"], verdict="unsupported", by="judge", marked=True,
                   anchors=[Anchor(marker="s3", where="passage", start=0, end=20, quote="Passage 3 says 0.03%.",
                                   score=0.2)], differs="nothing about its age"),
    ]
    sections = [state.sections[0].model_copy(update={"claims": claims}), *state.sections[1:]]
    return state.model_copy(update={"sections": sections})


def test_no_claim_checked_adds_nothing_to_the_export() -> None:
    part = claims_part(_state())
    assert part.anchors == {} and part.counts == ""
    assert all(section.anchors == [] for section in export_document(_state()).sections)


@pytest.mark.parametrize("fmt", ["md", "pdf", "docx"])
def test_every_format_carries_each_cited_sentences_anchor_its_mark_and_the_claim_counts(fmt: str) -> None:
    state = _checked_state()
    doc = export_document(state)
    fees = next(section for section in doc.sections if section.section_id == "sec1")
    assert len(fees.anchors) == 2 and "supported by: [1] “Passage 1 says 0.01%.”" in fees.anchors[0]
    assert fees.anchors[1].startswith("⚠ “SCHB is the oldest of the three.”") and "not found in" in fees.anchors[1]
    assert "2 cited claims checked against their sources · 1 not supported" in doc.footer
    text = " ".join(_text(fmt, export_file(state, fmt).content).split())
    for expected in ("Passage 1 says 0.01%", "SCHB is the oldest of the three", "not found in",
                     "2 cited claims checked against their sources"):
        assert expected in text.replace("\\", ""), (fmt, expected)


HOSTILE = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=300) | st.sampled_from(
    ["<b>not</b> & <a href='x'>", "\x00\x01\x0b control", "東京 → ≈ ∑ مرحبا", "]]> <![CDATA[", "[s1] [s99] **", "```\nfenced\n"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(HOSTILE, HOSTILE)
def test_any_text_makes_a_valid_file_in_every_format(body: str, summary: str) -> None:
    state = _state(body=body + " [s1]", summary=summary)
    for fmt in ("md", "pdf", "docx"):
        content = export_file(state, fmt).content  # type: ignore[arg-type]
        text = _text(fmt, content)
        assert URLS[0] in "".join(text.split())
