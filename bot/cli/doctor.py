"""Configuration checks: one line per problem, each saying what to set."""

from __future__ import annotations

import ipaddress
import shutil

from redis.exceptions import RedisError

from agent import (
    WEB_SEARCH_BASIC_TYPE,
    WEB_SEARCH_TYPE,
    capabilities,
    provider_problems,
    unknown_model_notice,
)
from agent import defaults as agent_defaults
from bot.settings import SEARCH_PROVIDERS, Settings
from bot.slack.admission import InstallAllowlist
from bot.slack.installations import TokenCipher
from jobs.keyspace.connection import RedisUrlError, connect, redact

# Where an operator gets each provider's key, for the one-line "not set" problem.
PROVIDER_KEYS = {
    "brave": (
        "BRAVE_API_KEY",
        "brave_api_key",
        "create one in the Brave Search API dashboard (https://api-dashboard.search.brave.com → API Keys; "
        "it needs a Search plan)",
    ),
    "tavily": (
        "TAVILY_API_KEY",
        "tavily_api_key",
        "copy it (tvly-…) from the Tavily dashboard (https://app.tavily.com → API Keys)",
    ),
}


def blank_problems(blank: list[str]) -> list[str]:
    """One line per variable that is present but empty or whitespace-only: it counts as unset."""
    return [
        f"{name} is set but blank, so it counts as unset: give it a value, or remove it from the environment"
        for name in blank
    ]


def token_key_problems(settings: Settings) -> list[str]:
    """Multi-workspace mode keeps every workspace's token encrypted with DEEPTHREAD_TOKEN_KEY."""
    key = settings.secret("token_key")
    if not key:
        return [
            "DEEPTHREAD_TOKEN_KEY is not set: multi-workspace mode encrypts the installed workspaces' tokens "
            'with it; make one with `python -c "from cryptography.fernet import Fernet; '
            'print(Fernet.generate_key().decode())"`, export it in serve and every worker, and keep it safe'
        ]
    try:
        TokenCipher(key)
    except ValueError as exc:
        return [str(exc)]
    return []


def oauth_problems(settings: Settings) -> list[str]:
    """Multi-workspace mode: Slack's install flow needs the app's credentials and a state secret."""
    problems = []
    if not settings.slack_client_id:
        problems.append(
            "SLACK_CLIENT_ID is not set but SLACK_CLIENT_SECRET is: copy both from Basic Information → App "
            "Credentials (or unset SLACK_CLIENT_SECRET for single-workspace mode with SLACK_BOT_TOKEN)"
        )
    if not settings.secret("slack_client_secret"):
        problems.append(
            "SLACK_CLIENT_SECRET is not set but SLACK_CLIENT_ID is: copy both from Basic Information → App "
            "Credentials (or unset SLACK_CLIENT_ID for single-workspace mode with SLACK_BOT_TOKEN)"
        )
    if not settings.secret("slack_state_secret"):
        problems.append(
            "SLACK_STATE_SECRET is not set: multi-workspace mode signs the install flow's state with it; set it "
            'to a long random string, e.g. `python -c "import secrets; print(secrets.token_urlsafe(32))"`'
        )
    return problems + token_key_problems(settings)


def slack_problems(settings: Settings) -> list[str]:
    if settings.multi_workspace:
        problems = oauth_problems(settings)
    else:
        problems = _bot_token_problems(settings)
    app_token = settings.secret("slack_app_token")
    if app_token and not app_token.startswith("xapp-"):
        problems.append("SLACK_APP_TOKEN should be an app-level token starting with xapp- (with connections:write)")
    if not app_token and not settings.secret("slack_signing_secret"):
        problems.append(
            "SLACK_SIGNING_SECRET is not set: HTTP mode needs it (Basic Information → Signing Secret); "
            "or set SLACK_APP_TOKEN to use Socket Mode"
        )
    return problems


def _bot_token_problems(settings: Settings) -> list[str]:
    problems = []
    token = settings.secret("slack_bot_token")
    if not token:
        problems.append(
            "SLACK_BOT_TOKEN is not set: copy the Bot User OAuth Token (xoxb-…) from your Slack app's "
            "OAuth & Permissions page and export it"
        )
    elif not token.startswith("xoxb-"):
        problems.append("SLACK_BOT_TOKEN does not look like a bot token: it should start with xoxb-")
    return problems


def model_problems(settings: Settings) -> list[str]:
    """The provider's own settings (DEEPTHREAD_MODEL_PROVIDER), then what it makes of the model ids."""
    provider = settings.model_provider
    problems: list[str] = []
    if provider == "anthropic":
        if not settings.secret("anthropic_api_key"):
            problems.append("ANTHROPIC_API_KEY is not set: create a key in the Anthropic console and export it")
    else:
        problems += provider_problems(settings.provider_config())  # every missing one at once, extras too
        for variable, value, default in (
            ("DEEPTHREAD_MODEL", settings.model, agent_defaults.MAIN_MODEL),
            ("DEEPTHREAD_SMALL_MODEL", settings.small_model, agent_defaults.SMALL_MODEL),
        ):
            if value == default:
                problems.append(
                    f"{variable} is not set: DEEPTHREAD_MODEL_PROVIDER={provider} needs the model id in "
                    f"{PROVIDER_ID_FORMS[provider]}"
                )
    return problems


# How each provider spells a model id, for the line that asks for one.
PROVIDER_ID_FORMS = {
    "bedrock": "Bedrock's form (e.g. anthropic.claude-sonnet-5-5-v1:0, or an inference profile us.anthropic.…)",
    "vertex": "Vertex's form (e.g. claude-sonnet-5-5, or a dated claude-sonnet-5-5@YYYYMMDD)",
}


def model_notices(settings: Settings) -> list[str]:
    """Not problems: what the capability table makes of ids it does not know, and an install flow open to
    every workspace (doctor prints them)."""
    models = dict.fromkeys((settings.model, settings.small_model))
    notices = [unknown_model_notice(m) for m in models if not capabilities(m, settings.model_provider).known]
    return notices + install_notices(settings)


def install_notices(settings: Settings) -> list[str]:
    """Multi-workspace mode with no DEEPTHREAD_INSTALL_ALLOW: any workspace can install and spend the model key."""
    if not settings.multi_workspace or not InstallAllowlist.parse(settings.install_allow).open:
        return []
    budget = settings.new_workspace_budget_usd
    bound = f"up to ${budget:,.2f} a month each" if budget is not None else "with no monthly cap"
    return [
        "DEEPTHREAD_INSTALL_ALLOW is not set: any Slack workspace that completes the install flow is saved and "
        f"spends this deployment's model key ({bound}); list the team ids (T…) or Enterprise ids (E…) that "
        "may install, comma-separated"
    ]


def search_problems(settings: Settings) -> list[str]:
    """One line per provider in DEEPTHREAD_SEARCH (a name, or a fallback list) that cannot work."""
    chain = settings.search_chain()
    if not chain:
        return [
            "DEEPTHREAD_SEARCH is empty: unset it to use duckduckgo (no key), or list providers in the order "
            "to try them, e.g. DEEPTHREAD_SEARCH=brave,duckduckgo"
        ]
    single = len(chain) == 1
    instead = "or use DEEPTHREAD_SEARCH=duckduckgo (no key)" if single else "or remove it from the list"
    problems = []
    for provider in chain:
        # Each line starts with the setting to change: "DEEPTHREAD_SEARCH=brave,bing: bing is …".
        where = f"DEEPTHREAD_SEARCH={provider}" if single else f"DEEPTHREAD_SEARCH={','.join(chain)}: {provider}"
        if provider not in SEARCH_PROVIDERS:
            problems.append(
                f"{where} is not a known provider: use duckduckgo (default, no key), searxng, brave, "
                "tavily or anthropic, alone or as a fallback list in order (e.g. brave,duckduckgo)"
            )
        elif provider == "anthropic":
            small = capabilities(settings.small_model, settings.model_provider)
            if not small.server_tools & {WEB_SEARCH_TYPE, WEB_SEARCH_BASIC_TYPE}:
                problems.append(
                    f"{where}: DEEPTHREAD_SMALL_MODEL={settings.small_model} cannot run Anthropic's web search on "
                    f"{settings.provider_config().label} (the capability table lists no web search tool for it); "
                    f"use a model that has it, {instead}"
                )
        elif provider == "searxng" and not settings.searxng_url:
            problems.append(f"{where} needs SEARXNG_URL, e.g. SEARXNG_URL=http://localhost:8888, {instead}")
        elif provider in PROVIDER_KEYS:
            env, field, help_text = PROVIDER_KEYS[provider]
            if not (settings.secret(field) or "").strip():
                problems.append(f"{env} is not set: {where} needs it; {help_text} and export it, {instead}")
    return problems


def fetch_problems(settings: Settings) -> list[str]:
    problems = []
    for entry in filter(None, (e.strip() for e in settings.fetch_allow.split(","))):
        if "/" in entry:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                problems.append(f"DEEPTHREAD_FETCH_ALLOW entry {entry!r} is not a valid CIDR (e.g. 10.0.0.0/8)")
    return problems


def redis_problems(settings: Settings, *, can_start_local: bool) -> list[str]:
    if not settings.redis_url:
        if can_start_local and shutil.which("redis-server"):
            return []
        if can_start_local:
            return [
                "REDIS_URL is not set and redis-server is not installed: install it (apt-get install redis-server) "
                "or set REDIS_URL=redis://host:6379/0"
            ]
        return [
            "REDIS_URL is not set: set it (e.g. redis://localhost:6379/0), or run `deepthread up`, "
            "which starts a local Redis for you"
        ]
    try:
        client = connect(settings.redis_url, retry_window=0)  # doctor answers now, not after the retry window
    except RedisUrlError as exc:
        return [str(exc)]
    try:
        client.ping()
    except (RedisError, ValueError) as exc:
        return [
            f"REDIS_URL={redact(settings.redis_url)} is not reachable ({type(exc).__name__}): start Redis there, "
            "or unset REDIS_URL and use `deepthread up`"
        ]
    finally:
        client.close()
    return []


def mcp_problems(settings: Settings) -> list[str]:
    """DEEPTHREAD_MCP_SERVERS that cannot be read (whether each server answers is seen at each run's start)."""
    try:
        settings.mcp_servers()
    except ValueError as exc:
        return [str(exc)]
    return []


def check(settings: Settings, command: str) -> list[str]:
    """Problems that stop `command` from working."""
    if command == "serve":
        return slack_problems(settings) + redis_problems(settings, can_start_local=False)
    if command == "worker":
        # A worker reads its run's thread with the installation's token: it needs the key too.
        keys = token_key_problems(settings) if settings.multi_workspace else []
        return (
            keys
            + model_problems(settings)
            + search_problems(settings)
            + fetch_problems(settings)
            + mcp_problems(settings)
            + redis_problems(settings, can_start_local=False)
        )
    if command == "ask":
        return model_problems(settings) + search_problems(settings) + fetch_problems(settings) + mcp_problems(settings)
    # up and doctor need everything
    return (
        slack_problems(settings)
        + model_problems(settings)
        + search_problems(settings)
        + fetch_problems(settings)
        + mcp_problems(settings)
        + redis_problems(settings, can_start_local=True)
    )
