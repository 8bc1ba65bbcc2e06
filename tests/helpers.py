"""Helpers shared by test modules (imported from here, never from another test module)."""
from __future__ import annotations

import ast
import asyncio
import inspect
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anthropic import AsyncAnthropic
from slack_sdk.web.async_client import AsyncWebClient

from agent import AgentConfig, FetchConfig, Outcome, ResearchTask, RunEvent, SearchConfig, research
from rq import SimpleWorker

from jobs import Run, RunState, RunStore
from jobs.workers.worker import QuickCommandChannel
from tests.paths import ROOT
from tests.redis_values import values_of

if TYPE_CHECKING:
    from bot.publishing.publisher import Publisher

CHANNEL = "C0TEST"


def web_config(web_url: str) -> AgentConfig:
    """The agent's configuration against the fake web: SearXNG-shaped search, loopback allowed."""
    # The claim check off: scripted policies write placeholder claims no source supports, and answer
    # requests in a fixed order (tests/agent/test_claim_check.py and tests/e2e/test_claim_check.py run it on).
    return AgentConfig(search=SearchConfig(provider="searxng", searxng_url=web_url),
                       fetch=FetchConfig(allow=["127.0.0.1"]), claim_check=False)


async def research_events(fake_model: Any, fake_web: Any, task: ResearchTask | str,
                          **options: Any) -> tuple[list[RunEvent], Outcome]:
    """Run `research()` against the fake Messages API and web; every event it emitted, and its outcome."""
    events: list[RunEvent] = []

    async def emit(event: RunEvent) -> None:
        events.append(event)

    task = ResearchTask(question=task) if isinstance(task, str) else task
    async with AsyncAnthropic(api_key="test-key", base_url=fake_model.url) as client:
        outcome = await research(task, web_config(fake_web.url), anthropic=client, emit=emit, **options)
    return events, outcome


def as_sent(blocks: list[dict[str, Any]]) -> Any:
    """Blocks as the client sends them: through the one rule every request passes (bot/slack/outgoing.py),
    which marks every mrkdwn text verbatim."""
    from bot.slack.outgoing import guard

    return guard("chat.update", {"blocks": blocks}, None, None)[0]["blocks"]


def seen(ctx, url: str) -> str:  # noqa: ANN001 - an agent ToolContext
    """The URL as the run saw it (a search result, a link in the question): read_page opens only such URLs."""
    ctx.seen.add(url)
    return url


# --- every Redis key builder as a pattern (jobs/keyspace/keys.py, bot/keys.py) ----------------------------

# Builders whose key has neither a team nor a run id, each with why that is safe. A new builder
# without either fails tests/jobs/test_keys.py until it is given one or listed here.
WITHOUT_OWNER = {
    "dedupe": "a run's own once-only marks: the name embeds the run id (notes, recovery)",
    "capacity": "the organization's model capacity, shared by every workspace by design (fair shares inside it)",
    "legacy_thread_runs": "named before keys had a team; moved under its run's team on first read",
    "legacy_message_run": "named before keys had a team; moved under its run's team on first read",
    "legacy_thread_profile": "named before keys had a team; read only for a run of that thread",
    "legacy_recheck_schedule": "named before keys had a team; its schedule names the team",
    "legacy_charts": "named before keys had a team; moved under the synced run's team",
    "legacy_spill": "named before keys had a team; moved under the synced run's team",
}
# Helpers in the key modules that build no key.
NOT_BUILDERS = {"team_part", "workspace", "configure", "prefix"}
# Parts that may hold ':' themselves (a dedupe name, a rate bucket "method:channel").
GREEDY_PARTS = {"name", "method"}


@dataclass(frozen=True)
class KeyKind:
    """One key builder: its name, its parameters, and the keys it builds as a regex with those parts."""

    name: str
    params: tuple[str, ...]
    pattern: re.Pattern[str]
    build: Callable[..., str]


def key_kinds() -> list[KeyKind]:
    """Every key builder of the two key modules, the most specific first."""
    import inspect

    from bot import keys as bot_keys
    from jobs import keys as job_keys

    kinds: list[tuple[int, int, KeyKind]] = []
    for module in (job_keys, bot_keys):
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__ or name.startswith("_") or name in NOT_BUILDERS:
                continue
            params = tuple(inspect.signature(function).parameters)
            template = function(*(f"\x00{p}\x00" for p in params))
            regex = ""
            pieces = re.split(r"\x00(\w+)\x00", template)
            for i, piece in enumerate(pieces):
                if i % 2 == 0:
                    regex += re.escape(piece)
                else:
                    regex += f"(?P<{piece}>{'.+' if piece in GREEDY_PARTS else '[^:]+'})"
            # `…:runs`, `…:stale`, `…:runs:{channel}`-style records kept beside a builder's key belong to its owner.
            literal = len("".join(pieces[0::2]))
            kinds.append((literal, len(params), KeyKind(name, params, re.compile(f"{regex}(?::[\\w.-]+)*"), function)))
    # The most specific first: the most literal text, then the most parts.
    return [kind for *_, kind in sorted(kinds, key=lambda k: (-k[0], -k[1]))]


def constant_keys() -> dict[str, str]:
    """Keys the modules name as constants (process-wide records: work lists, cursors, indexes)."""
    from bot import keys as bot_keys
    from jobs import keys as job_keys

    prefix = f"{job_keys.PREFIX}:"
    # The deployment-wide names are read at each use (module __getattr__), so not in vars().
    names = {module: {*vars(module), *getattr(module, "_SHARED", ()), *getattr(module, "__all__", ())}
             for module in (job_keys, bot_keys)}
    return {value: name for module, found in names.items() for name in found if name.isupper()
            for value in [getattr(module, name, None)] if isinstance(value, str) and value.startswith(prefix)}


# --- the publisher against the fake Slack ---------------------------------------------------

_thread = iter(range(1, 10_000))


async def posted_run(store: RunStore, client: AsyncWebClient, team: str | None = None,
                     question: str = "fees of VTI?") -> RunState:
    """A run whose progress and report messages are posted in a thread of their own, as the mention flow leaves it."""
    thread_ts = f"1700000000.{next(_thread):06d}"
    state = store.create(Run(channel=CHANNEL, thread_ts=thread_ts, requester="U0ANA", question=question,
                             team=team))
    progress = await client.chat_postMessage(channel=CHANNEL, thread_ts=thread_ts, text="…")
    report = await client.chat_postMessage(channel=CHANNEL, thread_ts=thread_ts, text="…")
    return store.set_messages(state.run.id, progress=progress["ts"], report=report["ts"])


async def eventually(check: Callable[[], bool], seconds: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)



class Running:
    """Publisher.run loops in the background for the length of a `with` block."""

    def __init__(self, *publishers: Publisher) -> None:
        self.publishers = publishers
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Running:
        self.tasks = [asyncio.create_task(p.run(self.stop)) for p in self.publishers]
        return self

    async def __aexit__(self, *_: object) -> None:
        self.stop.set()
        await asyncio.wait_for(asyncio.gather(*self.tasks), 10)


# --- the Slack Web API calls the bot's code makes --------------------------------------------

SDK_METHODS = {name for name, _ in inspect.getmembers(AsyncWebClient, inspect.iscoroutinefunction)
               if not name.startswith("_")}


def _api_methods(sdk_name: str, seen: frozenset[str] = frozenset()) -> set[str]:
    """The Web API methods one SDK call makes (files_upload_v2 makes two)."""
    source = inspect.getsource(getattr(AsyncWebClient, sdk_name))
    methods = set(re.findall(r'api_call\(\s*"([^"]+)"', source))
    for inner in set(re.findall(r"self\.(\w+)\(", source)) & SDK_METHODS - seen - {sdk_name}:
        methods |= _api_methods(inner, seen | {sdk_name})
    return methods


def api_methods_of(sdk_name: str) -> set[str]:
    """The Web API methods an entry of sdk_calls_in_code() makes."""
    return {sdk_name.split(":", 1)[1]} if sdk_name.startswith("api_call:") else _api_methods(sdk_name)


def sdk_calls_in_code() -> dict[str, set[str]]:
    """SDK method name → the files that call it, over every module the bot runs (read from the code)."""
    calls: dict[str, set[str]] = {}
    for path in sorted((ROOT / "bot").rglob("*.py")) + sorted((ROOT / "jobs").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SDK_METHODS:
                calls.setdefault(node.func.attr, set()).add(str(path.relative_to(ROOT)))
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "api_call"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                calls.setdefault(f"api_call:{node.args[0].value}", set()).add(str(path.relative_to(ROOT)))
    return calls


def keys_holding(redis: Any, needle: str) -> list[str]:
    """Every key of ours whose name or value holds `needle` (strings, hashes, lists, sets, sorted
    sets); RQ's registries and the updates stream (run ids and versions, capped) are not read."""
    found = []
    for raw in redis.scan_iter(count=1000):
        key = raw.decode()
        if key.startswith("rq:"):
            continue
        values = _values(redis, key)
        if needle in key or any(needle.encode() in (v or b"") for v in values):
            found.append(key)
    return found


def _values(redis: Any, key: str) -> list[Any]:
    return values_of(redis, key, streams=False)  # the updates stream holds run ids and versions only


class BurstWorker(QuickCommandChannel, SimpleWorker):
    """RQ's in-process worker for tests that run the queue in burst mode, with our command channel:
    RQ's own waited up to 60 s on its way out (jobs/workers/worker.py, PUBSUB_WAIT_SECONDS)."""
