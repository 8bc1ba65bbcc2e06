"""Every key belongs to one installation: generated over every key builder in jobs/keys.py and
bot/keys.py (read from the modules, so a builder added later is checked too). A builder takes
the team, or the run id (a run has one team), or is listed with why it needs neither."""
from __future__ import annotations

import pytest

from tests.helpers import WITHOUT_OWNER, KeyKind, key_kinds

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
