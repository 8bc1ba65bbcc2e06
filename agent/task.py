"""What the engine is asked to do: the task and the markers of its surroundings."""
from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from .config import Budget


class ResearchTask(BaseModel):
    question: str
    constraints: list[str] = Field(default_factory=list)
    requester: str = ""  # how to name the person who asked, e.g. "@ana"
    where: str = ""  # "Slack channel C123, thread 1700000000.000100" or "terminal"
    today: date = Field(default_factory=date.today)
    earlier_runs: list[str] = Field(default_factory=list)
    budget: Budget = Field(default_factory=Budget)


def first_message(task: ResearchTask) -> str:
    """The opening user message: the task plus markers, never bulk content."""
    constraints = "\n".join(f"- {c}" for c in task.constraints) or "- none stated beyond the question"
    earlier = "\n".join(f"- {r}" for r in task.earlier_runs) or "- none"
    return (
        "<task>\n"
        f"{task.question.strip()}\n"
        "</task>\n"
        "<constraints>\n"
        f"{constraints}\n"
        "</constraints>\n"
        "<context>\n"
        f"Today's date: {task.today.isoformat()}\n"
        f"Requested by: {task.requester or 'unknown'}\n"
        f"Where: {task.where or 'unknown'}\n"
        f"Earlier runs in this thread:\n{earlier}\n"
        "</context>"
    )
