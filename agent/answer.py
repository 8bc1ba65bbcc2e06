"""The final answer's shape: the summary the report publishes, without the model's thinking.

The prompt asks for the answer inside `<summary>…</summary>`; whatever the model writes
outside the tag (its reflection, a "Checking:" line) is working text and never published.
A tag, rather than a `finish` tool, because the final turn often runs with tools switched
off (the budget's FINAL TURN and a stop's finalization send `tool_choice: none`), and the
same shape must hold on every path that ends a run.

When the model ignores the shape, the fallback keeps the answer and drops only lines that
are plainly the fixed reflection terms the prompt asks for between batches ("Found: …",
"Missing: …", "Next: …", "Checking: …"); if nothing else is left, the text is kept whole:
an imperfect summary beats an empty report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

SUMMARY_TAG = "summary"
# The tags are found one after the other, not with a lazy `<summary>(.*?)</summary>`: that scans
# to the end again from every unclosed opening tag (quadratic in "<summary>" repeated).
_OPEN_TAG = re.compile(rf"<{SUMMARY_TAG}>", re.I)
_CLOSE_TAG = re.compile(rf"</{SUMMARY_TAG}>", re.I)
_OPENED = re.compile(rf"<{SUMMARY_TAG}>(.*)$", re.S | re.I)  # cut off by the output limit
_STRAY_TAG = re.compile(rf"</?{SUMMARY_TAG}>", re.I)
# Reflection terms from the system prompt; a line that starts with one is working text.
REFLECTION_TERMS = (
    "found",
    "missing",
    "enough",
    "next",
    "checking",
    "plan",
    "thinking",
    "reflection",
    "still missing",
    "what i found",
    "what is missing",
    "next step",
    "is it enough",
)
_REFLECTION_LINE = re.compile(
    r"^\s*(?:[-*•]\s*)?(?:\*\*|_)?(?:" + "|".join(re.escape(t) for t in REFLECTION_TERMS) + r")\b[^:\n]{0,20}:", re.I
)

_BLANK_LINES = re.compile(r"\n{3,}")

Shape = Literal["tagged", "unclosed", "cleaned", "untagged"]


@dataclass(frozen=True)
class Answer:
    summary: str
    shape: Shape  # how the summary was found: logged, and tests assert on it


def tagged_texts(text: str) -> list[str]:
    """What each closed <summary>…</summary> holds, in order: one pass over `text`."""
    found: list[str] = []
    at = 0
    while (opened := _OPEN_TAG.search(text, at)) and (closed := _CLOSE_TAG.search(text, opened.end())):
        found.append(text[opened.end() : closed.start()])
        at = closed.end()
    return found  # an opening tag with no closing one after it has none after any later one either


def final_answer(text: str) -> Answer:
    """The publishable summary in `text` (a final turn's text blocks joined)."""
    tagged = [m.strip() for m in tagged_texts(text) if m.strip()]
    if tagged:
        return Answer(tagged[-1], "tagged")  # a model that drafts twice means its last version
    opened = _OPENED.search(text)
    if opened and opened.group(1).strip():
        return Answer(_STRAY_TAG.sub("", opened.group(1)).strip(), "unclosed")
    kept = _drop_reflection(_STRAY_TAG.sub("", text))
    if kept and kept != text.strip():
        return Answer(kept, "cleaned")
    return Answer(_STRAY_TAG.sub("", text).strip(), "untagged")


def _drop_reflection(text: str) -> str:
    """Drop reflection lines and the lines that continue them (up to the next blank line)."""
    kept: list[str] = []
    in_reflection = False
    for line in text.splitlines():
        if _REFLECTION_LINE.match(line):
            in_reflection = True
            continue
        if not line.strip():
            in_reflection = False
        if not in_reflection:
            kept.append(line)
    return _BLANK_LINES.sub("\n\n", "\n".join(kept)).strip()
