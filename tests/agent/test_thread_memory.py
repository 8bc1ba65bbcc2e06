"""Thread memory: a continuation's opening carries the thread within a fixed budget."""
from __future__ import annotations

import json

from agent import ResearchTask
from agent.events import Source
from agent.report import Revision, Section
from agent.task import PriorRun, first_message
from agent.thread_memory import OPENING_BUDGET_CHARS, ThreadSummary, roll
from agent.tools.open_section import OpenSection, OpenSectionInput

QUESTION = "Compare the fees and tracking error of VTI, ITOT and SCHB. Only sources after 2020."


def scripted_thread(runs: int, section_chars: int = 3_000) -> ResearchTask:
    """The task of run `runs` in a thread where every earlier run wrote or revised long sections."""
    summary: ThreadSummary | None = None
    follow_ups: list[str] = []
    sections: dict[str, Section] = {}
    sources = [Source(marker=f"s{i}", url=f"https://example.org/{i}", title=f"Source {i}", passage=f"p{i}")
               for i in range(1, 40 * runs + 1)]
    answer = ""
    for n in range(1, runs):
        marker = f"[s{n * 3}]"
        sid = f"sec{n}"
        sections[sid] = Section(section_id=sid, title=f"Aspect {n}",
                                body=f"Aspect {n} was established in run {n} {marker}. " + "Detail. " * (section_chars // 8))
        if n > 1:
            sections["sec1"].revisions.append(Revision(body="old", reason=f"run {n} correction"))
        answer = f"Run {n} found that aspect {n} holds {marker}. Run {n} could not settle aspect {n + 1}."
        handoff = json.dumps({"established_facts": [{"claim": f"Interim fact of run {n}", "handle": marker}],
                              "dead_ends": [{"approach": f"forum search {n}", "why_failed": "no primary sources"}],
                              "open_questions": [f"aspect {n + 1}"], "current_state": "", "next_action": ""})
        summary = roll(summary, answer, [f"<summary>{handoff}</summary>"])
        if n > 1:
            follow_ups.append(f"Follow-up {n}: also check aspect {n} for 2024 only")
    prior = PriorRun(run_id=f"run{runs - 1}", summary=answer, sections=list(sections.values()), sources=sources,
                     thread_summary=summary, follow_ups=follow_ups[:-1] if follow_ups else [], runs_before=runs - 1)
    return ResearchTask(question=QUESTION, constraints=["Only sources after 2020"], prior=prior,
                        follow_up=follow_ups[-1] if follow_ups else "go on")


def test_the_opening_stays_within_its_budget_as_the_thread_grows() -> None:
    sizes = {n: len(first_message(scripted_thread(n))) for n in (2, 5, 10, 30)}
    print(f"\nopening size in characters by run (budget {OPENING_BUDGET_CHARS:,} + task): {sizes}")
    assert all(size <= OPENING_BUDGET_CHARS + 2_000 for size in sizes.values()), sizes
    assert sizes[30] <= OPENING_BUDGET_CHARS + 2_000


def test_run_ten_opening_carries_question_constraints_follow_ups_outline_and_summary() -> None:
    opening = first_message(scripted_thread(10))
    assert QUESTION in opening and "- Only sources after 2020" in opening
    for n in range(2, 9):
        assert f"Follow-up {n}: also check aspect {n} for 2024 only" in opening, n
    for n in range(1, 10):
        assert f'- sec{n} "Aspect {n}"' in opening
    assert '- sec1 "Aspect 1" (revised ×8)' in opening
    assert "Aspect 1 was established in run 1 [s3]." in opening, "the outline keeps the first sentence"
    assert "Detail. Detail." not in opening, "section bodies stay behind open_section"
    assert "Run 1 found that aspect 1 holds [s3]" in opening, "run 1's fact, with its marker, reaches run 10"
    assert "forum search 1: no primary sources" in opening
    assert "https://example.org/" not in opening, "sources are counted, not listed"


def test_a_restated_fact_replaces_the_older_one_and_caps_keep_the_newest() -> None:
    summary = roll(None, "VTI costs 0.03% [s1].", [])
    summary = roll(summary, "VTI costs 0.03% [s7].", [])
    assert [(f.claim, f.markers) for f in summary.facts] == [("VTI costs 0.03% [s7].", ["s7"])]
    for n in range(100):
        summary = roll(summary, f"Fact number {n} [s{n}].", [])
    assert len(summary.facts) == 40 and summary.facts[-1].claim == "Fact number 99 [s99]."


async def test_open_section_returns_the_full_text_and_why_it_was_revised() -> None:
    class Ctx:
        sections = {"sec1": Section(section_id="sec1", title="Fees", body="VTI costs 0.03% [s1].",
                                    revisions=[Revision(body="old", reason="ITOT figure was from 2019")])}

    result = await OpenSection().run(OpenSectionInput(section_id="sec1"), Ctx())  # type: ignore[arg-type]
    assert "VTI costs 0.03% [s1]." in result.text and "ITOT figure was from 2019" in result.text
    missing = await OpenSection().run(OpenSectionInput(section_id="sec9"), Ctx())  # type: ignore[arg-type]
    assert missing.is_error and "sec1 (Fees)" in missing.text
