"""The team's language: the run writes in the question's language, numbers as that language writes
them, and its figures still match the passages they cite (a German "0,03 %" is the English page's
"0.03%"). Shown with a scripted model in English and German."""
from __future__ import annotations

import pytest
from anthropic import AsyncAnthropic

from agent import AgentConfig, FetchConfig, ResearchTask, RunEvent, SearchConfig, research
from agent.events import SectionWritten
from agent.figures import check_sentence
from agent.language import detect
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import LanguagePolicy, is_extraction

QUESTIONS = {
    "en": ("What is the expense ratio of VTI?", "Language: English", "The expense ratio stated is 0.03% ["),
    "de": ("Wie hoch ist die Kostenquote von VTI?", "Language: German (Deutsch)",
           "Die angegebene Kostenquote beträgt 0,03 % ["),
}


@pytest.mark.parametrize("code", sorted(QUESTIONS))
async def test_the_report_is_written_in_the_questions_language_and_its_figures_still_match(
        code: str, fake_model: FakeAnthropic, fake_web) -> None:
    question, opening, section = QUESTIONS[code]
    fake_model.policy = LanguagePolicy()
    events: list[RunEvent] = []

    async def emit(event: RunEvent) -> None:
        events.append(event)

    config = AgentConfig(search=SearchConfig(provider="searxng", searxng_url=fake_web.url),
                         fetch=FetchConfig(allow=["127.0.0.1"]))
    async with AsyncAnthropic(api_key="k", base_url=fake_model.url) as client:
        outcome = await research(ResearchTask(question=question), config, anthropic=client, emit=emit)
    first = next(r for r in fake_model.requests if not is_extraction(r) and "tools" in r)
    assert opening in first["messages"][0]["content"][0]["text"]
    written = [e for e in events if isinstance(e, SectionWritten)]
    assert len(written) == 1 and written[0].body.startswith(section), [e.body for e in written]
    # Saved at once (not refused) and with no figure flagged: 0,03 % is the page's 0.03%.
    assert written[0].flags == [] and written[0].figures_checked == 1
    assert outcome.status == "completed" and ("0,03 %" if code == "de" else "0.03%") in outcome.summary


@pytest.mark.parametrize(("question", "code"), [
    ("Compare the fees and tracking error of VTI, ITOT and SCHB.", "en"),
    ("Vergleiche die Kosten und den Tracking-Fehler von VTI, ITOT und SCHB.", "de"),
    ("Wie hoch ist die Kostenquote von VTI?", "de"),
    ("Quel est le ratio de frais de VTI ?", "fr"),
    ("¿Cuál es la comisión de VTI?", "es"),
    ("Die Hard box office in the US", "en"),
    ("VTI", "en"),
])
def test_the_language_of_a_question_is_told_apart(question: str, code: str) -> None:
    assert detect(question).code == code


@pytest.mark.parametrize(("sentence", "passage", "missing"), [
    ("Die Kostenquote beträgt 0,03 % [s1].", "Expense ratio 0.03% as of 2026", []),
    ("Die Kostenquote beträgt 0,05 % [s1].", "Expense ratio 0.03% as of 2026", ["0,05 %"]),
    ("Das Fondsvermögen beträgt 1.234,5 Mio. USD [s1].", "Net assets of 1,234.5 million", []),
    ("Die Kostenquote beträgt 0,03 Prozent [s1].", "Die Gesamtkostenquote beträgt 0,03 %.", []),
])
def test_a_german_figure_is_checked_against_its_passage_in_either_convention(
        sentence: str, passage: str, missing: list[str]) -> None:
    verdict = check_sentence(sentence, {"s1": passage}, [], decimal=",")
    assert [f.text for f in verdict.missing] == missing
