"""Estimated cost of model usage. Published list prices per million tokens, by model family;
an estimate for the report footer and `inspect`, not a bill."""

from __future__ import annotations

from .usage import Usage

# (input, output) USD per million tokens.
FAMILY_PRICES = {"opus": (15.0, 75.0), "sonnet": (3.0, 15.0), "haiku": (1.0, 5.0)}
DEFAULT_FAMILY = "sonnet"
CACHE_WRITE_FACTOR = 1.25  # 5-minute cache writes
CACHE_READ_FACTOR = 0.10


def family(model: str) -> str:
    return next((name for name in FAMILY_PRICES if name in model), DEFAULT_FAMILY)


def cost_usd(model: str, usage: Usage) -> float:
    price_in, price_out = FAMILY_PRICES[family(model)]
    dollars = (
        usage.input_tokens * price_in
        + usage.cache_creation_tokens * price_in * CACHE_WRITE_FACTOR
        + usage.cache_read_tokens * price_in * CACHE_READ_FACTOR
        + usage.output_tokens * price_out
    )
    return dollars / 1_000_000
