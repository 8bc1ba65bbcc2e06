"""The JSON object in a model's text, found in one pass."""

from __future__ import annotations


def json_object_text(text: str) -> str | None:
    """From the first `{` to the last `}`: what a greedy `\\{.*\\}` (DOTALL) matches, in linear time.

    The pattern rescans to the end from every `{` when no `}` follows (quadratic in "{" repeated).
    """
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else None
