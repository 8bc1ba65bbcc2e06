"""The question set an eval runs: JSONL, one question a line, validated line by line."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from agent import MAX_QUESTION_CHARS, PROFILES
from bot.exceptions import QuestionFileError

__all__ = ["SHIPPED_QUESTIONS", "EvalQuestion", "QuestionFileError", "load_questions"]

# The set shipped with the repository: questions of different kinds, with the facts a good answer states.
SHIPPED_QUESTIONS = Path(__file__).resolve().parent / "questions.jsonl"  # shipped with the package


class EvalQuestion(BaseModel):
    # `prompt` and `topic` are DeepResearch Bench's names: its query.jsonl loads as it is.
    model_config = ConfigDict(populate_by_name=True)

    id: str = Field(min_length=1)
    question: str = Field(
        min_length=1, max_length=MAX_QUESTION_CHARS, validation_alias=AliasChoices("question", "prompt")
    )
    reference: str | None = None  # a good report on the question: the rubric compares against it
    facts: list[str] = Field(default_factory=list)  # what a good answer states
    profile: str = "standard"
    # "one fact", "comparison"…: for reading the scorecard, not graded
    kind: str | None = Field(default=None, validation_alias=AliasChoices("kind", "topic"))
    # From `--from-feedback`: what the team said was wrong, and the rated report's sources (not graded).
    notes: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: object) -> object:
        # DeepResearch Bench numbers its prompts; keep such ids usable as they are.
        return str(value) if isinstance(value, int) else value

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, value: str) -> str:
        if value not in PROFILES:
            raise ValueError(f"unknown profile {value!r}; use one of {', '.join(PROFILES)}")
        return value


def load_questions(path: Path, only: list[str] | None = None) -> list[EvalQuestion]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise QuestionFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    questions: list[EvalQuestion] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            questions.append(EvalQuestion.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise QuestionFileError(f"{path}:{number}: not JSON ({exc.msg}); write one JSON object per line") from exc
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors())
            raise QuestionFileError(f"{path}:{number}: {problems}") from exc
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            raise QuestionFileError(f"{path}: id {q.id!r} appears twice; give every question its own id")
        seen.add(q.id)
    if only:
        unknown = [i for i in only if i not in seen]
        if unknown:
            raise QuestionFileError(f"--only names ids not in {path}: {', '.join(unknown)}")
        questions = [q for q in questions if q.id in only]
    if not questions:
        raise QuestionFileError(
            f'{path} has no questions; write lines like {{"id": "q1", "question": "…", "facts": ["…"]}}'
        )
    return questions
