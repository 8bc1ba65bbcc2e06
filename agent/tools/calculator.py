"""calculator(expression): the tool the model calls; the engine is in calc_engine.py."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from ..activity import say
from ..figures import Calculation
from .base import Tool, ToolContext, ToolResult
from .calc_engine import MAX_DEPTH, MAX_EXPRESSION_CHARS, CalculationError, clean, evaluate

__all__ = ["MAX_DEPTH", "MAX_EXPRESSION_CHARS", "CalculationError", "Calculator", "CalculatorInput", "evaluate"]

# Progress lines show at most this much of the expression, so a long one does not flood the thread.
PROGRESS_CHARS = 80


class CalculatorInput(BaseModel):
    expression: str = Field(
        description=(
            "One calculation, e.g. '(132.4 - 120) / 120 * 100', '1,250 * 1.07', "
            "'days between 2024-01-15 and 2024-03-01'. At most 500 characters."
        )
    )


class Calculator(Tool):
    name = "calculator"
    stage = "calculating"
    Input = CalculatorInput
    description = (
        "Exact arithmetic and date arithmetic on figures you already have: totals, ratios, "
        "percentage changes, growth, unit-free conversions (multiply by a factor you found), "
        "days between dates. Not for looking anything up (use web_search), and not for "
        "conversions with units ('5 miles in km' is not understood: multiply by the factor). "
        "A result is not a source: cite the [sN] markers of the figures you put in.\n"
        "Grammar: numbers 1234.5, 1,234.5, 1_000, 1.5e6; + - * / ^ (or **), // integer "
        "division, parentheses; '%' between two numbers is the remainder (17 % 5 = 2), and so is "
        "mod(a, b). Percent: 15% = 0.15; 200 * 15% = 30; 15% of 200 = 30; a + b% and a - b% change a by "
        "b percent (80 + 10% = 88, 80 - 25% = 60). Before a + or - sign, '%' is a percentage only "
        "when written 10% - 5 (no space before '%', spaces around the sign); other spellings such as "
        "7 % -3 are refused as ambiguous: write mod(7, -3) for the remainder. "
        "Percentage change: (new - old) / old * 100. "
        "Functions: round(x, places) (halves round away from zero), mod(a, b), abs, min, max, sqrt, "
        "log (natural), log10, exp, floor, ceil; constants pi, e. Put ', ' between arguments: "
        "1,234 is one number.\n"
        "Dates are YYYY-MM-DD and today is the run's date; + or - N days, weeks, months or years: "
        "2024-01-31 + 1 month = 2024-02-29 (month ends clamp); 2024-03-01 - 2024-01-01 = 60 days; "
        "days between 2024-01-01 and 2024-03-01 = 60 days; (2024-03-01 - 2024-01-01) / 1 week "
        "gives weeks. Put spaces around '-' when subtracting numbers.\n"
        "Decimal arithmetic with 34 digits: 0.1 + 0.2 = 0.3; exact results show every digit, rounded ones "
        "(1/3, sqrt, pi) 15 significant digits, the last within one unit. Results must be 0 or between "
        "1e-1000 and 1e1000 in size; a result whose digits rounding has made unreliable (1/3 * 3 - 1, "
        "floor of a value rounded onto a whole number) is refused with advice, never shown wrong. "
        "Answers 'expression = result'; errors name the position and what to write instead."
    )

    def __init__(self, today: date | None = None) -> None:
        # Fixed when the run's tools are built, so 'today' agrees with the run's date marker.
        self.today = today if today is not None else date.today()

    def progress(self, args: BaseModel) -> str:
        assert isinstance(args, CalculatorInput)
        shown = clean(args.expression)
        if len(shown) > PROGRESS_CHARS:
            shown = shown[: PROGRESS_CHARS - 1] + "…"
        return say("calculating", expression=shown)

    async def run(self, args: BaseModel, ctx: ToolContext | None = None) -> ToolResult:
        assert isinstance(args, CalculatorInput)
        text = clean(args.expression)
        try:
            result = evaluate(text, self.today)
        except CalculationError as exc:
            return ToolResult(exc.describe(text), is_error=True)
        if ctx is not None:  # a quoted result passes the figure check when its inputs are cited
            ctx.calculations.append(Calculation(expression=text, result=str(result)))
        return ToolResult(f"{text} = {result}")
