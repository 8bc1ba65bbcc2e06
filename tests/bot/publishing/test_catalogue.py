"""The bot's own words in a thread come in the question's language (bot/catalogue.py): the progress
message, the report's status line, headings and footer; English and German are translated."""
from __future__ import annotations

import pytest

from agent import Finished, Progress, SectionWritten, Source, SourceAdded, UsageRecorded
from bot.catalogue import CATALOGUES, DE, EN
from bot.publishing.progress_render import render_progress
from bot.publishing.report_render import render_report
from jobs import Run, RunState
from jobs.records.state import apply_event

QUESTIONS = {"en": "What is the expense ratio of VTI?", "de": "Wie hoch ist die Kostenquote von VTI?"}
SOURCE = Source(marker="s1", url="https://www.example.org/vti", title="VTI fact sheet",
                passage="The expense ratio of VTI is 0.03% as of 2026.")


def state_of(question: str, *events: object) -> RunState:
    state = RunState(run=Run(channel="C0", thread_ts="1700000000.000001", requester="U0ANA", question=question,
                             team="T0"))
    for event in events:
        state = apply_event(state, event)  # type: ignore[arg-type]
    return state


def running(question: str) -> RunState:
    return state_of(question, Progress(phase="researching", activity="Reading example.org: the fee"),
                    SourceAdded(source=SOURCE),
                    UsageRecorded(requests=3, input_tokens=9000, output_tokens=500, cost_usd=0.8412,
                                  profile="standard", requests_left=77, minutes_left=54))


def test_a_german_question_gets_german_progress_words() -> None:
    text = render_progress(running(QUESTIONS["de"])).text
    first = text.splitlines()[0]
    assert first.startswith("🔎 Recherche läuft · ") and "3 Modellanfragen · 1 Quelle" in first
    assert "Budget standard · noch 54 Min. · 77 Modellanfragen" in first
    assert "\nJetzt: Lese example.org: the fee" in text  # the engine's line in German, its goal as written
    assert DE["steer"] in text and EN["steer"] not in text


def test_an_english_question_keeps_the_english_words() -> None:
    text = render_progress(running(QUESTIONS["en"])).text
    assert text.splitlines()[0].startswith("🔎 Researching · ") and "3 model requests · 1 source" in text
    assert "standard budget · 54 min · 77 model requests left" in text and EN["steer"] in text


@pytest.mark.parametrize(("code", "summary", "sources", "footer", "cost"), [
    ("en", "*Summary*", "*Sources*", "Asked by <@U0ANA> · ", "est. $0.84"),
    ("de", "*Zusammenfassung*", "*Quellen*", "Gefragt von <@U0ANA> · ", "ca. 0,84 $"),
])
def test_the_report_headings_status_and_footer_follow_the_question(code: str, summary: str, sources: str,
                                                                   footer: str, cost: str) -> None:
    state = state_of(QUESTIONS[code], SourceAdded(source=SOURCE),
                     SectionWritten(section_id="sec1", title="Fees", body="0.03% [s1]."),
                     UsageRecorded(requests=3, input_tokens=9000, output_tokens=500, cost_usd=0.8412),
                     Finished(status="completed", summary="0.03% [s1].", reason=""))
    message = render_report(state)
    texts = [b["text"]["text"] if b["type"] == "section" else b["elements"][0]["text"] for b in message.blocks
             if b["type"] not in ("context_actions", "actions")]
    joined = "\n".join(texts)
    assert summary in joined and sources in joined
    assert texts[-1].startswith(footer) and cost in texts[-1]
    assert texts[1].startswith("Final · 1 section · " if code == "en" else "Endgültig · 1 Abschnitt · ")


def test_every_catalogue_has_every_key() -> None:
    for code, words in CATALOGUES.items():
        assert set(words) == set(EN), code
