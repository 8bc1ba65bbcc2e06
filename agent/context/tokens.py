"""Token estimates between model responses (the response's usage is the real count)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..usage import Usage

# Close enough for English text and JSON; calibrated against real usage as the run goes.
CHARS_PER_TOKEN = 4


def estimate_chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


class ContextMeter:
    """Context size = the last response's input + cache tokens, plus an estimate of what was added since."""

    def __init__(self) -> None:
        self.last_actual = 0
        self.chars_at_last = 0

    def observe(self, usage: Usage, chars_sent: int) -> None:
        self.last_actual = usage.context_tokens
        self.chars_at_last = chars_sent

    def estimate(self, chars_now: int) -> int:
        if not self.last_actual:
            return chars_now // CHARS_PER_TOKEN
        return max(0, self.last_actual + (chars_now - self.chars_at_last) // CHARS_PER_TOKEN)
