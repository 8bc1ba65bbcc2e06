"""read_page's `near` (agent/tools/near.py): found where a pattern of its words would find it, in time
linear in the page and `near` together. Generated over pages and `near`s, and over hostile pairs: a
repetitive page and a long `near` that almost matches everywhere (a pattern built from `near` took
4.8 s on a 1 MB page, holding the event loop of every run in the worker)."""
from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from agent.tools.near import start_of

# Words that overlap (a prefix of another, repeats) and every kind of space str.split and \s agree on.
WORDS = ["a", "ab", "b", "ETF", "etf", "fee", "fees", "0.03%", "[s1]", "【1†x】", "Straße"]
SPACES = [" ", "  ", "\n", "\n\n", "\t", "\xa0", "\u2028", "\x1c", " \n\n "]


def _by_pattern(text: str, near: str) -> int | None:
    """The first version: a pattern of `near`'s words (the reference for what is found)."""
    words = near.lower().split()
    if not words:
        return None
    found = re.compile(r"\s+".join(re.escape(w) for w in words), re.I).search(text)
    if found is None:
        return None
    block = text.rfind("\n\n", 0, found.start())
    return 0 if block < 0 else block + 2


pages = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SPACES)), max_size=40).map(
    lambda parts: "".join(w + s for w, s in parts)
)
nears = st.lists(st.sampled_from(WORDS), max_size=5).flatmap(
    lambda words: st.lists(st.sampled_from(SPACES), min_size=len(words), max_size=len(words)).map(
        lambda spaces: "".join(w + s for w, s in zip(words, spaces, strict=True))
    )
)


@settings(max_examples=400, deadline=None)
@given(page=pages, near=nears, lead=st.sampled_from(["", " ", "\n\n"]))
def test_near_finds_the_block_a_pattern_of_its_words_finds(page: str, near: str, lead: str) -> None:
    text = lead + page
    # casefold matches "STRASSE" to "Straße" where the pattern's case-insensitivity does not: compare
    # on the words both treat alike.
    if "Straße" not in text + near:
        assert start_of(text, near) == _by_pattern(text, near), (text, near)
    found = start_of(text, near)
    if found is not None:
        assert found == 0 or text[found - 2 : found] == "\n\n", "a block starts after a blank line"
        words = " ".join(near.casefold().split())
        assert words in " ".join(text[found:].split()).casefold(), "the words are in that block or after it"


def test_near_is_case_and_spacing_blind_and_says_none_when_absent() -> None:
    text = "# Fees\n\nThe fund's   expense\nratio is 0.03%.\n\n# Tracking\n\nSTRASSE and more."
    assert start_of(text, "EXPENSE ratio") == text.index("The fund")
    assert start_of(text, "tracking") == text.index("# Tracking")
    assert start_of(text, "straße") == text.index("STRASSE")
    assert start_of(text, "ratio expense") is None
    assert start_of(text, "  \n ") is None


# --- time: linear in the page and `near` together ----------------------------------------------

SMALL = 4_000  # characters of page; the large input is 10× this, with a `near` 10× as long
# Linear grows ~10× for the 10× input (page and near both), the pattern's page × near ~100×: 30× leaves
# room for a loaded machine (the same bound as tests/test_linear_patterns.py).
MAX_GROWTH = 30.0
REPEATS = 3
RECHECK_REPEATS = 9
FLOOR = 20e-6


def _hostile(size: int) -> list[tuple[str, str]]:
    """Repetitive pages with a `near` that matches a long way at every place and then misses."""
    made = []
    for word, space in (("a", " "), ("ab", "\n"), ("fee", " \t "), ("x", "\n\n"), ("0.03%", "\xa0")):
        page = (word + space) * (size // len(word + space))
        near_words = max(2, size // 200)
        made.append((page, " ".join([word] * near_words + ["missing"])))
        made.append((page + "end", " ".join([word] * near_words + ["end"])))  # found, at the very end
    return made


def _slowest(pairs: list[tuple[str, str]], repeats: int) -> float:
    def once(page: str, near: str) -> float:
        start = time.perf_counter()
        start_of(page, near)
        return time.perf_counter() - start

    return max(min(once(page, near) for _ in range(repeats)) for page, near in pairs)


def test_near_time_grows_linearly_with_a_hostile_page_and_near() -> None:
    for small, large in zip(_hostile(SMALL), _hostile(SMALL * 10), strict=True):
        small_time = max(_slowest([small], REPEATS), FLOOR)
        large_time = _slowest([large], REPEATS)
        if large_time / small_time >= MAX_GROWTH:  # a stall, or real growth: only growth survives a longer look
            small_time = max(_slowest([small], RECHECK_REPEATS), FLOOR)
            large_time = _slowest([large], RECHECK_REPEATS)
        assert large_time / small_time < MAX_GROWTH, (
            f"near of {len(large[1]):,} chars on a {len(large[0]):,}-char page took {large_time * 1000:.1f} ms "
            f"against {small_time * 1000:.2f} ms on {len(small[0]):,}: superlinear on {large[0][:30]!r}…"
        )
