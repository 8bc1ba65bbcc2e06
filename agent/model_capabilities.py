"""What each model supports and costs: one table per model id, asked wherever a request is built.

Every feature a provider or model may not have (prompt caching forms, beta headers, server
tools, thinking modes, forced tool choice, sampling parameters) and every price is decided
here, by `capabilities(model, provider)`, instead of by checks on model names scattered
through the engine. Ids are accepted in each provider's form (`claude-sonnet-5-5`,
`anthropic.claude-sonnet-5-5-v1:0` or `us.anthropic.…` on Bedrock, `claude-sonnet-5-5@20261001`
on Vertex, a dated `…-20251001` id anywhere): `canonical_id` reduces them to the table's key.

An id the table does not know gets conservative defaults (no thinking, no server tools, no
betas, no forced tool choice or sampling parameters, a 200k window, the highest known prices so
a cost estimate is never low) and one logged notice per id. docs/research.md shows the table.
"""

from __future__ import annotations

import logging
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "MODELS",
    "Capabilities",
    "Provider",
    "ThinkingMode",
    "canonical_id",
    "capabilities",
    "unknown_model_notice",
]

log = logging.getLogger(__name__)

Provider = Literal["anthropic", "bedrock", "vertex"]
# adaptive: {"type": "adaptive"}, the model decides how much to think; enabled: a caller-set
# budget_tokens (older models); none: the model has no thinking (or we do not know that it has).
ThinkingMode = Literal["adaptive", "enabled", "none"]

# Server tools we know by their API type names (PLATFORM-NOTES "Anthropic server tools").
WEB_SEARCH = "web_search_20260209"
WEB_SEARCH_BASIC = "web_search_20250305"
WEB_FETCH = "web_fetch_20250910"
CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
CURRENT_SERVER_TOOLS = frozenset({WEB_SEARCH, WEB_SEARCH_BASIC, WEB_FETCH})
# An unknown model is assumed to have the standard window, not a large one: compaction then
# comes early rather than after the endpoint has refused a request as too long.
CONSERVATIVE_CONTEXT_WINDOW = 200_000


class Capabilities(BaseModel):
    """One model on one provider. Prices are USD per million tokens, list prices."""

    model_config = ConfigDict(frozen=True)

    model: str  # the table's key (canonical id), or the id as given when unknown
    known: bool = True
    context_window: int = CONSERVATIVE_CONTEXT_WINDOW
    max_output_tokens: int = 64_000
    input_usd: float
    output_usd: float
    cache_write_factor: float = 1.25  # 5-minute cache writes cost 1.25× input
    cache_read_factor: float = 0.10  # cache reads 0.1× input
    # Prompt caching forms: which cache_control TTLs the model accepts ("5m" is the default form).
    cache_ttls: tuple[str, ...] = ("5m", "1h")
    min_cacheable_tokens: int = 1024
    betas: frozenset[str] = frozenset()  # anthropic-beta values the model accepts
    server_tools: frozenset[str] = frozenset()  # server tool types it can run
    web_search_usd: float = 0.01  # per search ($10 per 1,000), when it runs the web search tool
    thinking: ThinkingMode = "none"
    forced_tool_choice: bool = True  # tool_choice any/tool accepted (recent models refuse it)
    sampling_parameters: bool = True  # non-default temperature/top_p/top_k accepted
    counts_tokens: bool = True  # POST /v1/messages/count_tokens is served for it

    def cost_usd(
        self, input_tokens: int, output_tokens: int, cache_read: int, cache_write: int, searches: int
    ) -> float:
        dollars = (
            input_tokens * self.input_usd
            + cache_write * self.input_usd * self.cache_write_factor
            + cache_read * self.input_usd * self.cache_read_factor
            + output_tokens * self.output_usd
        )
        return dollars / 1_000_000 + searches * self.web_search_usd


def _current(**fields: object) -> Capabilities:
    """A current model: adaptive thinking, the server tools, context editing, no forced tool choice."""
    base: dict[str, object] = {
        "thinking": "adaptive",
        "server_tools": CURRENT_SERVER_TOOLS,
        "betas": frozenset({CONTEXT_MANAGEMENT_BETA}),
        "forced_tool_choice": False,
        "sampling_parameters": False,
    }
    return Capabilities.model_validate(base | fields)


# The table. Sources: Anthropic's models page and PLATFORM-NOTES.md (checked December 2026);
# rows marked "assumed" carry a figure that page did not state, taken from the model it replaces.
MODELS: dict[str, Capabilities] = {
    # Sonnet 5.5: $2/$10, 1M context; refuses forced tool_choice and non-default sampling.
    "claude-sonnet-5-5": _current(model="claude-sonnet-5-5", context_window=1_000_000, input_usd=2.0, output_usd=10.0),
    # Haiku 5.5: prices and window assumed from Haiku 4.5.
    "claude-haiku-5-5": _current(
        model="claude-haiku-5-5", input_usd=1.0, output_usd=5.0, min_cacheable_tokens=4096, max_output_tokens=32_000
    ),
    # Sonnet 5: refuses non-default temperature/top_p/top_k; prices assumed from Sonnet 4.6.
    "claude-sonnet-5": _current(model="claude-sonnet-5", context_window=1_000_000, input_usd=3.0, output_usd=15.0),
    "claude-opus-5": _current(model="claude-opus-5", input_usd=5.0, output_usd=25.0, min_cacheable_tokens=4096),
    # The 4.x generation still takes forced tool choice and sampling parameters.
    "claude-opus-4-8": _current(
        model="claude-opus-4-8",
        input_usd=5.0,
        output_usd=25.0,
        min_cacheable_tokens=4096,
        forced_tool_choice=True,
        sampling_parameters=True,
    ),
    "claude-opus-4-6": _current(
        model="claude-opus-4-6",
        input_usd=5.0,
        output_usd=25.0,
        min_cacheable_tokens=4096,
        forced_tool_choice=True,
        sampling_parameters=True,
    ),
    "claude-sonnet-4-6": _current(
        model="claude-sonnet-4-6", input_usd=3.0, output_usd=15.0, forced_tool_choice=True, sampling_parameters=True
    ),
    # Haiku 4.5: extended thinking with a budget, not adaptive; no dynamic-filtering search.
    "claude-haiku-4-5": Capabilities(
        model="claude-haiku-4-5",
        input_usd=1.0,
        output_usd=5.0,
        min_cacheable_tokens=4096,
        thinking="enabled",
        server_tools=frozenset({WEB_SEARCH_BASIC, WEB_FETCH}),
        betas=frozenset({CONTEXT_MANAGEMENT_BETA}),
    ),
}

# The most expensive known prices: an unknown model's cost is never under-estimated.
_CONSERVATIVE_INPUT = max(c.input_usd for c in MODELS.values())
_CONSERVATIVE_OUTPUT = max(c.output_usd for c in MODELS.values())

# Bedrock: "us.", "eu.", "apac.", "global." inference profiles, the "anthropic." vendor
# prefix, a "-v1:0" version suffix. Vertex: "@20261001". Anywhere: a "-20251001" date.
_REGION_PREFIX = re.compile(r"^(?:us|eu|apac|jp|au|ca|us-gov|global)\.")
_VENDOR_PREFIX = re.compile(r"^anthropic\.")
_BEDROCK_VERSION = re.compile(r"-v\d+(?::\d+)?$")
_VERTEX_VERSION = re.compile(r"@[\w.-]+$")
_DATE_SUFFIX = re.compile(r"-\d{8}$")
_ARN_PREFIX = re.compile(r"^arn:aws[\w-]*:bedrock:[^/]+/")


def canonical_id(model: str) -> str:
    """The table's key for an id in any provider's form."""
    name = model.strip().lower()
    name = _ARN_PREFIX.sub("", name)
    name = _REGION_PREFIX.sub("", name)
    name = _VENDOR_PREFIX.sub("", name)
    name = _BEDROCK_VERSION.sub("", name)
    name = _VERTEX_VERSION.sub("", name)
    return _DATE_SUFFIX.sub("", name)


def _on_provider(caps: Capabilities, provider: Provider) -> Capabilities:
    """What a provider takes away from a model (the notes beside each line say why)."""
    if provider == "bedrock":
        # Bedrock serves no Anthropic server tools and no token counting (the SDK refuses it),
        # and takes betas in the body from the same list; web search must come from another provider.
        return caps.model_copy(update={"server_tools": frozenset(), "counts_tokens": False})
    if provider == "vertex":
        # Vertex runs web search; web fetch and context editing are not offered there.
        return caps.model_copy(
            update={"server_tools": caps.server_tools & {WEB_SEARCH, WEB_SEARCH_BASIC}, "betas": frozenset()}
        )
    return caps


_noticed: set[str] = set()


def unknown_model_notice(model: str) -> str:
    """The one-line notice for an id the table does not know (doctor prints it; the engine logs it once)."""
    return (
        f"model {model!r} is not in the capability table (agent/model_capabilities.py): using conservative defaults "
        f"(no thinking, no server tools, {CONSERVATIVE_CONTEXT_WINDOW // 1000}k context, "
        f"${_CONSERVATIVE_INPUT:g}/${_CONSERVATIVE_OUTPUT:g} per MTok); add a row for it to use more"
    )


def capabilities(model: str, provider: Provider = "anthropic") -> Capabilities:
    """The model's row, adjusted for the provider; conservative defaults (and a notice, once) when unknown."""
    row = MODELS.get(canonical_id(model))
    if row is None:
        if model not in _noticed:
            _noticed.add(model)
            log.info("%s", unknown_model_notice(model))
        row = Capabilities(
            model=model,
            known=False,
            input_usd=_CONSERVATIVE_INPUT,
            output_usd=_CONSERVATIVE_OUTPUT,
            forced_tool_choice=False,
            sampling_parameters=False,
            cache_ttls=("5m",),
        )
    return _on_provider(row, provider)
