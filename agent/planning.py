"""Plan first: before a run spends its budget, one model request drafts the plan the team approves
(key questions, the report's outline, the budget it expects to use). Owns the plan's shape, the
request that drafts it and its reading; never fails: an answer that cannot be read becomes a plan
made from the question itself, so the team always has something to approve or change."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, ValidationError

from . import defaults
from .config import AgentConfig, Budget
from .json_text import json_object_text
from .prompts import load
from .usage import Usage

if TYPE_CHECKING:  # a type only: jobs/records/models.py reads the plan's models without the SDK
    from .model_provider import ModelAPI

__all__ = ["Plan", "draft_plan"]

MAX_ITEMS = 6
ITEM_CHARS = 200
PLAN_MAX_TOKENS = 1_200


class Plan(BaseModel):
    key_questions: list[str] = Field(min_length=1)
    outline: list[str] = Field(default_factory=list)
    expected_requests: int = Field(ge=1)
    expected_minutes: int = Field(ge=1)
    changes: list[str] = Field(default_factory=list)  # the team's change requests it answers, oldest first
    usage: Usage = Field(default_factory=Usage)  # what drafting it cost

    def text(self) -> str:
        """The approved plan as the research's opening carries it."""
        lines = ["Key questions:", *(f"- {q}" for q in self.key_questions)]
        if self.outline:
            lines += ["Outline:", *(f"- {o}" for o in self.outline)]
        lines.append(f"Expected budget: about {self.expected_requests} model requests, {self.expected_minutes} min.")
        return "\n".join(lines)


def _fallback(question: str, budget: Budget, changes: list[str]) -> Plan:
    return Plan(
        key_questions=[question.strip()[:ITEM_CHARS]],
        outline=["Findings"],
        expected_requests=budget.max_requests,
        expected_minutes=max(1, int(budget.active_seconds // 60)),
        changes=changes,
    )


def _read(text: str, question: str, budget: Budget, changes: list[str]) -> Plan:
    found = json_object_text(text)
    try:
        raw = json.loads(found) if found else None
        plan = Plan.model_validate({**(raw if isinstance(raw, dict) else {}), "changes": changes})
    except (json.JSONDecodeError, ValidationError):
        return _fallback(question, budget, changes)
    return plan.model_copy(
        update={
            "key_questions": [q[:ITEM_CHARS] for q in plan.key_questions[:MAX_ITEMS]],
            "outline": [o[:ITEM_CHARS] for o in plan.outline[:MAX_ITEMS]],
            # Within the profile's limits: the plan never promises more than the run may spend.
            "expected_requests": min(plan.expected_requests, budget.max_requests),
            "expected_minutes": min(plan.expected_minutes, max(1, int(budget.active_seconds // 60))),
        }
    )


async def draft_plan(
    anthropic: ModelAPI,  # any provider's client (agent/model_provider.py)
    config: AgentConfig,
    *,
    question: str,
    constraints: list[str],
    budget: Budget,
    changes: list[str],
) -> Plan:
    """One request to the main model; the plan, or one made from the question when the answer is unusable."""
    limits = f"{budget.profile} profile: at most {budget.max_requests} model requests, {int(budget.active_seconds // 60)} min"
    body = (
        f"<question>\n{question}\n</question>\n"
        + ("<constraints>\n" + "\n".join(f"- {c}" for c in constraints) + "\n</constraints>\n" if constraints else "")
        + (
            "<requested_changes>\n" + "\n".join(f"- {c}" for c in changes) + "\n</requested_changes>\n"
            if changes
            else ""
        )
        + f"Limits: {limits}."
    )
    client = anthropic.with_options(max_retries=config.model_max_retries, timeout=defaults.REQUEST_TIMEOUT_SECONDS)
    try:
        message = await client.messages.create(
            model=config.main_model,
            max_tokens=PLAN_MAX_TOKENS,
            system=load("plan"),
            messages=[{"role": "user", "content": body}],
        )
    except Exception:  # the model is away: the team still gets a plan to approve or change
        return _fallback(question, budget, changes)
    text = "".join(getattr(block, "text", "") for block in message.content)
    return _read(text, question, budget, changes).model_copy(update={"usage": Usage.of(message)})
