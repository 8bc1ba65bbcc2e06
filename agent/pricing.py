"""Estimated cost of model usage. Published list prices per million tokens, by model family;
an estimate for the report footer and `inspect`, not a bill."""

from __future__ import annotations

from dataclasses import dataclass

# (input, output) USD per million tokens.
FAMILY_PRICES = {"opus": (15.0, 75.0), "sonnet": (3.0, 15.0), "haiku": (1.0, 5.0)}
DEFAULT_FAMILY = "sonnet"
CACHE_WRITE_FACTOR = 1.25  # 5-minute cache writes
CACHE_READ_FACTOR = 0.10


@dataclass
class TokenCounts:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_creation: int = 0


def family(model: str) -> str:
    return next((name for name in FAMILY_PRICES if name in model), DEFAULT_FAMILY)


def cost_usd(model: str, counts: TokenCounts) -> float:
    price_in, price_out = FAMILY_PRICES[family(model)]
    dollars = (
        counts.input * price_in
        + counts.cache_creation * price_in * CACHE_WRITE_FACTOR
        + counts.cache_read * price_in * CACHE_READ_FACTOR
        + counts.output * price_out
    )
    return dollars / 1_000_000
