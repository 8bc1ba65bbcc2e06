"""The organization's rate limits as the Messages API applies and reports them.

Token buckets per model for requests, input tokens and output tokens per minute, refilled
continuously (the API's documented algorithm). Every response carries the
`anthropic-ratelimit-{requests,input-tokens,output-tokens,tokens}-{limit,remaining,reset}`
headers (remaining tokens rounded down to the thousand, as the API rounds; reset in RFC 3339:
when the bucket is full again). Input tokens count what is not read from the cache
(`input_tokens` + `cache_creation_input_tokens`); output tokens count what was written.

Limits are reported always and enforced only when a test sets them (`FakeAnthropic.limit`):
then a request that finds a bucket empty is answered 429 `rate_limit_error` with `retry-after`
(whole seconds, rounded up) and the same headers, as the API does.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

# What the headers report when a test sets nothing (generous: never enforced).
REPORTED_REQUESTS = 4_000
REPORTED_INPUT_TOKENS = 2_000_000
REPORTED_OUTPUT_TOKENS = 400_000
NAMES = {"requests": "requests", "input_tokens": "input-tokens", "output_tokens": "output-tokens"}


@dataclass
class _Bucket:
    limit: float
    level: float
    at: float

    def refill(self, now: float) -> None:
        self.level = min(self.limit, self.level + (now - self.at) * self.limit / 60.0)
        self.at = now

    def seconds_to(self, amount: float) -> float:
        return max(0.0, (min(amount, self.limit) - self.level) / (self.limit / 60.0))


@dataclass
class OrganizationLimits:
    enforced: bool = False
    requests: float = REPORTED_REQUESTS
    input_tokens: float = REPORTED_INPUT_TOKENS
    output_tokens: float = REPORTED_OUTPUT_TOKENS
    _buckets: dict[tuple[str, str], _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    rate_limited: int = 0  # 429s answered
    # The organization's other users have just spent this minute: buckets start empty.
    start_empty: bool = False

    def _bucket(self, model: str, dimension: str, now: float) -> _Bucket:
        bucket = self._buckets.get((model, dimension))
        limit = float(getattr(self, dimension))
        if bucket is None or bucket.limit != limit:
            bucket = _Bucket(limit, 0.0 if self.enforced and self.start_empty else limit, now)
            self._buckets[(model, dimension)] = bucket
        bucket.refill(now)
        return bucket

    def admit(self, model: str, input_tokens: int) -> float | None:
        """None when the request may go (its request and input tokens are taken), else the
        seconds to wait (the 429's retry-after)."""
        now = time.monotonic()
        with self._lock:
            needs = {"requests": 1.0, "input_tokens": float(input_tokens), "output_tokens": 1.0}
            buckets = {d: self._bucket(model, d, now) for d in needs}
            if self.enforced:
                short = max(buckets[d].seconds_to(n) for d, n in needs.items())
                if short > 0:
                    self.rate_limited += 1
                    return short
            buckets["requests"].level -= 1
            buckets["input_tokens"].level -= input_tokens
            return None

    def spend_output(self, model: str, output_tokens: int) -> None:
        with self._lock:
            self._bucket(model, "output_tokens", time.monotonic()).level -= output_tokens

    def headers(self, model: str) -> dict[str, str]:
        now = time.monotonic()
        out: dict[str, str] = {}
        with self._lock:
            total_limit = total_remaining = 0.0
            latest = 0.0
            for dimension, name in NAMES.items():
                bucket = self._bucket(model, dimension, now)
                remaining = max(0.0, bucket.level)
                if dimension != "requests":
                    total_limit += bucket.limit
                    total_remaining += remaining
                    remaining = math.floor(remaining / 1000) * 1000
                full_in = bucket.seconds_to(bucket.limit)
                latest = max(latest, full_in)
                out[f"anthropic-ratelimit-{name}-limit"] = str(int(bucket.limit))
                out[f"anthropic-ratelimit-{name}-remaining"] = str(int(remaining))
                out[f"anthropic-ratelimit-{name}-reset"] = _rfc3339(full_in)
            out["anthropic-ratelimit-tokens-limit"] = str(int(total_limit))
            out["anthropic-ratelimit-tokens-remaining"] = str(int(math.floor(total_remaining / 1000) * 1000))
            out["anthropic-ratelimit-tokens-reset"] = _rfc3339(latest)
        return out


def _rfc3339(seconds_from_now: float) -> str:
    when = datetime.fromtimestamp(time.time() + seconds_from_now, tz=UTC).replace(microsecond=0)
    return when.isoformat().replace("+00:00", "Z")
