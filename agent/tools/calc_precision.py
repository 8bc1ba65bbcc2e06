"""How far a computed value may be from the exact one: relative error bounds for the calculator.

Every value the calculator computes carries a bound on its relative error: 0 when every step
so far was exact, otherwise grown by each rounding (half a unit in the 34th digit) and by what
the operations do to earlier errors. The bound lets the calculator show 15 correct digits, and
refuse, rather than print noise, when subtracting nearly equal rounded values (1/3 * 3 - 1) or
taking the floor of a rounded value that sits on a whole number (floor(1/3 * 3)).
These are first-order bounds (products of two small errors are dropped), widened by a margin.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import ROUND_FLOOR, Context, Decimal

WORKING_DIGITS = 34
# One correctly rounded step at 34 digits is off by at most half a unit in the last digit.
ROUNDING_ERROR = 0.5 * 10.0 ** (1 - WORKING_DIGITS)
# Results are shown to 15 significant digits; a bound this small keeps the shown value within
# one unit of the 15th digit of the exact one.
MAX_RELATIVE_ERROR = 1e-16
# First-order bounds ignore products of errors; double them before judging a boundary.
MARGIN = 2.0

# Bounds are worked out with room to spare, so they never trap or flag anything themselves.
_BOUNDS = Context(prec=WORKING_DIGITS + 10, Emax=100_000, Emin=-100_000, traps=[])


def step(rounded: bool) -> float:
    return ROUNDING_ERROR if rounded else 0.0


def product(*errors: float) -> float:
    """Multiplying or dividing adds relative errors."""
    return sum(errors)


def sum_error(a: Decimal, error_a: float, b: Decimal, error_b: float, result: Decimal) -> float:
    """Relative error of a ± b from its operands' errors: (|a| e_a + |b| e_b) / |a ± b|.

    Infinite when rounded operands cancel to exactly 0: the true value may be any tiny number.
    """
    if error_a == 0 and error_b == 0:
        return 0.0
    if result.is_zero():
        return float("inf")
    spread = _BOUNDS.add(_BOUNDS.multiply(abs(a), Decimal(error_a)), _BOUNDS.multiply(abs(b), Decimal(error_b)))
    return float(_BOUNDS.divide(spread, abs(result)))


def power_error(base: Decimal, error_base: float, exponent: Decimal, error_exponent: float) -> float:
    """Relative error of base ^ exponent: |exponent| e_base + |exponent ln base| e_exponent."""
    error = float(abs(exponent)) * error_base
    if error_exponent and not base.is_zero():
        error += float(abs(_BOUNDS.multiply(exponent, _BOUNDS.ln(abs(base))))) * error_exponent
    return error


def log_error(value: Decimal, error: float) -> float:
    """Relative error of ln(x) (and log10): e_x / |ln x|; infinite at x = 1 with a rounded x."""
    if error == 0:
        return 0.0
    logarithm = _BOUNDS.ln(value)
    return float("inf") if logarithm.is_zero() else error / float(abs(logarithm))


def exp_error(value: Decimal, error: float) -> float:
    """Relative error of e^x: |x| e_x."""
    return float(abs(value)) * error if error else 0.0


def same_either_side(value: Decimal, error: float, snap: Callable[[Decimal, Context], Decimal]) -> bool:
    """Whether a step that jumps (floor, rounding, remainder) gives one answer across the whole
    range the exact value may lie in; `snap(x, context)` is that step."""
    if error == 0:
        return True
    reach = _BOUNDS.multiply(abs(value), Decimal(error * MARGIN))
    low = snap(_BOUNDS.subtract(value, reach), _BOUNDS)
    high = snap(_BOUNDS.add(value, reach), _BOUNDS)
    return not (low.is_nan() or high.is_nan()) and low == high


def floor_of(value: Decimal, context: Context) -> Decimal:
    return value.to_integral_value(rounding=ROUND_FLOOR, context=context)


def quotient(a: Decimal, b: Decimal) -> Decimal:
    """a / b with room to spare, to judge which whole number a floor division lands on."""
    return _BOUNDS.divide(a, b)
