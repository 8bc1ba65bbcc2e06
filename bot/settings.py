"""Configuration, read once from the environment at the CLI edge (names: DESIGN.md §4)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticUseDefault
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent import (
    AgentConfig,
    Caps,
    FetchConfig,
    McpServerConfig,
    ModelLimits,
    ProviderConfig,
    SearchConfig,
    SearchProvider,
    Silence,
    WorkspaceSearchMode,
)
from agent import defaults as agent_defaults
from jobs.budgets.spend import BudgetDefaults
from jobs.control.hard_stop import HARD_STOP_SECONDS
from jobs.control.ownership import LEASE_SECONDS
from jobs.keyspace.keys import DEFAULT_PREFIX
from jobs.keyspace.keys import NAME as KEY_NAME
from jobs.records.sealing import derived_key

from . import limits
from .limits import LOOPBACK

SLACK_DEFAULT_API_URL = "https://slack.com/api/"
SEARCH_PROVIDERS: tuple[str, ...] = get_args(SearchProvider)


def _env(*names: str) -> AliasChoices:
    return AliasChoices(*names)


MODEL_PROVIDERS = ("anthropic", "bedrock", "vertex")
ModelProvider = Literal["anthropic", "bedrock", "vertex"]


# The reaction that stops a run unless DEEPTHREAD_STOP_REACTION names another (shown on the progress message).
DEFAULT_STOP_REACTION = "octagonal_sign"

ProgressMode = Literal["stream", "message"]
# Where the pinned report's full text lives: in the message while it fits, then in a canvas
# ("message"), or in a canvas from the start ("canvas"); a workspace without canvases gets a file.
ReportMode = Literal["message", "canvas"]
# A session whose report waits this long for the team (no new run in its thread) is closed.
DEFAULT_SESSION_IDLE_HOURS = 24.0
DATA_DIR_VARIABLE = "DEEPTHREAD_DATA_DIR"


def is_blank(value: object) -> bool:
    """The one rule for every setting: an empty or whitespace-only value means unset (compose files
    and PaaS dashboards often leave `SLACK_APP_TOKEN=`, which must not switch anything on or off)."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    return isinstance(value, str) and not value.strip()


def default_data_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Where `deepthread up` keeps its embedded Redis unless DEEPTHREAD_DATA_DIR says otherwise: the XDG data home."""
    chosen = env.get(DATA_DIR_VARIABLE, "")
    if not is_blank(chosen):
        return Path(chosen.strip()).expanduser()
    xdg = env.get("XDG_DATA_HOME", "")
    return (Path(xdg.strip()).expanduser() if not is_blank(xdg) else Path.home() / ".local" / "share") / "deepthread"


@dataclass(frozen=True)
class StreamConfig:
    """DEEPTHREAD_PROGRESS and the stream's rollover thresholds, as the publisher uses them."""

    mode: ProgressMode = "message"
    max_seconds: float = limits.STREAM_MAX_SECONDS
    max_tasks: int = limits.STREAM_MAX_TASKS
    max_chars: int = limits.STREAM_MAX_CHARS


MCP_SERVERS = TypeAdapter(list[McpServerConfig])


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    slack_bot_token: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_BOT_TOKEN"))
    slack_signing_secret: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_SIGNING_SECRET"))
    slack_app_token: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_APP_TOKEN"))
    slack_api_url: str = Field(default=SLACK_DEFAULT_API_URL, validation_alias=_env("SLACK_API_URL"))
    # The app is distributed to other organizations outside the Slack Marketplace: Slack then allows it
    # one conversations.replies a minute of at most 15 messages, so threads are read from the events
    # received and paged slowly (bot/slack/thread_log.py; docs/slack-app.md).
    slack_distributed: Literal["on", "off"] = Field(
        default="off", validation_alias=_env("DEEPTHREAD_SLACK_DISTRIBUTED")
    )
    # Multi-workspace mode (Slack's OAuth install flow) when the app's client id and secret are set;
    # else single-token mode with SLACK_BOT_TOKEN.
    slack_client_id: str | None = Field(default=None, validation_alias=_env("SLACK_CLIENT_ID"))
    slack_client_secret: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_CLIENT_SECRET"))
    # Only when the app has several Redirect URLs configured: the one this deployment serves.
    slack_redirect_uri: str | None = Field(default=None, validation_alias=_env("SLACK_REDIRECT_URI"))
    # Signs the OAuth state parameter, so a state this deployment did not issue is refused.
    slack_state_secret: SecretStr | None = Field(default=None, validation_alias=_env("SLACK_STATE_SECRET"))
    # Fernet key(s) the installations' tokens are encrypted with in Redis; the first encrypts, all decrypt.
    token_key: SecretStr | None = Field(default=None, validation_alias=_env("DEEPTHREAD_TOKEN_KEY"))
    # Which workspaces (team ids) and Enterprise orgs (enterprise ids) may install, comma-separated;
    # empty: any that completes Slack's flow (doctor warns). bot/slack/admission.py.
    install_allow: str = Field(default="", validation_alias=_env("DEEPTHREAD_INSTALL_ALLOW"))
    # A newly installed workspace's monthly budget in USD (its admins change it with `budget workspace …`);
    # `off`: none, so a new workspace spends without a cap.
    new_workspace_budget_usd: float | None = Field(
        default=limits.NEW_WORKSPACE_BUDGET_USD, ge=0, validation_alias=_env("DEEPTHREAD_NEW_WORKSPACE_BUDGET_USD")
    )

    anthropic_api_key: SecretStr | None = Field(default=None, validation_alias=_env("ANTHROPIC_API_KEY"))
    anthropic_base_url: str | None = Field(default=None, validation_alias=_env("ANTHROPIC_BASE_URL"))
    model: str = Field(default=agent_defaults.MAIN_MODEL, validation_alias=_env("DEEPTHREAD_MODEL"))
    small_model: str = Field(default=agent_defaults.SMALL_MODEL, validation_alias=_env("DEEPTHREAD_SMALL_MODEL"))
    # Where Claude is bought: the Anthropic API (or a compatible endpoint), AWS Bedrock, Google Vertex AI.
    model_provider: ModelProvider = Field(default="anthropic", validation_alias=_env("DEEPTHREAD_MODEL_PROVIDER"))
    # Bedrock: the region, and AWS credentials when not found by AWS's own chain (profile, instance role).
    aws_region: str | None = Field(default=None, validation_alias=_env("AWS_REGION", "AWS_DEFAULT_REGION"))
    aws_access_key_id: SecretStr | None = Field(default=None, validation_alias=_env("AWS_ACCESS_KEY_ID"))
    aws_secret_access_key: SecretStr | None = Field(default=None, validation_alias=_env("AWS_SECRET_ACCESS_KEY"))
    aws_session_token: SecretStr | None = Field(default=None, validation_alias=_env("AWS_SESSION_TOKEN"))
    aws_profile: str | None = Field(default=None, validation_alias=_env("AWS_PROFILE"))
    aws_bearer_token_bedrock: SecretStr | None = Field(default=None, validation_alias=_env("AWS_BEARER_TOKEN_BEDROCK"))
    bedrock_base_url: str | None = Field(default=None, validation_alias=_env("ANTHROPIC_BEDROCK_BASE_URL"))
    # Vertex: region and project; credentials are Google's application default credentials, or a token.
    vertex_region: str | None = Field(default=None, validation_alias=_env("CLOUD_ML_REGION"))
    vertex_project: str | None = Field(default=None, validation_alias=_env("ANTHROPIC_VERTEX_PROJECT_ID"))
    vertex_base_url: str | None = Field(default=None, validation_alias=_env("ANTHROPIC_VERTEX_BASE_URL"))
    vertex_access_token: SecretStr | None = Field(default=None, validation_alias=_env("DEEPTHREAD_VERTEX_ACCESS_TOKEN"))
    # The model thinks where the capability table allows it; "off" never.
    thinking: Literal["on", "off"] = Field(default="on", validation_alias=_env("DEEPTHREAD_THINKING"))
    # Every cited claim held to its source (agent/claims); "off" for the whole deployment. A workspace's
    # admins may turn it off for their workspace alone (`claim check off`, bot/desk/claim_check.py).
    claim_check: Literal["on", "off"] = Field(default="on", validation_alias=_env("DEEPTHREAD_CLAIM_CHECK"))

    redis_url: str | None = Field(default=None, validation_alias=_env("REDIS_URL"))
    # Every key's prefix and the RQ queue's name (default: the prefix), so deployments can share a Redis.
    redis_prefix: str = Field(default=DEFAULT_PREFIX, validation_alias=_env("DEEPTHREAD_REDIS_PREFIX"))
    queue: str | None = Field(default=None, validation_alias=_env("DEEPTHREAD_QUEUE"))

    # The search fallback chain, in order: "brave,duckduckgo" (see search_chain()).
    search: str = Field(default="duckduckgo", validation_alias=_env("DEEPTHREAD_SEARCH"))
    brave_api_key: SecretStr | None = Field(default=None, validation_alias=_env("BRAVE_API_KEY"))
    tavily_api_key: SecretStr | None = Field(default=None, validation_alias=_env("TAVILY_API_KEY"))
    searxng_url: str | None = Field(default=None, validation_alias=_env("SEARXNG_URL"))
    # Not in the DESIGN table: let tests point the keyed providers at a local fake.
    brave_url: str | None = Field(default=None, validation_alias=_env("DEEPTHREAD_BRAVE_URL"))
    tavily_url: str | None = Field(default=None, validation_alias=_env("DEEPTHREAD_TAVILY_URL"))
    fetch_allow: str = Field(default="", validation_alias=_env("DEEPTHREAD_FETCH_ALLOW"))

    port: int = Field(default=3000, validation_alias=_env("PORT"))
    # A worker's health endpoints (/healthz, /readyz) listen here when set; serve's are on PORT.
    health_port: int | None = Field(default=None, ge=1, le=65535, validation_alias=_env("DEEPTHREAD_HEALTH_PORT"))
    context_tokens: int | None = Field(default=None, validation_alias=_env("DEEPTHREAD_CONTEXT_TOKENS"))
    stop_reaction: str = Field(default=DEFAULT_STOP_REACTION, validation_alias=_env("DEEPTHREAD_STOP_REACTION"))
    # Progress as Slack's native stream (falls back per workspace) or as an edited message.
    progress: ProgressMode = Field(default="message", validation_alias=_env("DEEPTHREAD_PROGRESS"))
    # A stream is closed and continued in a new one after this long (Slack closes them at ~5 min).
    stream_max_seconds: float = Field(
        default=limits.STREAM_MAX_SECONDS, gt=0, validation_alias=_env("DEEPTHREAD_STREAM_MAX_SECONDS")
    )
    # …or once it holds this many task cards.
    stream_max_tasks: int = Field(
        default=limits.STREAM_MAX_TASKS, ge=1, validation_alias=_env("DEEPTHREAD_STREAM_MAX_TASKS")
    )
    # Where the pinned report's full text lives (ReportMode).
    report: ReportMode = Field(default="message", validation_alias=_env("DEEPTHREAD_REPORT"))
    # A thread's agent session is closed after its report waited this long without a new run.
    session_idle_hours: float = Field(
        default=DEFAULT_SESSION_IDLE_HOURS, gt=0, validation_alias=_env("DEEPTHREAD_SESSION_IDLE_HOURS")
    )
    # Operator caps: they win over every profile, zero included.
    max_requests: int | None = Field(default=None, ge=0, validation_alias=_env("DEEPTHREAD_MAX_REQUESTS"))
    max_active_minutes: float | None = Field(default=None, ge=0, validation_alias=_env("DEEPTHREAD_MAX_ACTIVE_MINUTES"))
    max_wall_minutes: float | None = Field(default=None, ge=0, validation_alias=_env("DEEPTHREAD_MAX_WALL_MINUTES"))
    max_cost_usd: float | None = Field(default=None, ge=0, validation_alias=_env("DEEPTHREAD_MAX_COST_USD"))
    max_input_tokens: int | None = Field(default=None, ge=0, validation_alias=_env("DEEPTHREAD_MAX_INPUT_TOKENS"))
    # Monthly budgets in USD (admins override per channel / workspace with `budget …`); unset: no cap.
    channel_budget_usd: float | None = Field(default=None, ge=0, validation_alias=_env("DEEPTHREAD_CHANNEL_BUDGET_USD"))
    workspace_budget_usd: float | None = Field(
        default=None, ge=0, validation_alias=_env("DEEPTHREAD_WORKSPACE_BUDGET_USD")
    )
    # Each person's monthly budget for questions asked in direct messages (no channel's budget covers them).
    person_budget_usd: float | None = Field(default=None, ge=0, validation_alias=_env("DEEPTHREAD_PERSON_BUDGET_USD"))
    # Whether questions are taken in direct messages with the bot (commands are answered there either way).
    dms: Literal["on", "off"] = Field(default="on", validation_alias=_env("DEEPTHREAD_DMS"))
    admins: str = Field(default="", validation_alias=_env("DEEPTHREAD_ADMINS"))
    channels: str = Field(default="", validation_alias=_env("DEEPTHREAD_CHANNELS"))
    max_task_agents: int | None = Field(default=None, ge=0, validation_alias=_env("DEEPTHREAD_MAX_TASK_AGENTS"))
    # A run's lease (jobs/control/ownership.py): how long a dead worker's run stays held before another resumes it.
    run_lock_seconds: float = Field(default=LEASE_SECONDS, gt=0, validation_alias=_env("DEEPTHREAD_RUN_LOCK_SECONDS"))
    # How long an overloaded model service is waited out before the run answers from what it has.
    model_patience_seconds: float | None = Field(
        default=None, gt=0, validation_alias=_env("DEEPTHREAD_MODEL_PATIENCE_SECONDS")
    )
    # A model request that gets no byte for this long is given up on (then retried): before its answer
    # starts, and between the events of its stream (agent/silence.py).
    model_first_byte_seconds: float = Field(
        default=agent_defaults.MODEL_FIRST_BYTE_SECONDS,
        gt=0,
        validation_alias=_env("DEEPTHREAD_MODEL_FIRST_BYTE_SECONDS"),
    )
    model_stream_idle_seconds: float = Field(
        default=agent_defaults.MODEL_STREAM_IDLE_SECONDS,
        gt=0,
        validation_alias=_env("DEEPTHREAD_MODEL_STREAM_IDLE_SECONDS"),
    )
    # After a stop, how long the loop may take to finish on its own before its job is killed.
    hard_stop_seconds: float = Field(
        default=HARD_STOP_SECONDS, gt=0, validation_alias=_env("DEEPTHREAD_HARD_STOP_SECONDS")
    )
    # The organization's model limits per minute (every model), shared by all runs; unset: read
    # from the service's anthropic-ratelimit-* headers.
    model_requests_per_minute: float | None = Field(
        default=None, gt=0, validation_alias=_env("DEEPTHREAD_MODEL_REQUESTS_PER_MINUTE")
    )
    model_input_tokens_per_minute: float | None = Field(
        default=None, gt=0, validation_alias=_env("DEEPTHREAD_MODEL_INPUT_TOKENS_PER_MINUTE")
    )
    model_output_tokens_per_minute: float | None = Field(
        default=None, gt=0, validation_alias=_env("DEEPTHREAD_MODEL_OUTPUT_TOKENS_PER_MINUTE")
    )
    # Research runs one worker process carries at once: 1 is RQ's forking worker (a work-horse per run);
    # more share one event loop in one process (jobs/workers/concurrent_worker.py), each run still an RQ job.
    worker_runs: int = Field(default=1, ge=1, le=500, validation_alias=_env("DEEPTHREAD_WORKER_RUNS"))
    # Operators: Prometheus metrics on this port (serve and workers), and text or JSON log lines.
    metrics_port: int | None = Field(default=None, ge=1, le=65535, validation_alias=_env("DEEPTHREAD_METRICS_PORT"))
    # The address the metrics and a worker's health endpoints listen on: loopback unless opened (they
    # answer anyone who reaches them, unauthenticated). 0.0.0.0 for a scraper or probe on another host.
    metrics_host: str = Field(default=LOOPBACK, validation_alias=_env("DEEPTHREAD_METRICS_HOST"))
    log_format: Literal["text", "json"] = Field(default="text", validation_alias=_env("DEEPTHREAD_LOG_FORMAT"))
    # Bulky records (page texts, request logs): how long they are kept.
    bulky_retention_days: float = Field(default=30.0, gt=0, validation_alias=_env("DEEPTHREAD_BULKY_RETENTION_DAYS"))
    # Runs (state, sources, passages, request logs, the thread's memory, file texts) are deleted this many
    # days after they finished, by the maintenance round (jobs/upkeep/retention.py); the spend ledger keeps totals.
    retention_days: float = Field(default=90.0, gt=0, validation_alias=_env("DEEPTHREAD_RETENTION_DAYS"))
    # Where results from the team's own Slack may be searched and cited (agent/visibility.py): public
    # channels only (default), also private channels and DMs in a DM with the requester, or not at all.
    workspace_search: WorkspaceSearchMode = Field(
        default="public", validation_alias=_env("DEEPTHREAD_WORKSPACE_SEARCH")
    )
    # The team's remote MCP servers, as JSON: [{"name": "wiki", "url": "https://…/mcp", "headers": {…},
    # "allow": ["search_*"], "allow_writes": false}] (see mcp_servers()).
    mcp: str = Field(default="", validation_alias=_env("DEEPTHREAD_MCP_SERVERS"))
    # Plan first: how long a posted plan waits for approval before its run ends unresearched.
    plan_expiry_minutes: float = Field(default=120.0, gt=0, validation_alias=_env("DEEPTHREAD_PLAN_EXPIRY_MINUTES"))
    # Where `deepthread up` keeps its embedded Redis (append-only file), so a restart keeps every run.
    data_dir: Path = Field(default_factory=lambda: default_data_dir(), validation_alias=_env(DATA_DIR_VARIABLE))

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any, info: ValidationInfo) -> Any:
        # Defaults are validated too (validate_default): a blank default ("" for lists) is itself.
        if is_blank(value) and not (info.field_name and value == cls.model_fields[info.field_name].default):
            raise PydanticUseDefault()  # the field's default, exactly as if the variable were absent
        return value

    @property
    def socket_mode(self) -> bool:
        """Socket Mode when SLACK_APP_TOKEN is set (a blank one is unset), else HTTP mode: decided here
        alone, so the Bolt app's request verification and the choice of transport cannot disagree."""
        return self.slack_app_token is not None

    @field_validator(
        "redis_url",
        "redis_prefix",
        "queue",
        "health_port",
        "metrics_host",
        "slack_client_id",
        "slack_client_secret",
        "slack_redirect_uri",
        "slack_state_secret",
        "token_key",
        mode="before",
    )
    @classmethod
    def _stripped(cls, value: Any) -> Any:
        """Names and addresses are read without surrounding spaces (a blank one is unset, by _blank_is_unset)."""
        return value.strip() if isinstance(value, str) else value

    @field_validator("redis_prefix", "queue")
    @classmethod
    def _key_name(cls, value: str | None) -> str | None:
        if value is not None and not KEY_NAME.fullmatch(value):
            raise ValueError(
                f"{value!r} cannot name Redis keys: use letters, digits and _ . : - (at most 64), e.g. deepthread-staging"
            )
        return value

    @field_validator("new_workspace_budget_usd", mode="before")
    @classmethod
    def _off_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and value.strip().lower() == "off" else value

    def sealing_key(self) -> str | None:
        """The key a run's action token is encrypted with in Redis (jobs/records/sealing.py): DEEPTHREAD_TOKEN_KEY,
        else one derived from SLACK_BOT_TOKEN (never in Redis), else none (the token is not stored)."""
        key, bot_token = self.secret("token_key"), self.secret("slack_bot_token")
        if key:
            return key
        return derived_key(bot_token) if bot_token and not self.multi_workspace else None

    def deployment(self) -> dict[str, Any]:
        """The keyword arguments of jobs.keyspace.keys.configure: where this deployment's keys and jobs live."""
        return {"prefix": self.redis_prefix, "queue": self.queue}

    @property
    def multi_workspace(self) -> bool:
        """Slack's OAuth install flow (SLACK_CLIENT_ID and SLACK_CLIENT_SECRET set) rather than one bot token."""
        return bool(self.slack_client_id) or self.slack_client_secret is not None

    @field_validator("model_provider", "thinking", "claim_check", mode="before")
    @classmethod
    def _lower(cls, value: object, info: ValidationInfo) -> object:
        if isinstance(value, str):
            blank = "anthropic" if info.field_name == "model_provider" else "on"
            return value.strip().lower() or blank
        return value

    def provider_config(self) -> ProviderConfig:
        """DEEPTHREAD_MODEL_PROVIDER with the settings that provider reads."""
        provider = self.model_provider
        base_url = {"anthropic": self.anthropic_base_url, "bedrock": self.bedrock_base_url}.get(
            provider, self.vertex_base_url
        )
        return ProviderConfig(
            provider=provider,
            api_key=self.secret("anthropic_api_key"),
            base_url=base_url,
            aws_region=self.aws_region,
            aws_access_key=self.secret("aws_access_key_id"),
            aws_secret_key=self.secret("aws_secret_access_key"),
            aws_session_token=self.secret("aws_session_token"),
            aws_profile=self.aws_profile,
            bedrock_api_key=self.secret("aws_bearer_token_bedrock"),
            vertex_region=self.vertex_region,
            vertex_project=self.vertex_project,
            vertex_access_token=self.secret("vertex_access_token"),
        )

    @field_validator("workspace_search", mode="before")
    @classmethod
    def _workspace_search_name(cls, value: object) -> object:
        """Names are read in any case (a blank value is unset, by _blank_is_unset)."""
        if isinstance(value, str):
            return value.strip().lower() or "public"
        return value

    def mcp_servers(self) -> list[McpServerConfig]:
        """DEEPTHREAD_MCP_SERVERS parsed; ValueError with one line saying what to fix (doctor prints it)."""
        if not self.mcp.strip():
            return []
        try:
            raw = json.loads(self.mcp)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"DEEPTHREAD_MCP_SERVERS is not JSON ({exc.msg} at character {exc.pos}): write a list such as "
                '[{"name": "wiki", "url": "https://wiki.example.com/mcp", "headers": {"Authorization": "Bearer …"}}]'
            ) from None
        if isinstance(raw, dict):  # {"wiki": {"url": …}} is accepted too
            raw = [{"name": name, **(value if isinstance(value, dict) else {})} for name, value in raw.items()]
        try:
            servers = MCP_SERVERS.validate_python(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(
                f"DEEPTHREAD_MCP_SERVERS: {where}: {first['msg']} (each server needs a name of lower-case letters, "
                "digits, - or _ and an http(s) url)"
            ) from None
        names = [s.name for s in servers]
        if len(set(names)) != len(names):
            raise ValueError("DEEPTHREAD_MCP_SERVERS names a server twice: give each server its own name")
        return servers

    @staticmethod
    def id_set(value: str) -> frozenset[str]:
        return frozenset(item.strip() for item in value.split(",") if item.strip())

    def search_chain(self) -> list[str]:
        """DEEPTHREAD_SEARCH as the ordered provider names it lists, each once, lower case."""
        return list(dict.fromkeys(name.strip().lower() for name in self.search.split(",") if name.strip()))

    def secret(self, name: str) -> str | None:
        value = getattr(self, name)
        return value.get_secret_value() if value is not None else None

    def _search_urls(self) -> dict[str, Any]:
        """Endpoint overrides (tests point them at fakes); unset ones keep the providers' defaults."""
        return {name: url for name, url in (("brave_url", self.brave_url), ("tavily_url", self.tavily_url)) if url}

    def agent_config(self) -> AgentConfig:
        known = [name for name in self.search_chain() if name in SEARCH_PROVIDERS]  # doctor names the others
        search = SearchConfig(
            providers=known or ["duckduckgo"],  # type: ignore[arg-type]  # names checked just above
            searxng_url=self.searxng_url,
            brave_api_key=self.secret("brave_api_key"),
            tavily_api_key=self.secret("tavily_api_key"),
            **self._search_urls(),
        )
        allow = [a.strip() for a in self.fetch_allow.split(",") if a.strip()]
        extra: dict[str, Any] = {"context_tokens": self.context_tokens} if self.context_tokens else {}
        if self.model_patience_seconds is not None:
            extra["model_patience_seconds"] = self.model_patience_seconds
        if self.max_task_agents is not None:
            extra["max_task_agents"] = self.max_task_agents
        caps = Caps(
            max_requests=self.max_requests,
            active_minutes=self.max_active_minutes,
            wall_minutes=self.max_wall_minutes,
            max_cost_usd=self.max_cost_usd,
            max_input_tokens=self.max_input_tokens,
        )
        try:
            extra["mcp_servers"] = self.mcp_servers()
        except ValueError:
            pass  # `deepthread doctor` and the worker's start-up say what to fix; research goes on without them
        return AgentConfig(
            main_model=self.model,
            small_model=self.small_model,
            provider=self.model_provider,
            thinking=self.thinking == "on",
            claim_check=self.claim_check == "on",
            search=search,
            fetch=FetchConfig(allow=allow),
            caps=caps,
            **extra,
        )

    def model_silence(self) -> Silence:
        """How long a model request may go without a byte, first and between stream events."""
        return Silence(first_byte=self.model_first_byte_seconds, between_events=self.model_stream_idle_seconds)

    def model_limits(self) -> ModelLimits:
        return ModelLimits(
            requests=self.model_requests_per_minute,
            input_tokens=self.model_input_tokens_per_minute,
            output_tokens=self.model_output_tokens_per_minute,
        )

    def budget_defaults(self) -> BudgetDefaults:
        return BudgetDefaults(
            channel_usd=self.channel_budget_usd,
            workspace_usd=self.workspace_budget_usd,
            person_usd=self.person_budget_usd,
        )


def variable_names() -> list[str]:
    """Every environment variable Settings reads, by its name."""
    names = []
    for field in Settings.model_fields.values():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            names += [str(choice) for choice in alias.choices]
    return names


def blank_variables(env: Mapping[str, str] = os.environ) -> list[str]:
    """The variables Settings reads that are present in `env` but empty or whitespace-only (each
    counts as unset; `deepthread doctor` says so, since a blank that was meant to be a value is
    the usual way a deployment loses a secret)."""
    present = {name.upper(): value for name, value in env.items()}
    return [name for name in variable_names() if name.upper() in present and is_blank(present[name.upper()])]
