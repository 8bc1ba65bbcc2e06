"""The bot's own words come in the team's language on every surface that shows them: the progress
message (its activity lines, the engine's words too), the progress stream's cards, the report (its
status line, footer with the figure check and the next re-check, source and chart lines), the
`sources` and `source N` replies and the help reply. Generated: for each language the bot speaks
and reports of every shape, whose own text (titles, passages, queries, goals) holds no English,
no English word of the catalogue is left in what is shown. And Japanese and Chinese are told apart
(from the saved pages in ../shared/fixtures when they are here, and from sentences of our own)."""
from __future__ import annotations

import json
import re
import string
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent import ACTIVITY, BRANCH_STATES, Finished, Progress, SectionWritten, Source, SourceAdded, UsageRecorded
from agent.activity import say
from agent.events import ConstraintsFound, Disagreement
from agent.figures import FigureFlag
from agent.language import detect
from bot.activity_words import ACTIVITY_WORDS, BRANCH_WORDS
from bot.catalogue import CATALOGUES, EN, NOUNS, words_for
from bot.publishing.progress_render import render_help, render_progress
from bot.publishing.report_render import render_report
from bot.publishing.stream_render import render_view
from bot.surface.evidence import source_reply, sources_reply
from jobs import Run, RunState, RunStatus
from jobs.records.state import apply_event
from tests.paths import SHARED_PAGES

QUESTIONS = {
    "en": "Compare the expense ratios of VTI, ITOT and SCHB.",
    "de": "Vergleiche die Kostenquoten von VTI, ITOT und SCHB.",
    "ja": "VTI、ITOT、SCHBの経費率を比較してください。",
    "zh": "比较VTI、ITOT和SCHB的费用率。",
}
FETCHED = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)
# The run's own text (what the model and the pages wrote) drawn with no Latin letter in it, so any
# English word in what is shown is the bot's.
OWN_TEXT = st.text(alphabet="0123456789 .,%()経費率比较费用株式基金指数出典", min_size=1, max_size=30).map(str.strip).filter(bool)
_WORD = re.compile(r"[A-Za-z]{3,}")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(re.sub(r"\{\w+\}", " ", text))}


ENGLISH = set().union(*(_words(v) for v in [*EN.values(), *ACTIVITY.values(), *BRANCH_STATES.values()]))


def _own_words(code: str) -> set[str]:
    """English-looking words the language's own catalogue uses (command names, `Go deeper`, UTC)."""
    texts = [*CATALOGUES[code].values(), *ACTIVITY_WORDS.get(code, {}).values(), *BRANCH_WORDS.get(code, {}).values()]
    return set().union(*(_words(t) for t in texts), *(_words(" ".join(n)) for n in NOUNS[code].values()))


@st.composite
def reports(draw: st.DrawFn, question: str) -> RunState:
    """A run of `question` with sources (excerpts and snippets), sections (some figures flagged), usage,
    an activity line of any kind, a disagreement, constraints and maybe a scheduled re-check."""
    state = RunState(run=Run(channel="C0TEST", thread_ts="1700000000.000001", requester="U0ANA", question=question,
                             team="T0TEST", parent_run_id=draw(st.sampled_from([None, "1a2b3c4d5e6f"]))))
    count = draw(st.integers(1, 4))
    events: list[object] = [
        SourceAdded(source=Source(marker=f"s{n}", url=f"https://10.0.0.{n}/{n}", title=draw(OWN_TEXT),
                                  passage=draw(OWN_TEXT), retrieved_at=FETCHED,
                                  kind=draw(st.sampled_from(["excerpt", "snippet"]))))
        for n in range(1, count + 1)
    ]
    for n in range(1, count + 1):
        flags = [FigureFlag(figure="0.0", sentence="0.0", markers=[], why="0")] if draw(st.booleans()) else []
        events.append(SectionWritten(section_id=f"sec{n}", title=draw(OWN_TEXT), body=f"{draw(OWN_TEXT)} [s{n}]",
                                     figures_checked=draw(st.integers(0, 40)), flags=flags))
    kind = draw(st.sampled_from(sorted(set(ACTIVITY) - {"board", "branch"})))
    values = {name: draw(OWN_TEXT) for name in string.Formatter().parse(ACTIVITY[kind]) for name in [name[1]] if name}
    activity = say(kind, **values)
    if draw(st.booleans()):  # task agents: the board, each agent's line an activity of its own
        branches = [say("branch", number=i, label=draw(OWN_TEXT),
                        state=draw(st.sampled_from([*BRANCH_STATES.values(), activity]))) for i in (1, 2)]
        activity = say("board", done=1, running=1, branches=" · ".join(branches))
    events += [
        Progress(phase="researching", activity=activity),
        Disagreement(text=draw(OWN_TEXT)),
        ConstraintsFound(constraints=[draw(OWN_TEXT)], added=[]),
        UsageRecorded(requests=draw(st.integers(1, 90)), input_tokens=9000, output_tokens=500, cost_usd=0.84,
                      profile="standard", requests_left=40, minutes_left=30),
    ]
    for event in events:
        state = apply_event(state, event)  # type: ignore[arg-type]
    if draw(st.booleans()):
        state.next_check = FETCHED + timedelta(days=7)
    return state


def _read(blocks: object) -> str:
    """What a reader sees of Block Kit (or stream chunks): their texts, titles, details and labels,
    not ids, values or types."""
    if isinstance(blocks, dict):
        return "\n".join(v if isinstance(v, str) and k in ("text", "title", "details", "accessibility_label")
                         else _read(v) for k, v in blocks.items() if not isinstance(v, str) or k in
                         ("text", "title", "details", "accessibility_label"))
    if isinstance(blocks, list):
        return "\n".join(_read(b) for b in blocks)
    return ""


def _shown(state: RunState) -> dict[str, str]:
    """Every text a reader is shown of this run, running and ended."""
    ended = apply_event(state, Finished(status="completed", summary=f"{state.sections[0].body}", reason=""))
    queued = state.model_copy(update={"status": RunStatus.queued})
    return {
        "progress": render_progress(state).text,
        "progress when queued": render_progress(queued).text,
        "progress when done": render_progress(ended).text,
        "stream": _read([*render_view(state).tasks.values()]) + "\n".join(render_view(state).texts.values()),
        "report": _read(render_report(state).blocks),
        "report when final": _read(render_report(ended).blocks),
        "report when queued": _read(render_report(queued).blocks),
        "sources": sources_reply(ended),
        "source 1": source_reply(ended, 1),
        "no such footnote": source_reply(ended, 99),
        "help": render_help(words_for(state.run.question)),
    }


@pytest.mark.parametrize("code", ["de", "ja", "zh"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_word_the_bot_shows_comes_from_the_catalogue_in_the_teams_language(code: str, data: st.DataObject) -> None:
    state = data.draw(reports(QUESTIONS[code]))
    # The question's tickers, the requester's id, the stop reaction's name, the budget profile's and the
    # export buttons' file formats (PDF, Word, Markdown) are names, not the bot's words.
    allowed = _own_words(code) | {"vti", "itot", "schb", "ana", "octagonal", "sign", "standard", "pdf", "word",
                                  "markdown"}
    for where, text in _shown(state).items():
        english = sorted(_words(text) & ENGLISH - allowed)
        assert not english, f"{code} {where}: English words {english} in {text[:400]!r}"


def test_english_stays_english() -> None:
    text = render_progress(apply_event(RunState(run=Run(channel="C0", thread_ts="1.1", question=QUESTIONS["en"])),
                                       Progress(phase="researching", activity=say("searching", query="vti fees")))).text
    assert "Now: Searching: vti fees" in text


def test_every_language_has_every_word_with_the_same_blanks() -> None:
    def blanks(template: str) -> set[str]:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name}

    for code, words in CATALOGUES.items():
        assert set(words) == set(EN), code
        if code != "en":  # each word translated: only a command's name stays as it is typed
            assert {k for k, v in words.items() if v == EN[k]} <= {"go_deeper"}, code
        assert {k: blanks(v) for k, v in words.items()} == {k: blanks(v) for k, v in EN.items()}, code
        assert set(NOUNS[code]) == set(NOUNS["en"]), code
    for code, templates in ACTIVITY_WORDS.items():
        assert set(templates) == set(ACTIVITY), code
        assert {k for k, v in templates.items() if v == ACTIVITY[k]} <= {"branch"}, code
        assert {k: blanks(v) for k, v in templates.items()} == {k: blanks(v) for k, v in ACTIVITY.items()}, code
        assert set(BRANCH_WORDS[code]) == set(BRANCH_STATES.values()), code
    assert set(CATALOGUES) - {"en"} == set(ACTIVITY_WORDS), "a language the bot speaks has the engine's lines too"


@pytest.mark.parametrize(("text", "code"), [
    ("VTI、ITOT、SCHBの経費率と追跡誤差を比較してください。", "ja"),
    ("日経平均株価の過去10年の推移は?", "ja"),
    ("比较VTI、ITOT和SCHB的费用率和跟踪误差。", "zh"),
    ("沪深300指数基金的费用是多少?", "zh"),
    ("What does 日本 mean in English?", "en"),
    ("한국 주식 시장의 수수료는?", "en"),  # Korean: neither (no words of its own here)
])
def test_japanese_and_chinese_are_told_apart(text: str, code: str) -> None:
    assert detect(text).code == code
    if code in ("ja", "zh"):
        assert words_for(text).code == code


FIXTURES = SHARED_PAGES


def _fixture_pages() -> list[tuple[str, str]]:
    index = FIXTURES / "index.json"
    if not index.exists():
        return []
    pages = json.loads(index.read_text(encoding="utf-8"))["pages"]
    return [(p["file"], p["language"]) for p in pages if p["language"] in ("ja", "zh", "ko", "en", "de")]


@pytest.mark.skipif(not _fixture_pages(), reason="the shared fixtures are not on this machine")
@pytest.mark.parametrize(("page", "code"), _fixture_pages() or [("", "")])
def test_the_saved_pages_languages_are_told_apart(page: str, code: str) -> None:
    import trafilatura

    text = trafilatura.extract((FIXTURES / page).read_bytes().decode("utf-8", "replace")) or ""
    found = detect(text[:2000]).code
    if code in ("ja", "zh"):
        assert found == code, page
    else:
        assert found not in ("ja", "zh"), page
