"""The calculator's engine: exact arithmetic and date arithmetic, read by a small hand-written parser.

Model text is never run as Python: a tokenizer and a recursive-descent parser compute the
value as they read, over `decimal.Decimal` (so 0.1 + 0.2 is 0.3 and money stays exact),
calendar dates, and two span types (days; months).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import (
    ROUND_CEILING,
    ROUND_FLOOR,
    ROUND_HALF_EVEN,
    ROUND_HALF_UP,
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
    Subnormal,
    getcontext,
    localcontext,
)

from ..exceptions import CalculationError
from . import calc_precision as precision

# Longer input is pasted text rather than a calculation; the model should split it.
MAX_EXPRESSION_CHARS = 500
# Real calculations nest a few levels; this also keeps recursion far below Python's limit.
MAX_DEPTH = 40
# Working precision (decimal128's 34 digits): more than any figure a source reports.
WORKING_DIGITS = precision.WORKING_DIGITS
# Inexact results (1/3, sqrt(2), pi) are shown to float-like precision, without the noise digits.
DISPLAY_DIGITS = 15
# Numbers stay at least 1e-1000 and below 1e1000 in size (or are 0): ample for research, and
# 9^9^9 is refused before it is computed.
MAX_MAGNITUDE = 1000
# Outside 1e-7..1e21 a number is shown as 1.5e+30 rather than a long row of zeros.
PLAIN_MIN_EXPONENT = -7
PLAIN_MAX_EXPONENT = 21
# Decimal places round() accepts: beyond the working precision there is nothing to round.
MAX_ROUND_PLACES = WORKING_DIGITS
# Fifty digits of pi; rounded to the working precision when used.
PI = Decimal("3.14159265358979323846264338327950288419716939937510")

# Emax 999: every result is below 1e1000. Subnormal is trapped: below 1e-1000 digits would be lost.
_ARITHMETIC = Context(
    prec=WORKING_DIGITS,
    rounding=ROUND_HALF_EVEN,
    Emax=MAX_MAGNITUDE - 1,
    Emin=-MAX_MAGNITUDE,
    traps=[InvalidOperation, DivisionByZero, Overflow, Subnormal],
)
# Estimating a power's size and printing results must never trap or round away digits.
_ROOMY = Context(prec=WORKING_DIGITS + 10, Emax=10 * MAX_MAGNITUDE, Emin=-10 * MAX_MAGNITUDE, traps=[])

# Models paste figures with typographic signs and spaces; each maps to one character, so positions hold.
# (minus sign, multiplication sign, division sign; no-break, thin and narrow no-break spaces)
_TYPOGRAPHY = str.maketrans({"\u2212": "-", "\u00d7": "*", "\u00f7": "/", "\u00a0": " ", "\u2009": " ", "\u202f": " "})
_CURRENCY = "$€£¥₹"

_TOKEN_PATTERN = r"""
    (?P<space>\s+)
  | (?P<date>[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?![0-9.]))
  | (?P<number>(?:[0-9]{1,3}(?:,[0-9]{3})+(?![0-9_])|[0-9]+(?:_[0-9]+)*)(?:\.[0-9]+(?:_[0-9]+)*)?(?:[eE][+-]?[0-9]+)?
              |\.[0-9]+(?:[eE][+-]?[0-9]+)?)
  | (?P<name>[A-Za-z][A-Za-z0-9_]*)
  | (?P<op>\*\*|//|[-+*/^%])
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<comma>,)
  | (?P<other>.)
"""

_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# Compiled here, not inline, so tests/test_linear_patterns.py times them with the rest.
_TOKEN = re.compile(_TOKEN_PATTERN, re.VERBOSE)
_NUMBER_RUN = re.compile(r"[0-9.,_]+")
_DAY_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7}
_MONTH_UNITS = {"month": 1, "months": 1, "year": 12, "years": 12}
_UNITS = _DAY_UNITS.keys() | _MONTH_UNITS.keys()
_KEYWORDS = {"between", "and", "of"}
_FUNCTION_NAMES = ("round", "mod", "abs", "min", "max", "sqrt", "log", "log10", "exp", "floor", "ceil", "date")
_VOCABULARY = (
    "use numbers, + - * / ^ %, round(x, n), mod(a, b), abs, min, max, sqrt, log, log10, exp, floor, ceil, "
    "pi, e, today, or dates like 2024-01-31"
)
_DATE_HINT = (
    "a date takes + or - N days/weeks/months/years, and one date minus another gives days (2024-03-01 - 2024-01-01)"
)


@dataclass(frozen=True, order=True)
class Days:
    """A count of days: what date minus date gives, and what `N days` or `N weeks` writes."""

    amount: Decimal


@dataclass(frozen=True)
class Months:
    """A calendar span (`N months`, `N years`): only meaningful added to or taken from a date."""

    count: int


Value = Decimal | date | Days | Months


@dataclass(frozen=True)
class _Token:
    kind: str  # one of the _TOKEN_PATTERN group names, or "end"
    text: str
    position: int
    number: Decimal | None = None
    day: date | None = None
    rounded: bool = False  # the number had more digits than the working precision

    @property
    def word(self) -> str:
        return self.text.lower()

    @property
    def where(self) -> str:
        return f"at position {self.position + 1}"


@dataclass
class _Step:
    """What one computing step reports: whether it rounded its result to the working precision."""

    rounded: bool = False


@dataclass(frozen=True)
class _Operand:
    """A computed value and the slice of the expression it came from (for error messages)."""

    value: Value
    position: int
    source: str
    percent: bool = False  # written as `b%`: `a + b%` then means a increased by b percent
    error: float = 0.0  # bound on the relative error; 0 when every step was exact (calc_precision)

    @property
    def end(self) -> int:
        return self.position + len(self.source)

    @property
    def where(self) -> str:
        return f"'{self.source}' at position {self.position + 1}"


def evaluate(expression: str, today: date) -> str:
    """The formatted result of one expression; raises CalculationError with a usable message."""
    text = clean(expression)
    if not text:
        raise CalculationError(
            "the expression is empty: write one calculation, e.g. 1,250 * 1.07 or 2024-01-31 + 1 month"
        )
    if len(text) > MAX_EXPRESSION_CHARS:
        raise CalculationError(
            f"the expression is {len(text):,} characters; the limit is {MAX_EXPRESSION_CHARS}: "
            "split it into separate calculations"
        )
    with localcontext(_ARITHMETIC) as arithmetic:
        arithmetic.clear_flags()
        result = _Parser(text, today).parse()
    # An exact result is shown in full; a rounded one only to float-like precision.
    return format_value(result.value, result.error > 0)


def clean(expression: str) -> str:
    return expression.translate(_TYPOGRAPHY).strip()


def format_value(value: Value, inexact: bool = False) -> str:
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Days):
        return f"{format_number(value.amount, inexact)} {'day' if abs(value.amount) == 1 else 'days'}"
    if isinstance(value, Months):
        return f"{format_number(Decimal(value.count))} {'month' if abs(value.count) == 1 else 'months'}"
    return format_number(value, inexact)


def format_number(number: Decimal, inexact: bool = False) -> str:
    if number.is_zero():
        return "0"  # never "-0" or "0E-7"
    if inexact:
        number = Context(prec=DISPLAY_DIGITS, Emax=_ROOMY.Emax, Emin=_ROOMY.Emin, traps=[]).plus(number)
    number = number.normalize(_ROOMY)
    # A rounded result shown in plain notation would imply its padding zeros are real digits.
    plain_limit = DISPLAY_DIGITS if inexact else PLAIN_MAX_EXPONENT
    exponent = number.adjusted()
    if PLAIN_MIN_EXPONENT <= exponent < plain_limit:
        return format(number, "f")
    sign, digits, _ = number.as_tuple()
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}e{exponent:+d}"


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    for match in _TOKEN.finditer(text):
        kind, piece, start = match.lastgroup or "other", match.group(), match.start()
        at = f"at position {start + 1}"
        if kind == "space":
            continue
        if kind == "other":
            if piece in _CURRENCY:
                raise CalculationError(
                    f"unexpected currency sign '{piece}' {at}: write the number alone (1200, not $1,200); "
                    "units and currencies are not supported",
                    start,
                )
            raise CalculationError(f"unexpected character '{piece}' {at}: {_VOCABULARY}", start)
        if kind == "number":
            tokens.append(_number_token(text, piece, start))
        elif kind == "date":
            tokens.append(_date_token(piece, start))
        else:
            tokens.append(_Token(kind, piece, start))
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _number_token(text: str, piece: str, start: int) -> _Token:
    end = start + len(piece)
    if end < len(text) and text[end] in "._":
        whole = _NUMBER_RUN.match(text, start)
        shown = whole.group() if whole else piece
        raise CalculationError(
            f"malformed number '{shown}' at position {start + 1}: write numbers like 1234.5, 1,234.5 or 1_000",
            start,
        )
    number = Decimal(piece.replace(",", "").replace("_", ""))
    if not number.is_zero() and not -MAX_MAGNITUDE <= number.adjusted() < MAX_MAGNITUDE:
        raise CalculationError(
            f"number '{piece}' at position {start + 1} is out of range: numbers must stay between "
            f"1e-{MAX_MAGNITUDE} and 1e{MAX_MAGNITUDE}",
            start,
        )
    # Rounded to the working precision once, so every later step works on at most 34 digits.
    try:
        rounded = _ARITHMETIC.plus(number)
    except Overflow:  # 9.99…e999 with more than 34 digits rounds up to 1e1000
        raise CalculationError(
            f"number '{piece}' at position {start + 1} is out of range: numbers must stay below 1e{MAX_MAGNITUDE}",
            start,
        ) from None
    return _Token("number", piece, start, number=rounded, rounded=rounded != number)


def _date_token(piece: str, start: int) -> _Token:
    at = f"at position {start + 1}"
    if not _ISO_DATE.fullmatch(piece):
        raise CalculationError(
            f"'{piece}' {at} looks like a date: write dates as YYYY-MM-DD (2024-03-01), "
            "or put spaces around '-' to subtract",
            start,
        )
    try:
        return _Token("date", piece, start, day=date.fromisoformat(piece))
    except ValueError:
        raise CalculationError(f"'{piece}' {at} is not a calendar date: check the month and day", start) from None


class _Parser:
    """Recursive descent, computing as it goes. Lowest precedence first:

    expression := term (('+' | '-') term)*
    term       := unary (('*' | '/' | '//' | '%') unary)*
    unary      := ('-' | '+') unary | power
    power      := postfix (('^' | '**') unary)?          right-associative; -2^2 = -4
    postfix    := primary [unit] | primary '%' ['of' unary]
    primary    := number | date | constant | today | function '(' args ')' | '(' expression ')'
                | 'days between' expression 'and' expression
    """

    def __init__(self, text: str, today: date) -> None:
        self.text = text
        self.today = today
        self.tokens = _tokenize(text)
        self.index = 0
        self.depth = 0

    # --- reading tokens ------------------------------------------------------------

    @property
    def token(self) -> _Token:
        return self.tokens[self.index]

    def peek(self) -> _Token:
        return self.tokens[min(self.index + 1, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        token = self.token
        self.index = min(self.index + 1, len(self.tokens) - 1)
        return token

    def at_op(self, *ops: str) -> bool:
        return self.token.kind == "op" and self.token.text in ops

    def at_word(self, word: str) -> bool:
        return self.token.kind == "name" and self.token.word == word

    def operand(self, value: Value, start: int, end: int, percent: bool = False, error: float = 0.0) -> _Operand:
        made = _Operand(value, start, self.text[start:end], percent, error)
        if error > precision.MAX_RELATIVE_ERROR:
            # A rounded value (1/3, sqrt, pi, a 35-digit product) met a step that magnifies its
            # rounding (nearly equal values subtracted): its digits would be noise, not a result.
            raise CalculationError(
                f"{made.where} cannot be computed to 15 correct digits: it subtracts nearly equal values "
                "that were already rounded (by a division such as 1/3, a root, pi, or more than 34 digits); "
                "rearrange it so the division comes last, or round the parts first",
                start,
            )
        return made

    @contextmanager
    def computing(self, start: int, end: int) -> Iterator[_Step]:
        """Turn decimal and calendar failures inside one step into messages naming that step,
        and note whether the step rounded its result."""
        where = f"'{self.text[start:end]}' at position {start + 1}"
        flags = getcontext().flags
        flags[Inexact] = False
        step = _Step()
        try:
            yield step
        except Overflow:
            raise CalculationError(
                f"{where} is too large: results must stay below 1e{MAX_MAGNITUDE}; check the inputs", start
            ) from None
        except Subnormal:  # Underflow is a Subnormal too
            raise CalculationError(
                f"{where} is too small: results must be 0 or at least 1e-{MAX_MAGNITUDE} in size; check the inputs",
                start,
            ) from None
        except DivisionByZero:
            raise CalculationError(f"division by zero in {where}: check the divisor", start) from None
        except InvalidOperation:
            raise CalculationError(f"{where} has no numeric result: check the inputs", start) from None
        except OverflowError:  # from the calendar: Python dates run from year 1 to 9999
            raise CalculationError(f"{where} falls outside the years 1 to 9999", start) from None
        step.rounded = bool(flags[Inexact])

    # --- grammar -------------------------------------------------------------------

    def parse(self) -> _Operand:
        result = self.expression()
        if self.token.kind != "end":
            raise self.unexpected(result)
        return result

    def expression(self) -> _Operand:
        left = self.term()
        while self.at_op("+", "-"):
            op = self.advance()
            right = self.term()
            with self.computing(left.position, right.end) as step:
                value = _add_or_subtract(op, left, right)
            error = _sum_error(op, left, right, value) + precision.step(step.rounded)
            left = self.operand(value, left.position, right.end, error=error)
        return left

    def term(self) -> _Operand:
        left = self.unary()
        while self.at_op("*", "/", "//", "%"):
            op = self.advance()
            right = self.unary()
            with self.computing(left.position, right.end) as step:
                value = _multiply_or_divide(op, left, right)
            if op.text in ("//", "%"):
                error = _floor_division_error(op.text, left, right, value, step.rounded)
            else:
                error = precision.product(left.error, right.error, precision.step(step.rounded))
            left = self.operand(value, left.position, right.end, error=error)
        return left

    def unary(self) -> _Operand:
        # Every nesting route (parentheses, arguments, signs, exponents) passes through here.
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise CalculationError(
                    f"the expression nests more than {MAX_DEPTH} levels deep {self.token.where}: "
                    "simplify it or split it into separate calculations",
                    self.token.position,
                )
            if not self.at_op("-", "+"):
                return self.power()
            sign = self.advance()
            inner = self.unary()
            with self.computing(sign.position, inner.end):
                value = _negate(inner) if sign.text == "-" else inner.value
            return self.operand(value, sign.position, inner.end, inner.percent, inner.error)
        finally:
            self.depth -= 1

    def power(self) -> _Operand:
        base = self.postfix()
        if not self.at_op("^", "**"):
            return base
        self.advance()
        exponent = self.unary()
        with self.computing(base.position, exponent.end) as step:
            value = _power(base, exponent, self.text[base.position : exponent.end])
        error = precision.power_error(
            _number(base, "'^'"), base.error, _number(exponent, "'^'"), exponent.error
        ) + precision.step(step.rounded)
        return self.operand(value, base.position, exponent.end, error=error)

    def postfix(self) -> _Operand:
        base = self.primary()
        if self.token.kind == "name" and self.token.word in _UNITS:
            unit = self.advance()
            end = unit.position + len(unit.text)
            with self.computing(base.position, end) as step:
                span = _span(base, unit)
            return self.operand(span, base.position, end, error=base.error + precision.step(step.rounded))
        if self.at_op("%") and self._percent_sign_follows(base):
            sign = self.advance()
            with self.computing(base.position, sign.position + 1) as step:
                fraction = _number(base, "a percentage") / 100
            error = base.error + precision.step(step.rounded)
            if not self.at_word("of"):
                return self.operand(fraction, base.position, sign.position + 1, percent=True, error=error)
            self.advance()
            target = self.unary()
            with self.computing(base.position, target.end) as step:
                value = _scale(fraction, target)
            error = precision.product(error, target.error, precision.step(step.rounded))
            return self.operand(value, base.position, target.end, error=error)
        return base

    def _percent_sign_follows(self, base: _Operand) -> bool:
        """Whether the '%' here means percent (True) or the remainder (False).

        '%' before an operand is the remainder (17 % 5); before nothing, 'of', or an operator it
        means percent (15%, 15% of 200, 15% * 4). Before a sign both readings are plausible
        (7 % -3: remainder -2, or 7 percent minus 3?), so the percent reading is taken only when
        written unmistakably, as 10% - 5 (no space before '%', spaces around the sign); any
        other spelling is refused with advice rather than guessed.
        """
        sign, after = self.token, self.peek()
        if after.kind in ("number", "date", "lparen"):
            return False
        if after.kind == "name" and after.word not in _KEYWORDS:
            return False
        if not (after.kind == "op" and after.text in ("+", "-")):
            return True
        next_char = self.text[after.position + 1 : after.position + 2]
        if sign.position == base.end and after.position > sign.position + 1 and next_char.isspace():
            return True
        following = self.tokens[min(self.index + 2, len(self.tokens) - 1)]
        b = following.text if following.kind in ("number", "name") else "b"
        raise CalculationError(
            f"'%' {sign.where} is ambiguous before '{after.text}': for the remainder write "
            f"mod({base.source}, {after.text}{b}) or {base.source} % ({after.text}{b}); for a percentage "
            f"write {base.source}% {after.text} {b} (no space before '%', spaces around '{after.text}')",
            sign.position,
        )

    def primary(self) -> _Operand:
        token = self.token
        if token.kind == "number" and token.number is not None:
            self.advance()
            error = precision.step(token.rounded)
            return self.operand(token.number, token.position, token.position + len(token.text), error=error)
        if token.kind == "date" and token.day is not None:
            self.advance()
            return self.operand(token.day, token.position, token.position + len(token.text))
        if token.kind == "lparen":
            self.advance()
            inner = self.expression()
            close = self.expect_close(token, inner, "the '(' " + token.where)
            return self.operand(inner.value, token.position, close.position + 1, inner.percent, inner.error)
        if token.kind == "name":
            return self.name()
        if token.kind == "end":
            before = self.tokens[self.index - 1] if self.index else token
            raise CalculationError(
                f"the expression ends after '{before.text}' {before.where}: add the number it needs",
                token.position,
            )
        raise CalculationError(
            f"expected a number, a date, a name or '(' {token.where}, found '{token.text}': {_VOCABULARY}",
            token.position,
        )

    def name(self) -> _Operand:
        token = self.token
        word = token.word
        end = token.position + len(token.text)
        if word == "pi":
            self.advance()
            return self.operand(+PI, token.position, end, error=precision.ROUNDING_ERROR)
        if word == "e":
            self.advance()
            return self.operand(Decimal(1).exp(), token.position, end, error=precision.ROUNDING_ERROR)
        if word == "today":
            self.advance()
            return self.operand(self.today, token.position, end)
        if word == "days" and self.peek().kind == "name" and self.peek().word == "between":
            return self.days_between()
        if word in _FUNCTION_NAMES:
            if self.peek().kind != "lparen":
                raise CalculationError(
                    f"'{token.text}' {token.where} is a function: write it with parentheses, as in {word}(2)",
                    token.position,
                )
            return self.call()
        if word in _UNITS:
            raise CalculationError(
                f"'{token.text}' {token.where} needs a number before it, as in 5 {word}", token.position
            )
        if word in _KEYWORDS:
            raise _misplaced_keyword(token)
        raise CalculationError(f"unknown name '{token.text}' {token.where}: {_VOCABULARY}", token.position)

    def days_between(self) -> _Operand:
        start = self.advance()
        self.advance()  # "between"
        first = self.expression()
        if not self.at_word("and"):
            raise CalculationError(
                f"'days between' needs 'and' between its two dates {self.token.where}: "
                "write days between 2024-01-01 and 2024-03-01",
                self.token.position,
            )
        self.advance()
        second = self.expression()
        for side in (first, second):
            if not isinstance(side.value, date):
                raise CalculationError(
                    f"'days between' needs two dates, but {side.where} is {_kind(side.value)}", side.position
                )
        assert isinstance(first.value, date) and isinstance(second.value, date)
        # "Between" has no direction; subtract the dates for a signed count.
        days = Days(Decimal(abs((second.value - first.value).days)))
        return self.operand(days, start.position, second.end)

    def call(self) -> _Operand:
        name = self.advance()
        opening = self.advance()
        args: list[_Operand] = []
        if self.token.kind != "rparen":
            args.append(self.expression())
            while self.token.kind == "comma":
                self.advance()
                args.append(self.expression())
        last = args[-1] if args else self.operand(Decimal(0), opening.position, opening.position + 1)
        close = self.expect_close(opening, last, f"{name.word}( {name.where}")
        with self.computing(name.position, close.position + 1) as step:
            value = _call(name, args)
        error = _call_error(name, args, value, step.rounded)
        return self.operand(value, name.position, close.position + 1, error=error)

    def expect_close(self, opening: _Token, last: _Operand, what: str) -> _Token:
        if self.token.kind == "rparen":
            return self.advance()
        if self.token.kind == "end":
            raise CalculationError(f"missing ')' to close {what}: add ')'", opening.position)
        raise self.unexpected(last)

    def unexpected(self, after: _Operand) -> CalculationError:
        """Something follows a complete operand where an operator or the end belongs."""
        token = self.token
        if token.kind == "rparen":
            return CalculationError(f"unmatched ')' {token.where}: remove it or add the '(' it closes", token.position)
        if token.kind == "comma":
            return CalculationError(
                f"unexpected ',' {token.where}: commas separate function arguments, as in max(1, 2), "
                "and thousands need groups of three digits (1,234,567)",
                token.position,
            )
        if token.kind == "name" and token.word in _KEYWORDS:
            return _misplaced_keyword(token)
        known = token.word in _UNITS or token.word in _FUNCTION_NAMES or token.word in ("pi", "e", "today")
        if token.kind == "name" and not known:
            return CalculationError(f"unknown name '{token.text}' {token.where}: {_VOCABULARY}", token.position)
        shown = "(...)" if token.kind == "lparen" else token.text
        return CalculationError(
            f"missing operator between '{after.source}' and '{token.text}' {token.where}: "
            f"write {after.source} * {shown} to multiply",
            token.position,
        )


def _misplaced_keyword(token: _Token) -> CalculationError:
    return CalculationError(
        f"unexpected '{token.text}' {token.where}: 'of' and 'and' only appear in '15% of 200' "
        "and 'days between 2024-01-01 and 2024-03-01'",
        token.position,
    )


# --- the operations, each naming the operands it refuses ----------------------------


def _kind(value: Value) -> str:
    if isinstance(value, date):
        return "a date"
    if isinstance(value, Days):
        return "a number of days"
    if isinstance(value, Months):
        return "a number of months"
    return "a number"


def _number(operand: _Operand, role: str) -> Decimal:
    if not isinstance(operand.value, Decimal):
        raise CalculationError(
            f"{role} needs a number, but {operand.where} is {_kind(operand.value)}", operand.position
        )
    return operand.value


def _whole(operand: _Operand, role: str) -> int:
    number = _number(operand, role)
    if operand.error:
        raise _rounded_where_exact(operand, role)
    if number != number.to_integral_value():
        raise CalculationError(f"{role} needs a whole number, but {operand.where} is not", operand.position)
    return int(number)


def _refuse(op: _Token, left: _Operand, right: _Operand, hint: str = _DATE_HINT) -> CalculationError:
    return CalculationError(
        f"cannot combine {_kind(left.value)} and {_kind(right.value)} with '{op.text}' {op.where}: {hint}",
        op.position,
    )


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    if not 1 <= year <= 9999:
        raise OverflowError("year out of range")  # what date + timedelta raises, handled alike
    # Past the end of the shorter month, land on its last day: 2024-01-31 + 1 month = 2024-02-29.
    last_day = calendar.monthrange(year, month + 1)[1]
    return date(year, month + 1, min(day.day, last_day))


def _rounded_where_exact(operand: _Operand, role: str) -> CalculationError:
    return CalculationError(
        f"{role} needs an exact whole number, but {operand.where} was rounded along the way "
        "(by a division such as 1/3, a root, or more than 34 digits): wrap it in round()",
        operand.position,
    )


def _shift(day: date, span: Days | Months, sign: int, span_operand: _Operand) -> date:
    if span_operand.error:
        raise _rounded_where_exact(span_operand, "a date")
    if isinstance(span, Months):
        return _add_months(day, sign * span.count)
    if span.amount != span.amount.to_integral_value():
        raise CalculationError(
            f"a date moves by whole days, but {span_operand.where} is not whole: round it first",
            span_operand.position,
        )
    return day + timedelta(days=sign * int(span.amount))


def _add_or_subtract(op: _Token, left: _Operand, right: _Operand) -> Value:
    sign = 1 if op.text == "+" else -1
    a, b = left.value, right.value
    if right.percent and not left.percent:
        # The calculator convention: 80 + 10% is 88 and 80 - 25% is 60 (b percent of a).
        if isinstance(a, (date, Months)) or not isinstance(b, Decimal):
            raise _refuse(op, left, right, "a percentage changes a number: 80 + 10% = 88")
        return _scale(1 + sign * b, left)
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return a + sign * b
    if isinstance(a, date) and isinstance(b, (Days, Months)):
        return _shift(a, b, sign, right)
    if sign == 1 and isinstance(b, date) and isinstance(a, (Days, Months)):
        return _shift(b, a, 1, left)
    if sign == -1 and isinstance(a, date) and isinstance(b, date):
        return Days(Decimal((a - b).days))
    if isinstance(a, Days) and isinstance(b, Days):
        return Days(a.amount + sign * b.amount)
    if isinstance(a, Months) and isinstance(b, Months):
        return Months(a.count + sign * b.count)
    if isinstance(a, (Days, Months)) and isinstance(b, (Days, Months)):
        raise _refuse(op, left, right, "add months and days to a date one at a time: 2024-01-31 + 1 month + 1 day")
    if isinstance(a, Days) or isinstance(b, Days):
        raise _refuse(op, left, right, "write a count of days with its unit, as in 5 days")
    raise _refuse(op, left, right)


def _scale(factor: Decimal, target: _Operand) -> Value:
    value = target.value
    if isinstance(value, Decimal):
        return factor * value
    if isinstance(value, Days):
        return Days(factor * value.amount)
    if isinstance(value, Months) and factor == factor.to_integral_value():
        return Months(int(factor) * value.count)
    raise CalculationError(
        f"{target.where} is {_kind(value)} and cannot be scaled by {format_number(factor)}: "
        "multiply numbers or days; a month count only by a whole number",
        target.position,
    )


def _nonzero(divisor: _Operand) -> None:
    value = divisor.value
    amount = value.amount if isinstance(value, Days) else value
    if isinstance(amount, Decimal) and amount.is_zero():
        raise CalculationError(f"division by zero: {divisor.where} is 0; check the divisor", divisor.position)


def _multiply_or_divide(op: _Token, left: _Operand, right: _Operand) -> Value:
    a, b = left.value, right.value
    if op.text == "*":
        if isinstance(a, date) or isinstance(b, date):
            raise _refuse(op, left, right)
        if isinstance(a, Decimal):
            return _scale(a, right)
        if isinstance(b, Decimal):
            return _scale(b, left)
        raise _refuse(op, left, right, "multiply a number of days by a plain number, as in 3 * 7 days")
    _nonzero(right)
    if op.text == "/":
        if isinstance(a, Decimal) and isinstance(b, Decimal):
            return a / b
        if isinstance(a, Days) and isinstance(b, Decimal):
            return Days(a.amount / b)
        if isinstance(a, Days) and isinstance(b, Days):
            return a.amount / b.amount  # (2024-03-01 - 2024-01-01) / 1 week = weeks
        if isinstance(a, Months) and isinstance(b, Months):
            return Decimal(a.count) / Decimal(b.count)
        raise _refuse(op, left, right, "divide numbers, or days by days: (2024-03-01 - 2024-01-01) / 1 week")
    if not (isinstance(a, Decimal) and isinstance(b, Decimal)):
        raise _refuse(op, left, right, f"'{op.text}' works on plain numbers only")
    quotient, remainder = _floor_divmod(a, b)
    return quotient if op.text == "//" else remainder


def _floor_divmod(a: Decimal, b: Decimal) -> tuple[Decimal, Decimal]:
    # divmod truncates, and refuses (InvalidOperation) a quotient too long to be exact; then
    # shift to floor semantics, as Python's integers have them: -7 // 2 = -4 and -7 % 3 = 2.
    quotient, remainder = divmod(a, b)
    if remainder and (remainder < 0) != (b < 0):
        quotient, remainder = quotient - 1, remainder + b
    return quotient, remainder


# --- error bounds per step (see calc_precision) ----------------------------------------


def _amount(value: Value) -> Decimal | None:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, Days):
        return value.amount
    return None  # dates and month counts are exact: rounded spans are refused before they apply


def _sum_error(op: _Token, left: _Operand, right: _Operand, value: Value) -> float:
    a, b, result = _amount(left.value), _amount(right.value), _amount(value)
    if a is None or b is None or result is None:
        return 0.0
    if right.percent and not left.percent:  # a ± b% = a * (1 ± b)
        factor = Decimal(1) + b if op.text == "+" else Decimal(1) - b
        return left.error + precision.sum_error(Decimal(1), 0.0, b, right.error, factor)
    return precision.sum_error(a, left.error, b, right.error, result)


def _too_close_to_call(operand: _Operand, what: str) -> CalculationError:
    return CalculationError(
        f"{what} of {operand.where} cannot be decided: the value was rounded along the way (by a division "
        "such as 1/3, a root, or more than 34 digits) and lies too close to where the answer jumps; "
        "rearrange it so the division comes last, or round it first",
        operand.position,
    )


def _floor_division_error(
    op: str, left: _Operand, right: _Operand, value: Value, rounded: bool, label: str | None = None
) -> float:
    """`//` and `%` (and mod()) jump at whole quotients: refuse when a rounded quotient may sit on one."""
    if not (left.error or right.error):
        return precision.step(rounded)
    a, b = _number(left, f"'{op}'"), _number(right, f"'{op}'")
    error = left.error + right.error
    if not precision.same_either_side(precision.quotient(a, b), error, precision.floor_of):
        raise _too_close_to_call(left, label or f"'{op}'")
    if op == "//":
        return 0.0  # the same whole number for every value in range: exact
    assert isinstance(value, Decimal)
    whole = a - value  # b * quotient, exactly representable as computed
    return precision.sum_error(a, left.error, whole, right.error, value) + precision.step(rounded)


def _call_error(name: _Token, args: list[_Operand], value: Value, rounded: bool) -> float:
    word = name.word
    errors = [arg.error for arg in args]
    if not any(errors):
        return 0.0 if word in _SNAPPING else precision.step(rounded)
    first = args[0]
    if word in _SNAPPING:
        amount = _amount(first.value)
        assert amount is not None
        if not precision.same_either_side(amount, first.error, _SNAPPING[word](args)):
            raise _too_close_to_call(first, f"{word}()")
        return 0.0  # the same answer for every value in range: exact
    if word == "mod":
        return _floor_division_error("%", args[0], args[1], value, rounded, "mod()")
    step = precision.step(rounded)
    number = _amount(first.value)
    if word == "sqrt":
        return first.error / 2 + step
    if word in ("log", "log10"):
        assert number is not None
        return precision.log_error(number, first.error) + step
    if word == "exp":
        assert number is not None
        return precision.exp_error(number, first.error) + step
    return max(errors)  # abs, min, max: the value of an argument, as rounded as the roundest


def _negate(operand: _Operand) -> Value:
    value = operand.value
    if isinstance(value, Decimal):
        return -value
    if isinstance(value, Days):
        return Days(-value.amount)
    if isinstance(value, Months):
        return Months(-value.count)
    raise CalculationError(f"a date cannot be negated: {operand.where}; {_DATE_HINT}", operand.position)


def _power(base: _Operand, exponent: _Operand, source: str) -> Decimal:
    a = _number(base, "'^'")
    b = _number(exponent, "'^'")
    where = f"'{source}' at position {base.position + 1}"
    if a.is_zero() and b < 0:
        raise CalculationError(f"division by zero: {where} raises 0 to a negative power", base.position)
    if a < 0 and b != b.to_integral_value():
        raise CalculationError(
            f"{where} raises a negative number to a fractional power, which has no real result", base.position
        )
    if not a.is_zero() and abs(a) != 1:
        # Estimate the size first, so 9^9^9 is refused instead of computed.
        magnitude = _ROOMY.multiply(b, _ROOMY.log10(abs(a)))
        if magnitude.copy_abs() > MAX_MAGNITUDE:  # copy_abs: no rounding, so no Inexact flag
            size = "large" if magnitude > 0 else "small"
            rough = _ROOMY.to_integral_value(magnitude)
            about = f"about 1e{rough:,}" if rough.adjusted() < DISPLAY_DIGITS else "beyond any useful size"
            raise CalculationError(
                f"{where} is too {size} ({about}); results must stay between 1e-{MAX_MAGNITUDE} "
                f"and 1e{MAX_MAGNITUDE}: check the exponent",
                base.position,
            )
    return a**b


def _span(count: _Operand, unit: _Token) -> Days | Months:
    word = unit.word
    if word in _DAY_UNITS:
        return Days(_number(count, f"'{unit.text}'") * _DAY_UNITS[word])
    months = _whole(count, "a count of months or years")  # 1.5 months has no calendar meaning
    return Months(months * _MONTH_UNITS[word])


# --- functions -----------------------------------------------------------------------


def _call(name: _Token, args: list[_Operand]) -> Value:
    word = name.word
    low, high = _ARITY[word]
    if not low <= len(args) <= high:
        wanted = _SIGNATURES[word]
        raise CalculationError(
            f"{word}() takes {wanted}, but got {len(args)} argument{'s' if len(args) != 1 else ''} "
            f"{name.where}: put ', ' (comma and space) between arguments",
            name.position,
        )
    return _FUNCTIONS[word](name, args)


def _round(name: _Token, args: list[_Operand]) -> Value:
    target = args[0]
    places = _whole(args[1], "round()'s second argument (places)") if len(args) == 2 else 0
    if abs(places) > MAX_ROUND_PLACES:
        raise CalculationError(
            f"round() rounds to between -{MAX_ROUND_PLACES} and {MAX_ROUND_PLACES} places, "
            f"not {places} ({args[1].where})",
            args[1].position,
        )
    value = target.value
    amount = value.amount if isinstance(value, Days) else _number(target, "round()")
    if amount.as_tuple().exponent < -places:  # type: ignore[operator]  # finite numbers only here
        # Halves go away from zero (2.5 -> 3), the rule people expect for money.
        amount = amount.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return Days(amount) if isinstance(value, Days) else amount


def _extreme(name: _Token, args: list[_Operand]) -> Value:
    kinds = {_kind(arg.value) for arg in args}
    if len(kinds) > 1 or isinstance(args[0].value, Months):
        raise CalculationError(
            f"{name.word}() compares numbers, dates, or numbers of days, one kind at a time "
            f"{name.where}; it got {', '.join(sorted(kinds))}",
            name.position,
        )
    values = [arg.value for arg in args]
    return min(values) if name.word == "min" else max(values)  # type: ignore[type-var]  # one kind, checked above


def _absolute(name: _Token, args: list[_Operand]) -> Value:
    value = args[0].value
    if isinstance(value, Days):
        return Days(abs(value.amount))
    return abs(_number(args[0], "abs()"))


def _positive(name: _Token, arg: _Operand) -> Decimal:
    number = _number(arg, f"{name.word}()")
    if number <= 0:
        raise CalculationError(
            f"{name.word}() needs a positive number, but {arg.where} is {format_number(number)}", arg.position
        )
    return number


def _square_root(name: _Token, args: list[_Operand]) -> Value:
    number = _number(args[0], "sqrt()")
    if number < 0:
        raise CalculationError(
            f"sqrt() needs a number of at least 0, but {args[0].where} is {format_number(number)}",
            args[0].position,
        )
    return number.sqrt()


def _make_date(name: _Token, args: list[_Operand]) -> Value:
    if len(args) == 1 and isinstance(args[0].value, date):
        return args[0].value  # date(2024-03-01) reads the same as 2024-03-01
    if len(args) == 3:
        year, month, day = (_whole(arg, "date()") for arg in args)
        try:
            return date(year, month, day)
        except (ValueError, OverflowError):
            raise CalculationError(
                f"date({year}, {month}, {day}) {name.where} is not a calendar date: check the month and day",
                name.position,
            ) from None
    raise CalculationError(
        f"date() {name.where} takes a date or a year, month and day: date(2024-03-01) or date(2024, 3, 1)",
        name.position,
    )


def _modulo(name: _Token, args: list[_Operand]) -> Value:
    a, b = _number(args[0], "mod()"), _number(args[1], "mod()")
    _nonzero(args[1])
    return _floor_divmod(a, b)[1]


_Function = Callable[[_Token, list[_Operand]], Value]
_FUNCTIONS: dict[str, _Function] = {
    "round": _round,
    "mod": _modulo,
    "abs": _absolute,
    "min": _extreme,
    "max": _extreme,
    "sqrt": _square_root,
    "log": lambda name, args: _positive(name, args[0]).ln(),
    "log10": lambda name, args: _positive(name, args[0]).log10(),
    "exp": lambda name, args: _number(args[0], "exp()").exp(),
    "floor": lambda name, args: _number(args[0], "floor()").to_integral_value(rounding=ROUND_FLOOR),
    "ceil": lambda name, args: _number(args[0], "ceil()").to_integral_value(rounding=ROUND_CEILING),
    "date": _make_date,
}
# Arguments each function accepts (min/max take any number, within the expression limit).
_ARITY: dict[str, tuple[int, int]] = {
    "round": (1, 2),
    "mod": (2, 2),
    "min": (1, MAX_EXPRESSION_CHARS),
    "max": (1, MAX_EXPRESSION_CHARS),
    "date": (1, 3),
    **{word: (1, 1) for word in ("abs", "sqrt", "log", "log10", "exp", "floor", "ceil")},
}
_SIGNATURES: dict[str, str] = {
    "round": "(x) or (x, places)",
    "mod": "(a, b), the remainder of a / b",
    "min": "one or more values",
    "max": "one or more values",
    "date": "(2024-03-01) or (year, month, day)",
    **{word: "one number" for word in ("abs", "sqrt", "log", "log10", "exp", "floor", "ceil")},
}


def _snap_round(args: list[_Operand]) -> Callable[[Decimal, Context], Decimal]:
    places = int(args[1].value) if len(args) == 2 and isinstance(args[1].value, Decimal) else 0
    unit = Decimal(1).scaleb(-places)
    return lambda x, context: x.quantize(unit, rounding=ROUND_HALF_UP, context=context)


# Functions whose answer jumps (at whole numbers, or halves for round): given their arguments,
# the step itself, so a rounded argument can be checked against both ends of its range.
_SNAPPING: dict[str, Callable[[list[_Operand]], Callable[[Decimal, Context], Decimal]]] = {
    "floor": lambda args: precision.floor_of,
    "ceil": lambda args: lambda x, context: x.to_integral_value(rounding=ROUND_CEILING, context=context),
    "round": _snap_round,
}
