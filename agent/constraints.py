"""Constraints as data: what a request says about how to research, pulled out by the small model.

"Only sources after 2020" left inside the question text is easy to lose; as a pinned list it
is shown back to the requester once (so they can correct it), carried by every continuation
and kept word for word through compaction. The model's answer is validated by pydantic;
anything unusable means "no constraints found", never a failed run.
"""

from __future__ import annotations

import json
import logging
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from .json_text import json_object_text
from .model import ModelClient, ModelUnavailable
from .prompts import load

log = logging.getLogger(__name__)

MAX_CONSTRAINTS = 12
CONSTRAINT_CHARS = 200
EXTRACT_MAX_TOKENS = 800


class Constraint(BaseModel):
    kind: Literal["sources", "dates", "regions", "exclusions", "budget", "format", "other"] = "other"
    text: str = Field(min_length=1)


class ConstraintList(BaseModel):
    constraints: list[Constraint] = Field(default_factory=list)


async def extract_constraints(model: ModelClient, request: str) -> list[str]:
    """The constraints `request` states, as short instructions; [] when none or on any failure."""
    prompt = f"<request>\n{request.strip()}\n</request>"
    try:
        answer = await model.small(system=load("constraints"), prompt=prompt, max_tokens=EXTRACT_MAX_TOKENS)
    except ModelUnavailable as exc:
        log.info("constraints not extracted: %s", exc)
        return []
    found = json_object_text(answer)
    try:
        parsed = ConstraintList.model_validate(json.loads(found)) if found else ConstraintList()
    except (ValidationError, json.JSONDecodeError):
        log.info("constraints answer was not usable JSON; going on without")
        return []
    texts = [" ".join(c.text.split())[:CONSTRAINT_CHARS] for c in parsed.constraints]
    return list(dict.fromkeys(t for t in texts if t))[:MAX_CONSTRAINTS]


def merge(existing: list[str], found: list[str]) -> list[str]:
    """Existing constraints first, new ones after; a repeat (ignoring case and spacing) is dropped."""
    seen = {" ".join(c.lower().split()) for c in existing}
    merged = list(existing)
    for constraint in found:
        key = " ".join(constraint.lower().split())
        if key not in seen:
            seen.add(key)
            merged.append(constraint)
    return merged
