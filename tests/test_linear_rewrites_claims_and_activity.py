"""The patterns rewritten to run in linear time after tests/test_linear_rewrites.py (the claim check's
text, provider values, the export's markers, activity lines, the Home tab's viewer) read every input as
the quadratic ones they replace: each old pattern is kept here as the reference and compared on
generated text made of the characters the patterns care about."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agent import activity
from agent.claims import text as claim_text
from agent.markers import MARKER_RE
from agent.provider_values import _DECIMAL, count
from bot.publishing.export import _MARKER
from bot.slack.events import SLACK_USER_ID, SLACK_USER_ID_PATTERN

# The patterns as they were before the rewrite (quadratic on a long run of one character).
OLD_END = re.compile(r"[.!?…]+[\"'”’»)\]]*(?=\s)|[。！？]+|\n")
OLD_WORD_BEFORE = re.compile(r"([\w.-]+)$")
OLD_MARKDOWN = re.compile(r"\*\*|__|`|^\s*(?:[-*+]|\d+[.)])\s+|^#+\s*|\|", re.MULTILINE)
OLD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
OLD_SPACE_BEFORE_STOP = re.compile(r"\s+([.,;:!?])(?=\s|$)")
OLD_DECIMAL = re.compile(r"[ \t]*([0-9]{1,15})(\.[0-9]{1,9})?[ \t]*")
OLD_MARKER = re.compile(r"\s*\[s\d+\]")

TEXT_CHARS = ".!?…\"'”’»)]。！？\n \t\r\u2028[(*_`-+#|:;,s0123456789aZé"
texts = st.text(alphabet=TEXT_CHARS, max_size=80)
# Runs of one piece, the shape that made the old patterns slow, joined with other pieces.
PIECES = (
    ".",
    " ",
    "\n",
    "\r",
    "\t",
    "\u2028",
    "[",
    "]",
    "(",
    ")",
    "[s1]",
    "[a](b)",
    "- ",
    "1. ",
    "**",
    "a",
    "a.",
    "Dr. ",
    '?"',
)
pieced = st.lists(st.tuples(st.sampled_from(PIECES), st.integers(1, 6)), max_size=12).map(
    lambda runs: "".join(piece * times for piece, times in runs)
)
any_text = texts | pieced
EXAMPLES = settings(max_examples=400, deadline=None)


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [found.span() for found in pattern.finditer(text)]


@EXAMPLES
@given(any_text)
def test_sentence_ends_are_found_where_they_were(text: str) -> None:
    assert _spans(claim_text._END, text) == _spans(OLD_END, text)


@EXAMPLES
@given(any_text, st.integers(0, 80))
def test_the_word_before_a_stop_is_the_one_the_pattern_found(text: str, end: int) -> None:
    end = min(end, len(text))
    old = OLD_WORD_BEFORE.search(text, 0, end)
    assert claim_text._word_before(text, end) == (old.group(1) if old else "")


@EXAMPLES
@given(any_text)
def test_links_become_their_words_as_they_did(text: str) -> None:
    assert claim_text._unlink(text) == OLD_LINK.sub(r"\1", text)


@EXAMPLES
@given(any_text)
def test_a_space_before_a_stop_goes_as_it_did(text: str) -> None:
    assert claim_text._SPACE_BEFORE_STOP.sub(r"\1", text) == OLD_SPACE_BEFORE_STOP.sub(r"\1", text)


@EXAMPLES
@given(any_text)
def test_markdown_goes_as_it_did_up_to_whitespace(text: str) -> None:
    """The old bullet pattern could start at an earlier blank line; what it took more was whitespace,
    and plain_claim makes every run of whitespace one space."""
    assert " ".join(claim_text._MARKDOWN.sub(" ", text).split()) == " ".join(OLD_MARKDOWN.sub(" ", text).split())


def _old_plain_claim(sentence: str) -> str:
    text = MARKER_RE.sub(" ", sentence)
    text = OLD_LINK.sub(r"\1", text)
    text = OLD_MARKDOWN.sub(" ", text)
    return OLD_SPACE_BEFORE_STOP.sub(r"\1", " ".join(text.split()))


@EXAMPLES
@given(any_text)
def test_a_claim_reads_as_it_did(text: str) -> None:
    assert claim_text.plain_claim(text) == _old_plain_claim(text)


@EXAMPLES
@given(st.text(alphabet=" \t0123456789.x\n-", max_size=30))
def test_decimals_are_read_as_they_were(value: str) -> None:
    old, new = OLD_DECIMAL.fullmatch(value), _DECIMAL.fullmatch(value)
    assert (new and new.groups()) == (old and old.groups())
    assert (count(value) is None) == (old is None)


@EXAMPLES
@given(any_text)
def test_export_drops_markers_as_it_did(text: str) -> None:
    assert _MARKER.sub("", text) == OLD_MARKER.sub("", text)


@EXAMPLES
@given(st.text(alphabet="UWuw0AZ9\n-", max_size=45))
def test_a_home_viewer_is_checked_as_before(user: str) -> None:
    assert bool(SLACK_USER_ID_PATTERN.fullmatch(user)) == bool(re.fullmatch(SLACK_USER_ID, user))


# --- activity lines: the templates read with str.find, against the lazy patterns they were ----------


def _old_patterns() -> list[tuple[str, re.Pattern[str]]]:
    found = []
    for kind, template in activity.ACTIVITY.items():
        pieces = re.split(r"\{(\w+)\}", template)
        regex = "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>.*?)" for i, p in enumerate(pieces))
        literal = sum(len(p) for p in pieces[::2])
        found.append((literal, kind, re.compile(regex + r"\Z", re.DOTALL)))
    return [(kind, pattern) for _, kind, pattern in sorted(found, key=lambda f: -f[0])]


OLD_ACTIVITY = _old_patterns()


def _old_parse(line: str, kinds: frozenset[str] | None = None) -> tuple[str, dict[str, str]] | None:
    for kind, pattern in OLD_ACTIVITY:
        if kinds is not None and kind not in kinds:
            continue
        match = pattern.match(line)
        if match:
            return kind, match.groupdict()
    return None


# Values made of the templates' own literal pieces, so that a line can fit a template in several ways.
LITERALS = sorted({piece for template in activity.ACTIVITY.values() for piece in re.split(r"\{\w+\}", template)} - {""})
values = st.lists(st.sampled_from([*LITERALS, "a", ":", " ", ".", "\n", "—", "1"]), max_size=5).map("".join)


@EXAMPLES
@given(st.sampled_from(sorted(activity.ACTIVITY)), st.data())
def test_activity_lines_are_read_as_they_were(kind: str, data: st.DataObject) -> None:
    names = re.findall(r"\{(\w+)\}", activity.ACTIVITY[kind])
    line = activity.ACTIVITY[kind].format(**{name: data.draw(values) for name in names})
    line = data.draw(st.sampled_from([line, line[1:], line[:-1], line + data.draw(values)]))
    assert activity.parse(line) == _old_parse(line)
    board = frozenset({"board", "branch"})
    assert activity.parse(line, board) == _old_parse(line, board)


@EXAMPLES
@given(values)
def test_any_line_is_read_as_it_was(line: str) -> None:
    assert activity.parse(line) == _old_parse(line)
