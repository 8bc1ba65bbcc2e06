"""`deepthread doctor --live`: ask the real services, one line per problem.

The static checks (`doctor.py`) say whether a setting is present; these say whether it
works: the Slack token's scopes against what the code calls, each configured model
answering a one-token request, one search through the configured provider chain, and Redis:
the topology found (one server or Sentinel, the primary, replicas), an eviction policy that
would lose leases and dedupe marks, and its keys by owner with those left over (jobs/upkeep/key_audit.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anthropic
import httpx
from ddgs import DDGS
from redis.exceptions import RedisError
from redis.sentinel import SentinelConnectionPool
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from agent import DDGSFactory, ProviderUnavailable, endpoint, model_api, search_model
from agent import search_providers as providers
from agent import search_web as search
from bot.settings import Settings
from bot.slack.scopes import REQUIRED_BOT_SCOPES
from jobs.keyspace.connection import RedisUrlError, connect, parse_redis_url, redact

# A plain query any working web index answers, for the live check.
LIVE_SEARCH_QUERY = "index fund expense ratio"
PROBE_TIMEOUT_SECONDS = 20.0
# The `x-oauth-scopes` header lists the token's scopes on every Web API answer.
SCOPES_HEADER = "x-oauth-scopes"

Probe = Callable[[Settings], Awaitable[list[str]]]


async def slack_live_problems(settings: Settings) -> list[str]:
    if settings.multi_workspace:
        return []  # each workspace's token is checked as it installs (Bolt asks auth.test)
    token = settings.secret("slack_bot_token")
    if not token:
        return []  # the static check already said what to set
    client = AsyncWebClient(token=token, base_url=settings.slack_api_url, timeout=int(PROBE_TIMEOUT_SECONDS))
    try:
        answer = await client.auth_test()
    except SlackApiError as exc:
        error = exc.response.get("error", "unknown_error")
        return [
            f"Slack refused SLACK_BOT_TOKEN ({error}): copy the Bot User OAuth Token again from OAuth & "
            "Permissions, and reinstall the app if it was revoked"
        ]
    except Exception as exc:  # network, DNS, TLS: the line must say which
        return [
            f"Slack could not be reached at {settings.slack_api_url} ({type(exc).__name__}): check the network "
            "or SLACK_API_URL"
        ]
    header = next((v for k, v in answer.headers.items() if k.lower() == SCOPES_HEADER), None)
    if header is None:
        return [
            "Slack did not report the token's scopes (no x-oauth-scopes header): cannot check them; compare "
            "OAuth & Permissions with manifest.yml by hand"
        ]
    granted = {s.strip() for s in str(header).split(",") if s.strip()}
    return [
        f"Slack token lacks the scope {scope} (needed for {why}): add it under OAuth & Permissions (or update "
        "the app from manifest.yml) and reinstall the app"
        for scope, why in REQUIRED_BOT_SCOPES.items()
        if scope not in granted
    ]


# What to fix when the provider refuses the credentials, and which setting points elsewhere.
CREDENTIAL_ADVICE = {
    "anthropic": "ANTHROPIC_API_KEY was refused by the model service: create a new key in the Anthropic console "
    "and export it",
    "bedrock": "AWS Bedrock refused the AWS credentials: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or "
    "AWS_PROFILE, or AWS_BEARER_TOKEN_BEDROCK) and that the identity may call bedrock:InvokeModel",
    "vertex": "Google Vertex AI refused the credentials: run `gcloud auth application-default login` (or set "
    "GOOGLE_APPLICATION_CREDENTIALS) for an identity with the Vertex AI User role",
}
# AWS answers 403 both for credentials it cannot verify and for a model the identity may not use.
AWS_CREDENTIAL_ERRORS = frozenset(
    {"InvalidSignatureException", "UnrecognizedClientException", "MissingAuthenticationTokenException"}
)
BASE_URL_SETTING = {"anthropic": "ANTHROPIC_BASE_URL", "bedrock": "AWS_REGION", "vertex": "CLOUD_ML_REGION"}
MODEL_HELP = {
    "anthropic": "a current model name from the Anthropic models overview",
    "bedrock": "a model id enabled in this region's Bedrock model access page (anthropic.claude-…)",
    "vertex": "a Claude model enabled in this project's Vertex AI Model Garden (claude-…)",
}


async def model_live_problems(settings: Settings) -> list[str]:
    """A one-token request to each configured model, through the configured provider."""
    provider = settings.model_provider
    if provider == "anthropic" and not settings.secret("anthropic_api_key"):
        return []  # the static check already said what to set
    try:
        client = model_api(settings.provider_config(), max_retries=1, timeout=PROBE_TIMEOUT_SECONDS)
    except ProviderUnavailable:
        return []  # the static check already said what to install or set
    problems: list[str] = []
    where = "" if provider == "anthropic" else f" on {settings.provider_config().label}"
    who = "this key" if provider == "anthropic" else "these credentials"
    async with client:
        for variable, model in (("DEEPTHREAD_MODEL", settings.model), ("DEEPTHREAD_SMALL_MODEL", settings.small_model)):
            try:
                await client.messages.create(model=model, max_tokens=1, messages=[{"role": "user", "content": "ping"}])
            except anthropic.AuthenticationError:
                return [CREDENTIAL_ADVICE[provider]]
            except anthropic.PermissionDeniedError as exc:
                if exc.response.headers.get("x-amzn-ErrorType", "") in AWS_CREDENTIAL_ERRORS:
                    return [CREDENTIAL_ADVICE[provider]]  # a 403 about the signature, not about the model
                problems.append(
                    f"{variable}={model}: {who} may not use that model{where}; pick another (or enable it), "
                    "or ask the account admin"
                )
            except anthropic.NotFoundError:
                problems.append(
                    f"{variable}={model} is not a model {who} can use{where}: set it to {MODEL_HELP[provider]}"
                )
            except anthropic.APIStatusError as exc:
                problems.append(
                    f"{variable}={model} answered {exc.status_code}{where} ({_short(exc.message)}): "
                    "try again later, or check the account's limits"
                )
            except anthropic.APIConnectionError as exc:
                said = (
                    "did not answer in time" if isinstance(exc, anthropic.APITimeoutError) else "could not be reached"
                )
                cause = (
                    f" ({_short(str(exc.__cause__), 80)})" if exc.__cause__ is not None and str(exc.__cause__) else ""
                )
                return [
                    f"The model service at {endpoint(exc.request.url)}{where} {said}{cause}: check the network "
                    f"or {BASE_URL_SETTING[provider]}"
                ]
            except Exception as exc:  # credentials the SDK could not find or sign with (botocore, google-auth)
                return [f"{CREDENTIAL_ADVICE[provider]} ({type(exc).__name__}: {_short(str(exc))})"]
    return problems


def redis_report(settings: Settings) -> tuple[str | None, list[str]]:
    """What Redis turned out to be (one line: the topology, the primary, the eviction policy) and the
    problems found there. Blocking: call it in a thread."""
    if not settings.redis_url:
        return None, []  # `deepthread up` starts its own; the static check said so if it cannot
    try:
        target = parse_redis_url(settings.redis_url)
        redis = connect(settings.redis_url, retry_window=0)
    except RedisUrlError as exc:
        return None, [str(exc)]
    try:
        memory = redis.info("memory")
        replication = redis.info("replication")
        pool = redis.connection_pool
        if isinstance(pool, SentinelConnectionPool):
            host, port = pool.get_master_address()
            where = f"{target.describe()}; primary {host}:{port}"
        else:
            where = target.describe()
    except (RedisError, OSError) as exc:
        return None, [
            f"REDIS_URL={redact(settings.redis_url)} did not answer ({type(exc).__name__}: {_short(str(exc))}): "
            "start Redis there, or check the sentinels and the service name"
        ]
    finally:
        redis.close()
    policy = str(memory.get("maxmemory_policy", "unknown"))
    replicas = int(replication.get("connected_slaves", 0))
    line = f"Redis: {where}, role {replication.get('role')}, {replicas} replica(s), maxmemory-policy {policy}"
    problems = []
    if policy != "noeviction":
        problems.append(
            f"Redis evicts keys under memory pressure (maxmemory-policy {policy}): run leases, stop marks and "
            "Slack's event dedupe would vanish with them; set maxmemory-policy noeviction (and enough maxmemory)"
        )
    if target.topology == "sentinel" and "min_slaves_good_slaves" not in replication:
        # INFO shows this field only when min-replicas-to-write is set; CONFIG may be disabled.
        problems.append(
            "the Redis primary takes writes that no replica has copied (min-replicas-to-write 0): in a failover's "
            "first seconds the old primary goes on taking writes, lost when it rejoins as a replica; set "
            "min-replicas-to-write 1 and min-replicas-max-lag 10 on every Redis data server (docs/operating.md)"
        )
    if replication.get("role") != "master":
        problems.append(
            f"REDIS_URL={redact(settings.redis_url)} reaches a {replication.get('role')}, which refuses writes: "
            "point it at the primary, or at the sentinels with redis+sentinel://"
        )
    return line, problems


def redis_keys_report(settings: Settings) -> tuple[str | None, list[str]]:
    """Redis's keys by owner and its used memory (one line), and a line per family of keys left
    over: without a lifetime or an owner (jobs/upkeep/key_audit.py). Blocking: call it in a thread."""
    if not settings.redis_url:
        return None, []
    from bot.desk.retention import key_audit

    try:
        redis = connect(settings.redis_url, retry_window=0)
    except RedisUrlError:
        return None, []  # redis_report says what is wrong with the URL
    try:
        audit = key_audit(redis)
    except (RedisError, OSError) as exc:  # it answered redis_report a moment ago
        return None, [
            f"the Redis key audit stopped part-way ({type(exc).__name__}: {_short(str(exc))}): run "
            "`deepthread doctor --live` again once Redis answers"
        ]
    finally:
        redis.close()
    return audit.fact(), audit.problems


async def live_search_problems(settings: Settings, *, ddgs: DDGSFactory | None = None) -> list[str]:
    """One real search through the configured chain (for `doctor --live`): a line per provider that
    failed it, and one if nothing came back. `ddgs` replaces the keyless provider's library in tests."""
    config = settings.agent_config().search
    chain = "DEEPTHREAD_SEARCH=" + ",".join(config.providers)
    async with httpx.AsyncClient() as http, AsyncExitStack() as stack:
        model = None
        if "anthropic" in config.providers:  # Anthropic's own search runs through a model client
            try:
                api = model_api(settings.provider_config(), max_retries=1)
            except ProviderUnavailable:
                return []  # the model check already says what to set
            await stack.enter_async_context(api)
            model = search_model(api, settings)
        registry = providers(ddgs or DDGS, model) if ddgs or model else None
        answer = await search(http, config, LIVE_SEARCH_QUERY, registry=registry)
    covered = f"; {answer.label} answered the test search instead" if answer.hits else ""
    # For a person: what happened (not the advice the model is given), with the provider's own words
    # where only they say which key or setting is wrong.
    problems = [
        f"{chain}: {f.plainly}"
        + (f" ({_short(f.message)})" if f.kind in ("configuration", "refused_query") else "")
        + covered
        for f in answer.failures
    ]
    if answer.answered and not answer.hits:
        problems.append(
            f'{chain}: {answer.label} returned nothing for the test search "{LIVE_SEARCH_QUERY}", '
            "which usually means it is refusing this server: add brave, searxng or tavily to the list"
        )
    return problems


PROBES: tuple[Probe, ...] = (slack_live_problems, model_live_problems, live_search_problems)


def model_limits_report(settings: Settings) -> list[str]:
    """Where the model limits in force come from (set, the service's headers, learned), per model
    the shared limiter has seen, else what will decide them. Blocking: call it in a thread."""
    from jobs.budgets.capacity import DIMENSIONS, model_limits

    configured = settings.model_limits()
    seen: dict[str, Any] = {}
    if settings.redis_url:
        try:
            redis = connect(settings.redis_url, retry_window=0)
            try:
                seen = model_limits(redis, configured)
            finally:
                redis.close()
        except (RedisError, OSError, RedisUrlError):
            seen = {}  # redis_report says what is wrong with Redis
    if not seen:
        named = [f"{d.replace('_', ' ')} {configured.get(d):,.0f}/min set" for d in DIMENSIONS if configured.get(d)]
        return [
            "Model limits: "
            + (", ".join(named) + "; the rest " if named else "")
            + "from the service's anthropic-ratelimit headers, else learned from its throttling answers "
            "(Bedrock, Vertex and most gateways send no headers)"
        ]
    return [
        f"Model limits for {model}: "
        + ", ".join(f"{d.replace('_', ' ')} {limits.get(d):,.0f}/min {sources[d]}" for d in DIMENSIONS)
        for model, (limits, sources) in sorted(seen.items())
    ]


async def live_problems(settings: Settings) -> tuple[list[str], list[str]]:
    """(what was found, problems): the facts worth saying either way (Redis's topology, its keys),
    and one line per problem."""
    results = await asyncio.gather(*(probe(settings) for probe in PROBES), return_exceptions=True)
    line, problems = await asyncio.to_thread(redis_report, settings)
    keyspace: str | None = None
    if line is not None:  # Redis answered: its keys, and those left over
        try:
            keyspace, leftovers = await asyncio.to_thread(redis_keys_report, settings)
            problems += leftovers
        except Exception as exc:  # a key the audit cannot read must not hide the other checks
            problems.append(f"Redis key audit crashed ({type(exc).__name__}: {_short(str(exc))}): please report this")
    limits = await asyncio.to_thread(model_limits_report, settings)
    for probe, result in zip(PROBES, results, strict=True):
        if isinstance(result, BaseException):
            problems.append(
                f"{probe.__name__.replace('_problems', '').replace('live_', '')} check crashed "
                f"({type(result).__name__}: {_short(str(result))}): please report this"
            )
        else:
            problems.extend(result)
    return [fact for fact in (line, keyspace) if fact] + limits, problems


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
