"""Every compiled pattern in agent, bot and jobs runs in time linear in its input: the class
of a 40,000-character DM holding serve's loop for seconds (issue 35, item 2). The patterns are
collected by walking the modules, so a new one is covered without being listed here."""

from __future__ import annotations

import importlib
import pkgutil
import re
import time

import pytest

PACKAGES = ("agent", "bot", "jobs")
SMALL = 600  # characters; the large input is 10× this
# Linear time grows ~10× for a 10× input, quadratic ~100×: 30× leaves room for a loaded machine.
MAX_GROWTH = 30.0
REPEATS = 3  # each input timed this many times and the fastest kept: load only adds time
# A pair that grew too much is timed again this many times before it fails: a busy 2-core CI can
# stall all three first tries of the large input, not nine spread over a longer stretch.
RECHECK_REPEATS = 9
FLOOR = 20e-6  # seconds; below this the small input is too fast to time, so it counts as this


def _patterns() -> dict[str, re.Pattern[str]]:
    found: dict[str, re.Pattern[str]] = {}
    seen: set[str] = set()
    for name in PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if info.name.endswith("__main__"):
                continue  # runs the command line on import
            try:
                module = importlib.import_module(info.name)
            except Exception:  # an optional extra's module; its patterns are not reachable either
                continue
            for attr, value in vars(module).items():
                if isinstance(value, re.Pattern) and isinstance(value.pattern, str) and value.pattern not in seen:
                    seen.add(value.pattern)  # one test per pattern, under the first module that has it
                    found[f"{info.name}.{attr}"] = value
    return found


PATTERNS = _patterns()
FILLERS = (" ", "\n", " \n", "a", "1", "1,", "<", ">", "{", "[", "[s1]", "<@U1>", "@", "#", ".", "x ", "†", "【")


def _literals(pattern: str) -> list[str]:
    """The pattern's literal words and marks, the prefixes an attacker would repeat."""
    words = re.findall(r"(?<!\\)[A-Za-z]{2,}|[<>@#$%&:/|!\-†【】\"']", pattern)
    return list(dict.fromkeys(words))[:12]


def _inputs(pattern: str, size: int) -> list[str]:
    literals = _literals(pattern)
    head = " ".join(literals[:3])
    made = []
    for filler in (*FILLERS, *literals):
        run = filler * (size // len(filler))
        made += [run + "x", head + " " + run + "x", run + "\x00"]
    joined = "".join(literals) or "a"
    made.append(joined * (size // len(joined)))
    return made


def _slowest(pattern: re.Pattern[str], inputs: list[str], repeats: int = REPEATS) -> float:
    def once(text: str) -> float:
        start = time.perf_counter()
        pattern.search(text)
        pattern.match(text)
        for _ in pattern.finditer(text):
            pass
        return time.perf_counter() - start

    return max(min(once(text) for _ in range(repeats)) for text in inputs)


def _growth(pattern: re.Pattern[str], small: str, large: str, repeats: int) -> tuple[float, float, float]:
    small_time = max(_slowest(pattern, [small], repeats), FLOOR)
    large_time = _slowest(pattern, [large], repeats)
    return large_time / small_time, small_time, large_time


def test_the_walk_finds_the_patterns_that_meet_messages_and_pages() -> None:
    for name in (
        "bot.desk.budgets.COMMAND",
        "bot.desk.recheck.RECHECK",
        "bot.surface.reading.GO_DEEPER",
        "agent.context.stubs._RESULT_TITLE",  # was compiled inline in a function
    ):
        assert name in PATTERNS


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_pattern_time_grows_linearly_with_hostile_input(name: str) -> None:
    pattern = PATTERNS[name]
    for small, large in zip(_inputs(pattern.pattern, SMALL), _inputs(pattern.pattern, SMALL * 10), strict=True):
        growth, small_time, large_time = _growth(pattern, small, large, REPEATS)
        if growth >= MAX_GROWTH:  # a stall or real growth: only real growth survives a longer look
            growth, small_time, large_time = _growth(pattern, small, large, RECHECK_REPEATS)
        assert growth < MAX_GROWTH, (
            f"{name} ({pattern.pattern!r}) took {large_time * 1000:.1f} ms on {len(large):,} chars against "
            f"{small_time * 1000:.2f} ms on {len(small):,}: superlinear on {large[:40]!r}…"
        )


# A pattern compiled inside a function is outside the walk above, and one built there from what the
# function is given is written by whoever gave it: read_page's `near` was such a pattern, made of the
# model's words (4.8 s on a 1 MB page; now a linear search, agent/tools/near.py). These build theirs
# from constants alone.
BUILT_FROM_CONSTANTS = {
    "agent/figures.py:_figure_re",  # the figure patterns, from the module's own pieces, at import
    "jobs/upkeep/key_audit.py:_families",  # the key catalogue's templates, at start-up
}
RE_CALLS = {"compile", "search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split"}


def test_no_function_builds_a_pattern_from_what_it_is_given() -> None:
    import ast

    from tests.paths import ROOT

    built = set()
    for name in PACKAGES:
        for path in sorted((ROOT / name).rglob("*.py")):
            for function in ast.walk(ast.parse(path.read_text())):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for call in ast.walk(function):
                    if (
                        isinstance(call, ast.Call)
                        and isinstance(call.func, ast.Attribute)
                        and isinstance(call.func.value, ast.Name)
                        and call.func.value.id == "re"
                        and call.func.attr in RE_CALLS
                        and call.args
                        and not isinstance(call.args[0], ast.Constant)
                    ):
                        built.add(f"{path.relative_to(ROOT)}:{function.name}")
    assert built <= BUILT_FROM_CONSTANTS, f"patterns built at run time: {sorted(built - BUILT_FROM_CONSTANTS)}"
