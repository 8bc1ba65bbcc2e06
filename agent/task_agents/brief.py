"""A task agent's brief: what the lead writes for it, and the opening message it becomes.

A task agent sees nothing of the lead's conversation and nothing of its siblings, so the
brief must stand alone (PROMPTS.md "Task-agent briefs"); the schema asks for every part.
"""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field, field_validator

from .. import defaults


def _required(value: str, what: str) -> str:
    value = " ".join(value.split())
    if not value:
        raise ValueError(f"{what} is empty: write it out, the task agent sees nothing but its brief")
    return value


class TaskBrief(BaseModel):
    objective: str = Field(description="The one thing this task agent must find out, in a sentence or two.")
    output: str = Field(
        description=(
            "What to bring back and in what shape, e.g. 'each fund's 2024 expense ratio with its as-of date, "
            "every figure cited'."
        )
    )
    background: str = Field(
        description=(
            "What you already know that helps: figures found so far, definitions, which of the requester's "
            "constraints matter here ('' only when you know nothing yet)."
        )
    )
    key_questions: list[str] = Field(
        min_length=1, description="The specific questions to answer, most important first."
    )
    boundaries: str = Field(
        description=("What NOT to cover, naming what the other task agents handle, so no two do the same work.")
    )
    sources: str = Field(description="Source types to prefer, e.g. 'issuer fact sheets and SEC filings, not blogs'.")
    call_budget: int = Field(
        ge=1,
        le=defaults.TASK_MAX_CALL_BUDGET,
        description=(
            f"Model requests it may make (one per turn, however many tools it calls at once): under 5 for a "
            f"simple lookup, about 10 for a hard question (at most {defaults.TASK_MAX_CALL_BUDGET}; the harness "
            "stops it there)."
        ),
    )

    @field_validator("objective")
    @classmethod
    def _objective(cls, value: str) -> str:
        return _required(value, "objective")

    @field_validator("output")
    @classmethod
    def _output(cls, value: str) -> str:
        return _required(value, "output")

    @field_validator("boundaries")
    @classmethod
    def _boundaries(cls, value: str) -> str:
        return _required(value, "boundaries (what this task must NOT cover)")

    @field_validator("key_questions")
    @classmethod
    def _questions(cls, value: list[str]) -> list[str]:
        questions = [" ".join(q.split()) for q in value if q.strip()]
        if not questions:
            raise ValueError("key_questions is empty: list the questions this task must answer")
        return questions


def opening(brief: TaskBrief, number: int, steps: int, today: date, constraints: list[str], notes: list[str]) -> str:
    """The task agent's first user message: its brief, and the requester's constraints, which bind it too."""
    lines = [f'<task_brief number="{number}">', f"Objective: {brief.objective}", f"Output wanted: {brief.output}"]
    if brief.background:
        lines.append(f"Background: {brief.background}")
    lines.append("Key questions:")
    lines += [f"- {q}" for q in brief.key_questions]
    lines.append(f"Out of scope (other task agents cover it): {brief.boundaries}")
    if brief.sources:
        lines.append(f"Sources to prefer: {brief.sources}")
    lines.append(
        f"Call budget: {steps} model requests (one per turn, however many tools you call at once); the budget "
        "block counts them and the harness stops you there."
    )
    lines += [
        "</task_brief>",
        "<context>",
        f"Today's date: {today.isoformat()}",
        "The requester's constraints (they bind you too):",
    ]
    lines += [f"- {c}" for c in [*constraints, *notes]] or ["- none stated"]
    lines.append("</context>")
    return "\n".join(lines)
