"""`deepthread eval`: measure research quality on a question set with the small model as judge."""

from __future__ import annotations

from bot.exceptions import BaselineError

from .command import THINKING_DIRS, EvalOptions, compare_thinking, run_eval
from .questions import SHIPPED_QUESTIONS, EvalQuestion, QuestionFileError, load_questions
from .scorecard import QuestionResult, Scorecard

__all__ = [
    "SHIPPED_QUESTIONS",
    "THINKING_DIRS",
    "BaselineError",
    "EvalOptions",
    "EvalQuestion",
    "QuestionFileError",
    "QuestionResult",
    "Scorecard",
    "compare_thinking",
    "load_questions",
    "run_eval",
]
