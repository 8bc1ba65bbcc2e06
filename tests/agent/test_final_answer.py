"""The published summary is the answer only: the model's reflection never reaches the report."""
from __future__ import annotations

from typing import Any

from agent import Finished
from agent.answer import final_answer
from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply
from tests.fakes.policies import ResearchPolicy
from tests.helpers import research_events

REFLECTION = ("Found: VTI 0.03% [s1]; SCHB 0.03%.\n"
              "Missing: ITOT's 2025 figure.\n"
              "Enough? Yes for the question as asked.\n"
              "Next: write the answer.\n")


def test_tagged_answer_is_published_without_the_text_around_it() -> None:
    answer = final_answer(REFLECTION + "<summary>\nVTI costs 0.03% a year [s1].\n</summary>\nDone.")
    assert (answer.summary, answer.shape) == ("VTI costs 0.03% a year [s1].", "tagged")


def test_the_last_of_several_drafts_wins() -> None:
    answer = final_answer("<summary>draft</summary> on reflection… <summary>VTI costs 0.03% [s1].</summary>")
    assert answer.summary == "VTI costs 0.03% [s1]."


def test_an_answer_cut_off_before_its_closing_tag_keeps_what_was_written() -> None:
    answer = final_answer(REFLECTION + "<summary>VTI costs 0.03% [s1]. SCHB")
    assert (answer.summary, answer.shape) == ("VTI costs 0.03% [s1]. SCHB", "unclosed")


def test_untagged_answer_loses_only_its_reflection_lines() -> None:
    answer = final_answer(REFLECTION + "\nVTI costs 0.03% a year [s1].\n\nITOT could not be confirmed.")
    assert answer.shape == "cleaned"
    assert answer.summary == "VTI costs 0.03% a year [s1].\n\nITOT could not be confirmed."


def test_untagged_plain_answer_is_kept_whole() -> None:
    text = "VTI costs 0.03% a year [s1]. The next cheapest is SCHB."
    assert final_answer(text).summary == text


def test_an_answer_that_is_all_reflection_is_still_published_rather_than_lost() -> None:
    assert final_answer("Found: VTI 0.03% [s1].").summary == "Found: VTI 0.03% [s1]."


class ReflectingPolicy(ResearchPolicy):
    """Researches like the standard policy, then thinks out loud before answering."""

    def final(self, messages: list[dict[str, Any]]) -> Reply:
        return text_reply(REFLECTION + "Checking: SCHB is 0.03% at Schwab [s1] and 0.04% elsewhere?\n"
                          "<summary>SCHB and VTI both cost 0.03% a year [s1].</summary>\n"
                          "(I double-checked the markers.)")


async def test_a_run_whose_model_reflects_before_answering_publishes_only_the_answer(
        fake_model: FakeAnthropic, fake_web: Any) -> None:
    fake_model.policy = ReflectingPolicy()
    events, outcome = await research_events(fake_model, fake_web, "expense ratio VTI SCHB ITOT")
    finished = events[-1]
    assert isinstance(finished, Finished) and outcome.status == "completed"
    assert finished.summary == "SCHB and VTI both cost 0.03% a year [s1]."
    for working_text in ("Found:", "Missing:", "Enough?", "Next:", "Checking:", "double-checked"):
        assert working_text not in finished.summary


async def test_a_settled_conflict_leaves_the_progress_line(fake_model: FakeAnthropic, fake_web: Any) -> None:
    from agent.events import ConflictSettled, Disagreement
    from tests.fakes.anthropic import tool_reply

    calls = iter([
        tool_reply(("web_search", {"query": "itot tracking difference"}),
                   text="Checking: ITOT is 0.03% at iShares [s1] but 0.05% elsewhere — different periods?"),
        tool_reply(("web_search", {"query": "itot tracking difference 2024"}),
                   text="Settled: iShares reports 2024, the other source 2023; the report uses 2024 [s1]."),
        text_reply("<summary>ITOT's 2024 tracking difference is 0.03% [s1].</summary>"),
    ])
    fake_model.policy = lambda request: next(calls)
    events, _ = await research_events(fake_model, fake_web, "itot tracking difference")
    conflicts = [e for e in events if isinstance(e, (Disagreement, ConflictSettled))]
    assert [type(e).__name__ for e in conflicts] == ["Disagreement", "ConflictSettled"]
    assert conflicts[1].text.startswith("iShares reports 2024")
