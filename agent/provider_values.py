"""Values a model provider sends, read strictly and held to a sane range.

A provider's answer is untrusted input like any other: one `retry-after: 1000000000`, a
`…-reset` dated 2999, a limit of 0.001 or a negative `remaining` must not pause a run for years
or the organization at all. Every number the bot reads from a provider's headers or body goes
through one of these readers: a value that is not what the specification allows (a plain
non-negative decimal, an HTTP date, an RFC 3339 time) is not read at all (None), and one that is
read is clamped to what the bot will act on (a pause of at most MAX_PAUSE_SECONDS, a limit
within LIMIT_FACTOR of the one in force, token counts within MAX_TOKENS_PER_ANSWER).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime

__all__ = [
    "LIMIT_FACTOR",
    "MAX_PAUSE_SECONDS",
    "MAX_TOKENS_PER_ANSWER",
    "MIN_LIMITS",
    "count",
    "held_limit",
    "pause_seconds",
    "reset_seconds",
    "token_count",
]

# The longest one provider answer may hold a request back: a per-minute limit refills within a
# minute, so a longer wait is not about rate; past it the request asks again (or gives up, bounded).
MAX_PAUSE_SECONDS = 120.0
# A limit the service names moves the one in force by at most this factor per answer: a hostile or
# garbled header (0.001 a minute) cannot empty the organization's capacity at once, and a real
# change of tier is followed within a few answers.
LIMIT_FACTOR = 4.0
# No limit the service names is taken below these (per minute): one request still makes progress.
MIN_LIMITS = {"requests": 1.0, "input_tokens": 1_000.0, "output_tokens": 1_000.0}
# One answer's usage counts are at most this (a 1M-token context plus its output, with room):
# past it the figure is garbled, and counting it would end a run's budget for nothing.
MAX_TOKENS_PER_ANSWER = 10_000_000
# A plain non-negative decimal, as the specifications write numbers (no sign, exponent, inf or nan).
# A whole value (\A): searched, it is tried at one place, not again from each space of a run.
_DECIMAL = re.compile(r"\A[ \t]*+([0-9]{1,15})(\.[0-9]{1,9})?[ \t]*")


def count(value: object) -> float | None:
    """A non-negative decimal read strictly (a header's text, or a JSON number); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
        return number if math.isfinite(number) and number >= 0 else None
    if not isinstance(value, str) or not _DECIMAL.fullmatch(value):
        return None
    return float(value)


def token_count(value: object) -> int:
    """A usage figure of one answer: a whole non-negative count up to MAX_TOKENS_PER_ANSWER, else 0."""
    number = count(value)
    return 0 if number is None else int(min(number, MAX_TOKENS_PER_ANSWER))


def _clamped_pause(seconds: float) -> float:
    return min(MAX_PAUSE_SECONDS, max(0.0, seconds))


def pause_seconds(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float | None:
    """How long the answer asks us to hold off: `retry-after-ms`, else `retry-after` (seconds or an
    HTTP date), clamped to [0, MAX_PAUSE_SECONDS]; None when it names no valid pause."""
    lower = {k.lower(): v for k, v in headers.items()}
    millis = count(lower.get("retry-after-ms"))
    if millis is not None:
        return _clamped_pause(millis / 1000)
    raw = lower.get("retry-after")
    if raw is None:
        return None
    seconds = count(raw)
    if seconds is not None:
        return _clamped_pause(seconds)
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # an HTTP date is always GMT
        return None
    return _clamped_pause(when.timestamp() - now())


def reset_seconds(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds until an `anthropic-ratelimit-*-reset` time (RFC 3339, with its offset), clamped to
    [0, MAX_PAUSE_SECONDS]; None when it is not such a time."""
    if not value or len(value) > 40:
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    try:
        return _clamped_pause(when.timestamp() - now())
    except (OverflowError, OSError):
        return None


def held_limit(dimension: str, heard: float | None, in_force: float | None) -> float | None:
    """A limit the service named, as the bot will hold it: at least MIN_LIMITS, and within
    LIMIT_FACTOR of the limit in force (when there is one); None when nothing valid was named."""
    if heard is None or not math.isfinite(heard) or heard <= 0:
        return None
    held = max(heard, MIN_LIMITS[dimension])
    if in_force is not None and in_force > 0:
        held = min(max(held, in_force / LIMIT_FACTOR), in_force * LIMIT_FACTOR)
    return held
