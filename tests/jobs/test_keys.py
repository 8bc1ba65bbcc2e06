"""Redis keys: every key follows the deployment's prefix (DEEPTHREAD_REDIS_PREFIX) and its queue
(DEEPTHREAD_QUEUE), read at each use, so no module keeps a copy made before they were set; and every
key belongs to one installation: generated over every key builder in jobs/keyspace/keys.py and bot/keys.py
(read from the modules, so a builder added later is checked too). A builder takes the team, or the
run id (a run has one team), or is listed with why it needs neither."""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot import keys as bot_keys
from jobs import keys
from tests.helpers import WITHOUT_OWNER, KeyKind, key_kinds
from tests.paths import ROOT

SHARED = {"PREFIX", "QUEUE", "UPDATES_STREAM", "ACTIVE_RUNS", "HARD_STOPS", "HARD_STOP_REASONS", "UNPOSTED",
          "RECHECKS_TO_SHOW", "RECHECK_DIGESTS", "RECHECK_NOTICES", "PUBLISHER_CURSOR", "INSTALLATIONS", "PLANS_DUE",
          "IDLE_SESSIONS", "CAPACITY_MODELS"}


@pytest.fixture
def staging() -> Iterator[None]:
    keys.configure(prefix="staging")
    yield
    keys.configure()


def test_every_key_and_the_queue_follow_the_configured_prefix(staging: None) -> None:
    assert keys.run_state("r1") == "staging:run:r1:state" and keys.lock("r1") == "staging:run:r1:lock"
    assert keys.UPDATES_STREAM == "staging:updates" and keys.UNPOSTED == "staging:runs:unposted"
    assert keys.QUEUE == "staging", "a deployment that sets only a prefix gets its own queue"
    assert bot_keys.PUBLISHER_CURSOR == "staging:publisher:cursor" and bot_keys.posts("r1") == "staging:posts:r1"


def test_the_queue_may_be_named_apart_from_the_prefix() -> None:
    keys.configure(prefix="team-a", queue="research")
    try:
        assert (keys.QUEUE, keys.PREFIX) == ("research", "team-a")
    finally:
        keys.configure()
    assert keys.run_state("r1") == "deepthread:run:r1:state", "the default, back again"


@pytest.mark.parametrize("bad", ["", "has space", "a/b", "x" * 65, "-leading"])
def test_a_prefix_that_cannot_name_keys_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="letters, digits"):
        keys.configure(prefix=bad)


def _frozen_copies(path: Path) -> list[str]:
    """Places that copy a deployment-wide key name into a name of their own at import time."""
    found = []
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("jobs.keys", "jobs.keyspace.keys", "bot.keys", "keys") or (
                isinstance(node, ast.ImportFrom) and node.level and node.module in ("keys", "keyspace.keys")):
            found += [f"{path}:{node.lineno} imports {a.name}" for a in node.names if a.name in SHARED]
    for node in tree.body:  # module-level statements run at import
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Attribute) and sub.attr in SHARED:
                    found.append(f"{path}:{node.lineno} copies {sub.attr}")
    return found


@pytest.mark.parametrize("module", ["jobs/keyspace/keys.py", "bot/keys.py"])
def test_the_key_modules_build_no_name_at_import(module: str) -> None:
    """A module-level name built from the prefix keeps the prefix of import time: the shared names
    are built at each use (their __getattr__), never as constants."""
    tree = ast.parse((ROOT / module).read_text())
    frozen = [node.lineno for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
              and node.value is not None and any(isinstance(sub, ast.JoinedStr) for sub in ast.walk(node.value))]
    assert frozen == [], f"{module} builds key names at import on lines {frozen}: add them to _SHARED"


def test_no_module_keeps_a_key_name_from_before_the_prefix_was_set() -> None:
    found = [hit for package in ("agent", "jobs", "bot") for path in sorted((ROOT / package).rglob("*.py"))
             for hit in _frozen_copies(path)]
    assert found == [], "read keys.X where it is used, not at import: " + "; ".join(found)


KINDS = key_kinds()


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_every_key_names_its_team_or_its_run(kind: KeyKind) -> None:
    if "team" in kind.params or "run_id" in kind.params:
        return
    assert kind.name in WITHOUT_OWNER, (
        f"{kind.name}{kind.params} names neither a team nor a run: give it a team dimension "
        "(jobs.keys.team_part) or say in tests/helpers.py WITHOUT_OWNER why it needs none")


@pytest.mark.parametrize("kind", [k for k in KINDS if "team" in k.params], ids=lambda k: k.name)
def test_the_same_names_in_two_workspaces_are_two_records(kind: KeyKind) -> None:
    """A channel id two workspaces share (Slack Connect), or a guessed id, never reaches the other's record."""
    args = {p: f"x{p}" for p in kind.params}
    alpha, beta = kind.build(**{**args, "team": "T0ALPHA"}), kind.build(**{**args, "team": "T0BETA"})
    assert alpha != beta and "T0ALPHA" in alpha and "T0BETA" in beta
    assert kind.pattern.fullmatch(alpha)["team"] == "T0ALPHA"


def test_the_listed_exceptions_are_still_builders() -> None:
    assert set(WITHOUT_OWNER) <= {k.name for k in KINDS}, "a listed builder is gone: drop it from the list"
