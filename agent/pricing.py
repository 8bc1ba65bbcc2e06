"""Estimated cost of model usage, at the list prices of the capability table (agent/model_capabilities.py);
an estimate for the report footer, spend and `inspect`, not a bill."""

from __future__ import annotations

from .model_capabilities import capabilities
from .usage import Usage

__all__ = ["cost_usd"]


def cost_usd(model: str, usage: Usage) -> float:
    """`usage` priced as `model` (any provider's form of its id); web searches at the table's rate."""
    return capabilities(model).cost_usd(
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_creation_tokens,
        usage.web_search_requests,
    )
