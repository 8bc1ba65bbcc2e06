from __future__ import annotations

import ast
import re
import time
from datetime import date
from pathlib import Path

import pytest

from agent.tools import calc_engine, calculator as calculator_module
from agent.tools.calculator import (
    MAX_DEPTH,
    MAX_EXPRESSION_CHARS,
    CalculationError,
    Calculator,
    CalculatorInput,
    evaluate,
)

# A fixed run date, so "today" is deterministic; 2024 is a leap year.
TODAY = date(2024, 5, 15)


def calc(expression: str) -> str:
    return evaluate(expression, TODAY)


def calc_error(expression: str) -> str:
    with pytest.raises(CalculationError) as caught:
        evaluate(expression, TODAY)
    return str(caught.value)


# --- arithmetic ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("2 + 3 * 4", "14"),
        ("(2 + 3) * 4", "20"),
        ("10 - 4 - 3", "3"),
        ("100 / 10 / 5", "2"),
        ("2 ^ 3 ^ 2", "512"),  # right-associative
        ("2 ** 3 ** 2", "512"),
        ("-2 ^ 2", "-4"),  # the power binds tighter than the sign
        ("2 ^ -1", "0.5"),
        ("-(3 - 5)", "2"),
        ("7 // 2", "3"),
        ("-7 // 2", "-4"),  # floor division
        ("17 % 5", "2"),
        ("-7 % 3", "2"),  # the remainder takes the divisor's sign, matching floor division
        ("2 * 3 + 4 * 5", "26"),
    ],
)
def test_operators_follow_usual_precedence_and_associativity(expression: str, result: str) -> None:
    assert calc(expression) == result


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("1,234.5 + 1", "1235.5"),
        ("1,234,567 * 2", "2469134"),
        ("1_000 + 1", "1001"),
        ("1.5e3", "1500"),
        ("2.5E-3 * 4", "0.01"),
        (".5 * 4", "2"),
        ("\u22123 \u00d7 2 \u00f7 4", "-1.5"),  # typographic minus, times and divide, as pasted from pages
    ],
)
def test_numbers_are_read_in_the_forms_sources_write_them(expression: str, result: str) -> None:
    assert calc(expression) == result


def test_comma_followed_by_three_digits_is_a_thousands_separator_even_in_arguments() -> None:
    assert calc("max(1,234)") == "1234"
    assert calc("max(1, 234)") == "234"
    assert calc("round(2.345,2)") == "2.35"


# --- percentages -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("15%", "0.15"),
        ("200 * 15%", "30"),
        ("15% of 200", "30"),
        ("15 % of 200", "30"),
        ("100 + 10% of 50", "105"),
        ("(132 - 120) / 120 * 100", "10"),
    ],
)
def test_a_percent_sign_after_a_number_means_hundredths(expression: str, result: str) -> None:
    assert calc(expression) == result


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("80 + 10%", "88"),
        ("80 - 25%", "60"),
        ("80 + -10%", "72"),
        ("120 * (1 + 10%)", "132"),
        ("100 + 10% + 10%", "121"),  # each step compounds, like a desk calculator
        ("30 days + 10%", "33 days"),
    ],
)
def test_adding_or_subtracting_a_percentage_changes_the_left_side_by_that_percent(
    expression: str, result: str
) -> None:
    assert calc(expression) == result


def test_two_percentages_add_as_plain_fractions() -> None:
    assert calc("50% - 10%") == "0.4"


def test_percent_sign_between_two_numbers_is_the_remainder() -> None:
    assert calc("17 % 5") == "2"
    assert calc("17 % (2 + 3)") == "2"


# --- money-safe decimals and formatting ------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("0.1 + 0.2", "0.3"),
        ("19.99 * 3", "59.97"),
        ("1,234.56 * 1.07", "1320.9792"),
        ("0.07 * 100", "7"),
        ("1 / 3 * 3", "1"),
        ("4 / 2", "2"),
        ("10 / 4", "2.5"),
        ("1.10 + 2.20", "3.3"),
        ("0 * -1", "0"),
    ],
)
def test_decimal_arithmetic_gives_the_answer_a_person_expects(expression: str, result: str) -> None:
    assert calc(expression) == result


def test_inexact_results_show_fifteen_significant_digits() -> None:
    assert calc("2 / 3") == "0.666666666666667"
    assert calc("sqrt(2)") == "1.4142135623731"


def test_exact_results_keep_every_digit() -> None:
    assert calc("2 ^ 64") == "18446744073709551616"
    assert calc("123456789.123456789 * 1") == "123456789.123456789"


def test_very_large_or_small_results_use_exponent_notation() -> None:
    assert calc("2 ^ 100") == "1.267650600228229401496703205376e+30"
    assert calc("1 / 3e9") == "3.33333333333333e-10"
    assert calc("1e30 / 3") == "3.33333333333333e+29"


# --- rounding and functions ------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("round(3.14159, 2)", "3.14"),
        ("round(2.5)", "3"),  # halves away from zero, not to even
        ("round(-2.5)", "-3"),
        ("round(1.005, 2)", "1.01"),  # binary floats give 1.0 here
        ("round(1234.5678, -2)", "1200"),
        ("round(2 / 3, 2)", "0.67"),
        ("round(7, 2)", "7"),
        ("round(10 days / 3)", "3 days"),
    ],
)
def test_round_rounds_halves_away_from_zero(expression: str, result: str) -> None:
    assert calc(expression) == result


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("sqrt(16)", "4"),
        ("abs(-3.5)", "3.5"),
        ("min(3, 1, 2)", "1"),
        ("max(3, 1, 2)", "3"),
        ("log(e)", "1"),
        ("log10(1000)", "3"),
        ("exp(0)", "1"),
        ("floor(-2.5)", "-3"),
        ("ceil(2.1)", "3"),
        ("pi", "3.14159265358979"),
        ("e", "2.71828182845905"),
        ("2 * pi * 10", "62.8318530717959"),
        ("SQRT(9) + PI - pi", "3"),  # names are case-insensitive
        ("max(2024-01-01, 2024-03-01)", "2024-03-01"),
        ("min(3 days, 2 days)", "2 days"),
    ],
)
def test_functions_and_constants(expression: str, result: str) -> None:
    assert calc(expression) == result


# --- dates -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("2024-01-01", "2024-01-01"),
        ("2024-01-01 + 10 days", "2024-01-11"),
        ("2024-01-01 + 1 day", "2024-01-02"),
        ("2024-01-01 + 2 weeks", "2024-01-15"),
        ("2024-01-15 - 3 weeks", "2023-12-25"),
        ("2024-12-15 + 3 months", "2025-03-15"),
        ("2024-05-15 + 2 years", "2026-05-15"),
        ("2024-01-31 + 1 month + 1 day", "2024-03-01"),
        ("1 week + 2024-01-01", "2024-01-08"),
        ("2024-01-01 + 3 * 7 days", "2024-01-22"),
        ("date(2024, 2, 29)", "2024-02-29"),
    ],
)
def test_dates_move_by_days_weeks_months_and_years(expression: str, result: str) -> None:
    assert calc(expression) == result


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("2024-01-31 + 1 month", "2024-02-29"),  # leap year
        ("2023-01-31 + 1 month", "2023-02-28"),
        ("2024-03-31 - 1 month", "2024-02-29"),
        ("2024-02-29 + 1 year", "2025-02-28"),
        ("2024-02-29 + 4 years", "2028-02-29"),
        ("2024-08-31 + 1 month", "2024-09-30"),
        ("2024-01-31 + 13 months", "2025-02-28"),
    ],
)
def test_adding_months_clamps_to_the_end_of_a_shorter_month(expression: str, result: str) -> None:
    assert calc(expression) == result


@pytest.mark.parametrize(
    ("expression", "result"),
    [
        ("2024-03-01 - 2024-01-01", "60 days"),  # through February 29
        ("2023-03-01 - 2023-01-01", "59 days"),
        ("date(2024-03-01) - date(2024-01-01)", "60 days"),
        ("2024-01-01 - 2024-03-01", "-60 days"),
        ("2024-01-02 - 2024-01-01", "1 day"),
        ("days between 2024-01-01 and 2024-03-01", "60 days"),
        ("days between 2024-03-01 and 2024-01-01", "60 days"),  # between has no direction
        ("days between 2020-01-01 and 2021-01-01", "366 days"),
        ("(2024-03-01 - 2024-01-01) / 1 week", "8.57142857142857"),
        ("(2024-03-01 - 2024-01-01) / 2", "30 days"),
    ],
)
def test_subtracting_dates_counts_days(expression: str, result: str) -> None:
    assert calc(expression) == result


def test_today_is_the_date_the_tool_was_built_with() -> None:
    assert calc("today") == "2024-05-15"
    assert calc("today + 30 days") == "2024-06-14"
    assert calc("today - 2024-01-01") == "135 days"
    assert calc("days between today and 2024-12-25") == "224 days"


# --- errors name the token and its position --------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 * (3 + foo)", "unknown name 'foo' at position 10"),
        ("foo", "unknown name 'foo' at position 1"),
        ("3 bar", "unknown name 'bar' at position 3"),
        ("2 & 3", "unexpected character '&' at position 3"),
        ("$1,200 * 2", "currency sign '$' at position 1"),
        ("1.2.3 + 1", "malformed number '1.2.3' at position 1"),
        ("5 + 1.", "malformed number '1.' at position 5"),
        ("2024-3-1 + 1 day", "'2024-3-1' at position 1 looks like a date"),
        ("2023-02-29 + 1 day", "'2023-02-29' at position 1 is not a calendar date"),
        ("(1 + 2", "missing ')' to close the '(' at position 1"),
        ("max(1, 2", "missing ')' to close max( at position 1"),
        ("1 + 2)", "unmatched ')' at position 6"),
        ("2 pi", "missing operator between '2' and 'pi' at position 3"),
        ("2 (3)", "missing operator between '2' and '(' at position 3"),
        ("2 +", "ends after '+' at position 3"),
        ("* 2", "found '*'"),
        ("1, 2", "unexpected ',' at position 2"),
        ("sqrt 4", "'sqrt' at position 1 is a function"),
        ("days + 1", "'days' at position 1 needs a number before it"),
        ("1 and 2", "unexpected 'and' at position 3"),
        ("days between 2024-01-01 2024-03-01", "needs 'and' between its two dates at position 25"),
        ("days between 5 and 2024-03-01", "'5' at position 14 is a number"),
        ("round(1, 2, 3)", "round() takes (x) or (x, places), but got 3 arguments at position 1"),
        ("max()", "got 0 arguments at position 1"),
        ("round(2.5, 1.5)", "'1.5' at position 12 is not"),
        ("round(2.5, 99)", "not 99 ('99' at position 12)"),
        ("1.5 months", "'1.5' at position 1 is not"),
        ("date(2024, 13, 1)", "date(2024, 13, 1) at position 1 is not a calendar date"),
        ("date(5)", "date() at position 1 takes a date or a year, month and day"),
        ("min(1, 2024-01-01)", "min() compares numbers, dates, or numbers of days, one kind at a time"),
    ],
)
def test_syntax_errors_name_the_token_and_its_position(expression: str, expected: str) -> None:
    assert expected in calc_error(expression)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("5 / (3 - 3)", "division by zero: '(3 - 3)' at position 5 is 0"),
        ("10 // 0", "division by zero: '0' at position 7 is 0"),
        ("10 % (2 - 2)", "division by zero: '(2 - 2)' at position 6 is 0"),
        ("10 days / 0", "division by zero: '0' at position 11"),
        ("0 ^ -1", "division by zero: '0 ^ -1' at position 1"),
        ("sqrt(-4)", "sqrt() needs a number of at least 0, but '-4' at position 6 is -4"),
        ("log(0)", "log() needs a positive number, but '0' at position 5 is 0"),
        ("log10(-1)", "log10() needs a positive number, but '-1' at position 7 is -1"),
        ("(-8) ^ (1 / 3)", "negative number to a fractional power"),
        ("0 ^ 0", "'0 ^ 0' at position 1 has no numeric result"),
        ("1e40 // 3", "'1e40 // 3' at position 1 has no numeric result"),  # 40-digit quotient: not exact
        ("1e999 % 7", "has no numeric result"),
    ],
)
def test_undefined_operations_name_the_offending_part(expression: str, expected: str) -> None:
    assert expected in calc_error(expression)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2024-01-01 + 5", "cannot combine a date and a number with '+' at position 12"),
        ("2024-01-01 + 2024-01-02", "cannot combine a date and a date with '+' at position 12"),
        ("2024-01-01 * 2", "cannot combine a date and a number with '*' at position 12"),
        ("5 days + 3", "write a count of days with its unit"),
        ("1 month + 1 day", "add months and days to a date one at a time"),
        ("3 days * 2 days", "multiply a number of days by a plain number"),
        ("2024-01-01 + 1.5 days", "'1.5 days' at position 14 is not whole"),
        ("2024-01-01 + 10%", "a percentage changes a number"),
        ("-today", "a date cannot be negated: 'today' at position 2"),
        ("sqrt(2024-01-01)", "sqrt() needs a number, but '2024-01-01' at position 6 is a date"),
        ("9999-12-31 + 1 day", "falls outside the years 1 to 9999"),
        ("2024-01-01 - 1e900 months", "falls outside the years 1 to 9999"),
    ],
)
def test_mixing_dates_and_numbers_wrongly_says_how_to_write_it(expression: str, expected: str) -> None:
    message = calc_error(expression)
    assert expected in message


def test_unknown_name_error_lists_what_may_be_written() -> None:
    message = calc_error("2 * (3 + foo)")
    assert "round(x, n)" in message and "2024-01-31" in message and "+ - * / ^ %" in message


def test_empty_expression_is_refused_with_an_example() -> None:
    assert "the expression is empty" in calc_error("   ")


# --- abuse limits ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("9**9**9", "'9**9**9' at position 1 is too large (about 1e369,693,100)"),
        ("10 ^ 5000", "is too large"),
        ("2 ^ -5000", "is too small"),
        ("1.0000001 ^ 1e300", "beyond any useful size"),
        ("exp(100000)", "'exp(100000)' at position 1 is too large"),
        ("1e999 * 1e999", "'1e999 * 1e999' at position 1 is too large"),
        ("1e5000", "number '1e5000' at position 1 is out of range"),
    ],
)
def test_results_beyond_1e1000_are_refused_quickly(expression: str, expected: str) -> None:
    started = time.perf_counter()
    message = calc_error(expression)
    assert expected in message
    assert time.perf_counter() - started < 1.0  # refused, not computed


def test_an_expression_longer_than_the_limit_is_refused() -> None:
    too_long = "1 + " * (MAX_EXPRESSION_CHARS // 4) + "1"
    assert f"the limit is {MAX_EXPRESSION_CHARS}" in calc_error(too_long)


@pytest.mark.parametrize(
    "expression",
    [
        "(" * (MAX_DEPTH + 5) + "1" + ")" * (MAX_DEPTH + 5),
        "-" * (MAX_DEPTH + 5) + "1",
        "2^" * (MAX_DEPTH + 5) + "1",
        "abs(" * (MAX_DEPTH + 5) + "1" + ")" * (MAX_DEPTH + 5),
    ],
)
def test_deep_nesting_is_refused_before_it_exhausts_the_stack(expression: str) -> None:
    assert f"nests more than {MAX_DEPTH} levels deep" in calc_error(expression)


def test_moderate_nesting_is_fine() -> None:
    assert calc("((((((1 + 1))))))") == "2"
    assert calc("--1") == "1"


# --- the tool --------------------------------------------------------------------------


async def test_run_answers_expression_equals_result() -> None:
    tool = Calculator(today=TODAY)
    result = await tool.run(CalculatorInput(expression="  0.1 + 0.2 "), ctx=None)
    assert not result.is_error
    assert result.text == "0.1 + 0.2 = 0.3"


async def test_run_uses_the_date_given_at_construction() -> None:
    tool = Calculator(today=date(2024, 1, 31))
    result = await tool.run(CalculatorInput(expression="today + 1 month"), ctx=None)
    assert result.text == "today + 1 month = 2024-02-29"


def test_today_defaults_to_the_current_date() -> None:
    assert Calculator().today == date.today()


@pytest.mark.parametrize(
    "expression",
    ["2 * (3 + foo)", "1 / 0", "9**9**9", "", "2024-01-01 + 5", "(" * 100, "x" * (MAX_EXPRESSION_CHARS + 1)],
)
async def test_run_returns_an_error_result_for_bad_input(expression: str) -> None:
    result = await Calculator(today=TODAY).run(CalculatorInput(expression=expression), ctx=None)
    assert result.is_error
    assert result.text


async def test_run_error_points_a_caret_at_the_offending_token() -> None:
    result = await Calculator(today=TODAY).run(CalculatorInput(expression="2 * (3 + foo)"), ctx=None)
    message, echoed, caret = result.text.split("\n")
    assert message.startswith("unknown name 'foo' at position 10:")
    assert echoed == "  2 * (3 + foo)"
    assert caret == "  " + " " * 9 + "^"


def test_schema_and_description_say_what_the_tool_is_for_and_not_for() -> None:
    tool = Calculator(today=TODAY)
    schema = tool.schema()
    assert schema["name"] == "calculator"
    assert schema["input_schema"]["required"] == ["expression"]
    description = tool.description
    assert "web_search" in description  # look-ups go elsewhere
    assert "units" in description  # unit conversion is not supported
    assert "cite the [sN] markers" in description  # a result is not a citation
    assert "2024-01-31 + 1 month = 2024-02-29" in description


def test_every_worked_example_in_the_description_is_true() -> None:
    examples = re.findall(r"([^;:,(]*?[0-9a-z)%]) = ([0-9][0-9.\-]*(?: days)?)", Calculator.description)
    assert len(examples) >= 10
    for expression, result in examples:
        assert calc(expression.strip()) == result, expression


def test_progress_line_shows_the_expression_briefly() -> None:
    tool = Calculator(today=TODAY)
    assert tool.progress(CalculatorInput(expression="2 + 2")) == "Calculating 2 + 2"
    assert len(tool.progress(CalculatorInput(expression="1 + " * 100))) <= len("Calculating ") + 80


# --- safety ----------------------------------------------------------------------------


def test_module_never_references_eval_exec_or_compile() -> None:
    source = "".join(Path(m.__file__).read_text(encoding="utf-8") for m in (calculator_module, calc_engine))
    assert not re.search(r"\b(eval|exec|compile|__import__)\b", source)
    names = {
        node.id if isinstance(node, ast.Name) else node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.Name, ast.Attribute))
    }
    assert not names & {"eval", "exec", "compile", "__import__", "getattr", "globals", "locals"}


def test_python_syntax_is_not_evaluated() -> None:
    for attempt in ("__import__('os')", "().__class__", "[1][0]", "'a' * 3", "1 if 1 else 2", "x = 1"):
        with pytest.raises(CalculationError):
            evaluate(attempt, TODAY)
