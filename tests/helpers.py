"""Helpers shared by test modules (imported from here, never from another test module)."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from anthropic import AsyncAnthropic

from agent import AgentConfig, FetchConfig, Outcome, ResearchTask, RunEvent, SearchConfig, research


def web_config(web_url: str) -> AgentConfig:
    """The agent's configuration against the fake web: SearXNG-shaped search, loopback allowed."""
    return AgentConfig(search=SearchConfig(provider="searxng", searxng_url=web_url),
                       fetch=FetchConfig(allow=["127.0.0.1"]))


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


def seen(ctx, url: str) -> str:  # noqa: ANN001 - an agent ToolContext
    """The URL as the run saw it (a search result, a link in the question): read_page opens only such URLs."""
    ctx.seen.add(url)
    return url
# --- every Redis key builder as a pattern (jobs/keys.py, bot/keys.py) ----------------------------

# Builders whose key has neither a team nor a run id, each with why that is safe. A new builder
# without either fails tests/jobs/test_keys.py until it is given one or listed here.
WITHOUT_OWNER = {
    "dedupe": "a run's own once-only marks: the name embeds the run id (notes, recovery)",
    "capacity": "the organization's model capacity, shared by every workspace by design (fair shares inside it)",
    "oauth_state": "an install flow's state, issued before any workspace is known; holds nothing",
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
            # `…:runs`, `…:stale`-style records kept beside a builder's key belong to the same owner.
            literal = len("".join(pieces[0::2]))
            kinds.append((literal, len(params), KeyKind(name, params, re.compile(f"{regex}(?::[\\w-]+)?"), function)))
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
