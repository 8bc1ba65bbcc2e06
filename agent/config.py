"""Typed configuration the engine receives (read from the environment at the CLI edge)."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from . import defaults

SearchProvider = Literal["duckduckgo", "searxng", "brave", "tavily"]


class SearchConfig(BaseModel):
    provider: SearchProvider = "duckduckgo"
    searxng_url: str | None = None
    brave_api_key: str | None = Field(default=None, repr=False)
    tavily_api_key: str | None = Field(default=None, repr=False)
    # Endpoints are overridable so tests can point each provider at a local fake.
    duckduckgo_url: str = "https://html.duckduckgo.com/html/"
    brave_url: str = "https://api.search.brave.com/res/v1/web/search"
    tavily_url: str = "https://api.tavily.com/search"
    results: int = defaults.SEARCH_RESULTS
    timeout_seconds: float = defaults.SEARCH_TIMEOUT_SECONDS


class FetchConfig(BaseModel):
    # Hosts or CIDRs exempt from the private-address guard (tests use 127.0.0.1).
    allow: list[str] = Field(default_factory=list)
    max_bytes: int = defaults.FETCH_MAX_BYTES
    connect_timeout: float = defaults.FETCH_CONNECT_TIMEOUT
    read_timeout: float = defaults.FETCH_READ_TIMEOUT
    total_seconds: float = defaults.FETCH_TOTAL_SECONDS
    max_redirects: int = defaults.FETCH_MAX_REDIRECTS


class Budget(BaseModel):
    """Simple caps; the full ledger (active time, tokens, corrections) comes later."""

    max_requests: int = defaults.STANDARD_MAX_REQUESTS
    wall_seconds: float = defaults.STANDARD_WALL_SECONDS
    reserve_requests: int = defaults.FINALIZATION_RESERVE_REQUESTS


PROFILES: dict[str, Budget] = {
    "standard": Budget(),
    "deep": Budget(max_requests=defaults.DEEP_MAX_REQUESTS, wall_seconds=defaults.DEEP_WALL_SECONDS),
}


class AgentConfig(BaseModel):
    main_model: str = defaults.MAIN_MODEL
    small_model: str = defaults.SMALL_MODEL
    main_max_tokens: int = defaults.MAIN_MAX_TOKENS
    request_timeout: float = defaults.REQUEST_TIMEOUT_SECONDS
    tool_deadline: float = defaults.TOOL_DEADLINE_SECONDS
    model_max_retries: int = defaults.MODEL_MAX_RETRIES
    # The context budget the loop manages to (DEEPTHREAD_CONTEXT_TOKENS).
    context_tokens: int = defaults.CONTEXT_TOKENS
    # Elision and compaction; off only to measure what they save.
    manage_context: bool = True
    search: SearchConfig = Field(default_factory=SearchConfig)
    fetch: FetchConfig = Field(default_factory=FetchConfig)
