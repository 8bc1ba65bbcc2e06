"""`deepthread eval`: measure research quality on a question set with the small model as judge."""

from __future__ import annotations

from bot.exceptions import BaselineError

from .command import EvalOptions, run_eval
from .questions import SHIPPED_QUESTIONS, EvalQuestion, QuestionFileError, load_questions
from .scorecard import QuestionResult, Scorecard

__all__ = [
    "SHIPPED_QUESTIONS",
    "BaselineError",
    "EvalOptions",
    "EvalQuestion",
    "QuestionFileError",
    "QuestionResult",
    "Scorecard",
    "load_questions",
    "run_eval",
]
