"""Typed configuration the engine receives (read from the environment at the CLI edge)."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr, field_validator, model_validator

from . import defaults
from .model_capabilities import Provider, capabilities

SearchProvider = Literal["duckduckgo", "searxng", "brave", "tavily", "anthropic"]
DEFAULT_SEARCH_CHAIN: tuple[SearchProvider, ...] = ("duckduckgo",)  # keyless, so a fresh install can search
# ddgs backends for the keyless provider: DuckDuckGo first among equals, then the other
# general web indexes ddgs can reach without a key. "auto" would add grokipedia, an
# AI-written encyclopedia that is no source to cite.
DDGS_BACKEND = "duckduckgo,brave,mojeek,startpage,yahoo,wikipedia"


class SearchConfig(BaseModel):
    # The fallback chain, asked in order (DEEPTHREAD_SEARCH="brave,duckduckgo"). `provider=`
    # is accepted too, as a name or a comma-separated list.
    providers: list[SearchProvider] = Field(
        default_factory=lambda: list(DEFAULT_SEARCH_CHAIN),
        min_length=1,
        validation_alias=AliasChoices("providers", "provider"),
    )
    searxng_url: str | None = None
    brave_api_key: str | None = Field(default=None, repr=False)
    tavily_api_key: str | None = Field(default=None, repr=False)
    ddgs_backend: str = DDGS_BACKEND
    # Endpoints are overridable so tests can point each provider at a local fake.
    brave_url: str = "https://api.search.brave.com/res/v1/web/search"
    tavily_url: str = "https://api.tavily.com/search"
    # The anthropic provider: the server tool's domain filters (one of the two at most) and the
    # searches one web_search call may run (agent/tools/search/anthropic.py).
    anthropic_allowed_domains: list[str] = Field(default_factory=list)
    anthropic_blocked_domains: list[str] = Field(default_factory=list)
    anthropic_max_uses: int = Field(default=defaults.SERVER_SEARCH_MAX_USES, ge=1)
    results: int = defaults.SEARCH_RESULTS
    # Per provider: a chain of n providers may take n times this before it gives up.
    timeout_seconds: float = defaults.SEARCH_TIMEOUT_SECONDS

    @field_validator("providers", mode="before")
    @classmethod
    def _chain(cls, value: object) -> object:
        names = value.split(",") if isinstance(value, str) else value
        if not isinstance(names, (list, tuple)):
            return value
        # Each provider once, in the order first named; blanks ("brave,,duckduckgo") ignored.
        cleaned = [n.strip().lower() if isinstance(n, str) else n for n in names]
        return list(dict.fromkeys(n for n in cleaned if n != ""))


class FetchConfig(BaseModel):
    # Hosts or CIDRs exempt from the private-address guard (tests use 127.0.0.1).
    allow: list[str] = Field(default_factory=list)
    max_bytes: int = defaults.FETCH_MAX_BYTES
    connect_timeout: float = defaults.FETCH_CONNECT_TIMEOUT
    read_timeout: float = defaults.FETCH_READ_TIMEOUT
    total_seconds: float = defaults.FETCH_TOTAL_SECONDS
    max_redirects: int = defaults.FETCH_MAX_REDIRECTS


class Budget(BaseModel):
    """The limits one run works within. None means no limit of that kind."""

    profile: str = "standard"
    max_requests: int = defaults.STANDARD_MAX_REQUESTS
    active_seconds: float = defaults.STANDARD_ACTIVE_SECONDS
    wall_seconds: float = defaults.WALL_SAFETY_SECONDS
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_cost_usd: float | None = None
    # Who set max_cost_usd, for the reason a run gives when it reaches it ("channel budget ($50.00/month)").
    cost_limit_name: str | None = None
    corrections_per_section: int = defaults.STANDARD_CORRECTIONS_PER_SECTION
    corrections_per_thread: int = defaults.STANDARD_CORRECTIONS_PER_THREAD
    reserve_requests: int = defaults.FINALIZATION_RESERVE_REQUESTS
    reserve_seconds: float = defaults.FINALIZATION_RESERVE_SECONDS


PROFILES: dict[str, Budget] = {
    "standard": Budget(),
    "deep": Budget(
        profile="deep",
        max_requests=defaults.DEEP_MAX_REQUESTS,
        active_seconds=defaults.DEEP_ACTIVE_SECONDS,
        corrections_per_section=defaults.DEEP_CORRECTIONS_PER_SECTION,
        corrections_per_thread=defaults.DEEP_CORRECTIONS_PER_THREAD,
    ),
}


class Caps(BaseModel):
    """Operator caps from configuration: they win over every profile, zero included."""

    max_requests: int | None = None
    active_minutes: float | None = None
    wall_minutes: float | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_cost_usd: float | None = None
    cost_limit_name: str | None = None  # names this cost cap in reasons (a monthly budget); None: "cost limit"

    def apply(self, budget: Budget) -> Budget:
        def lower(current: float | None, cap: float | None) -> float | None:
            if cap is None:
                return current
            return cap if current is None else min(current, cap)

        return budget.model_copy(
            update={
                "max_requests": int(lower(budget.max_requests, self.max_requests) or 0),
                "active_seconds": lower(
                    budget.active_seconds, None if self.active_minutes is None else self.active_minutes * 60
                ),
                "wall_seconds": lower(
                    budget.wall_seconds, None if self.wall_minutes is None else self.wall_minutes * 60
                ),
                "max_input_tokens": lower(budget.max_input_tokens, self.max_input_tokens),
                "max_output_tokens": lower(budget.max_output_tokens, self.max_output_tokens),
                "max_cost_usd": lower(budget.max_cost_usd, self.max_cost_usd),
                "cost_limit_name": self.cost_limit_name
                if self.max_cost_usd is not None
                and (budget.max_cost_usd is None or self.max_cost_usd < budget.max_cost_usd)
                else budget.cost_limit_name,
            }
        )


def budget_for(profile: str, caps: Caps | None = None) -> Budget:
    budget = PROFILES.get(profile, PROFILES["standard"])
    return (caps or Caps()).apply(budget)


class McpServerConfig(BaseModel):
    """One of the team's remote MCP servers (DEEPTHREAD_MCP_SERVERS): its tools join the research tools."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,30}$")  # prefixes its tools: wiki__lookup
    url: str = Field(pattern=r"^https?://")  # the streamable HTTP endpoint, e.g. https://wiki.example.com/mcp
    headers: dict[str, SecretStr] = Field(default_factory=dict, repr=False)  # auth; secrets, never logged
    allow: list[str] = Field(default_factory=list)  # tool names or globs offered (empty: every listed tool)
    # Only tools the server marks read-only (readOnlyHint) are offered unless the operator allows more.
    allow_writes: bool = False
    timeout_seconds: float = Field(default=defaults.MCP_CALL_SECONDS, gt=0)


class AgentConfig(BaseModel):
    main_model: str = defaults.MAIN_MODEL
    small_model: str = defaults.SMALL_MODEL
    # Where the models are bought (DEEPTHREAD_MODEL_PROVIDER): the capability table reads it too.
    provider: Provider = "anthropic"
    # DEEPTHREAD_THINKING: the model thinks where the capability table allows it (off: never).
    thinking: bool = True
    main_max_tokens: int = defaults.MAIN_MAX_TOKENS
    request_timeout: float = defaults.REQUEST_TIMEOUT_SECONDS
    tool_deadline: float = defaults.TOOL_DEADLINE_SECONDS
    model_max_retries: int = defaults.MODEL_MAX_RETRIES
    model_patience_seconds: float = Field(default=defaults.MODEL_PATIENCE_SECONDS, gt=0)
    # The context budget the loop manages to (DEEPTHREAD_CONTEXT_TOKENS); unset, the model's
    # window up to CONTEXT_TOKENS (see _context_from_window).
    context_tokens: int = defaults.CONTEXT_TOKENS
    # Elision and compaction; off only to measure what they save.
    manage_context: bool = True
    # DEEPTHREAD_CLAIM_CHECK (and a workspace's setting): every cited claim held to its source (agent/claims).
    claim_check: bool = True
    # How many task agents one spawn_tasks call may run at once.
    max_task_agents: int = Field(default=defaults.MAX_TASK_AGENTS, ge=0)
    caps: Caps = Field(default_factory=Caps)
    search: SearchConfig = Field(default_factory=SearchConfig)
    fetch: FetchConfig = Field(default_factory=FetchConfig)
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _context_from_window(self) -> AgentConfig:
        """Unset, the budget is the model's window, but no more than CONTEXT_TOKENS: a 1M window is
        headroom, and every turn re-reads the whole context, so managing to 1M would cost 5× per turn."""
        if "context_tokens" not in self.model_fields_set:
            window = capabilities(self.main_model, self.provider).context_window
            self.context_tokens = min(window, defaults.CONTEXT_TOKENS)
        return self
