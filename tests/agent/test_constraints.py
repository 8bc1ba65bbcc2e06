"""Constraints stated in the question become pinned constraints, in the opening and shown to the team."""
from __future__ import annotations

import json
from typing import Any

from agent import ResearchTask, RunEvent
from agent.events import ConstraintsFound
from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply
from tests.fakes.policies import ResearchPolicy, _system_text
from tests.helpers import research_events

QUESTION = "Compare the fees of VTI and SCHB. Only sources after 2020, and leave out robo-advisers."


def is_constraints_request(request: dict[str, Any]) -> bool:
    return "list\nthe constraints" in _system_text(request) or "list the constraints" in _system_text(request)


class ConstraintsPolicy(ResearchPolicy):
    def __init__(self, answer: str) -> None:
        super().__init__()
        self.answer = answer

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_constraints_request(request):
            return text_reply(self.answer)
        return super().__call__(request)


async def run(fake_model: FakeAnthropic, fake_web: Any, task: ResearchTask) -> list[RunEvent]:
    events, _ = await research_events(fake_model, fake_web, task)
    return events


def first_main_request(fake_model: FakeAnthropic) -> str:
    main = [r for r in fake_model.requests if "Deepthread" in _system_text(r) and not is_constraints_request(r)]
    return json.dumps(main[0]["messages"][0])


async def test_constraints_in_the_question_are_pinned_and_announced(fake_model: FakeAnthropic, fake_web: Any) -> None:
    fake_model.policy = ConstraintsPolicy(json.dumps({"constraints": [
        {"kind": "dates", "text": "Only sources after 2020"},
        {"kind": "exclusions", "text": "Leave out robo-advisers"},
        {"kind": "dates", "text": "only sources  after 2020"}]}))
    task = ResearchTask(question=QUESTION, constraints=["Respond in English"], constraints_from=QUESTION)
    events = await run(fake_model, fake_web, task)
    [found] = [e for e in events if isinstance(e, ConstraintsFound)]
    assert found.constraints == ["Respond in English", "Only sources after 2020", "Leave out robo-advisers"]
    assert found.added == ["Only sources after 2020", "Leave out robo-advisers"]
    opening = first_main_request(fake_model)
    assert "- Only sources after 2020" in opening and "- Leave out robo-advisers" in opening
    assert "none stated beyond the question" not in opening


async def test_an_unusable_constraints_answer_changes_nothing_and_the_run_goes_on(
        fake_model: FakeAnthropic, fake_web: Any) -> None:
    fake_model.policy = ConstraintsPolicy("I think the user wants recent sources.")
    events = await run(fake_model, fake_web, ResearchTask(question=QUESTION, constraints_from=QUESTION))
    assert not [e for e in events if isinstance(e, ConstraintsFound)]
    assert events[-1].type == "finished" and events[-1].status == "completed"  # type: ignore[union-attr]


async def test_a_request_without_constraints_makes_no_announcement(fake_model: FakeAnthropic, fake_web: Any) -> None:
    fake_model.policy = ConstraintsPolicy('{"constraints": []}')
    events = await run(fake_model, fake_web, ResearchTask(question="VTI fees", constraints_from="VTI fees"))
    assert not [e for e in events if isinstance(e, ConstraintsFound)]
