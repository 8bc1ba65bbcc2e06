"""Whether a conversation is shared outside the organization, from conversations.info as Slack
answers it: any sign of another organization (shared now, an invitation pending, another team
listed) makes it outside; a channel shared only within one's own Enterprise org stays inside."""
from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.audience import OTHER_TEAM_FIELDS, is_shared_externally, shared_externally

TEAM, ORG = "T0HOME", "E0HOME"
teams = st.lists(st.sampled_from([TEAM, "T0PARTNER", "T0OTHER"]), max_size=3)
infos = st.fixed_dictionaries(
    {},
    optional={
        "is_ext_shared": st.booleans(),
        "is_pending_ext_shared": st.booleans(),
        "is_org_shared": st.booleans(),
        "is_shared": st.booleans(),
        "is_private": st.booleans(),
        "is_im": st.booleans(),
        **{name: teams for name in OTHER_TEAM_FIELDS},
    },
)


@given(infos, st.sampled_from([None, ORG]))
def test_outside_exactly_when_slack_shows_another_organization(info: dict, enterprise: str | None) -> None:
    others = {t for name in OTHER_TEAM_FIELDS for t in info.get(name, [])} - {TEAM}
    expected = bool(
        info.get("is_ext_shared")
        or info.get("is_pending_ext_shared")
        or (others and not (info.get("is_org_shared") and enterprise))
    )
    assert is_shared_externally(info, TEAM, enterprise) is expected


@given(infos)
def test_an_externally_shared_flag_wins_over_everything_else(info: dict) -> None:
    assert is_shared_externally({**info, "is_ext_shared": True}, TEAM, ORG)
    assert is_shared_externally({**info, "is_pending_ext_shared": True}, TEAM, None)


@pytest.mark.parametrize(("ext_shared", "scope_granted", "expected"),
                         [(False, True, False), (True, True, True), (False, False, True)])
def test_the_lookup_asks_slack_and_counts_an_unanswered_one_as_shared(
        fake_slack, ext_shared: bool, scope_granted: bool, expected: bool) -> None:
    fake_slack.add_conversation("C0ROOM", name="room", private=False, ext_shared=ext_shared)
    if not scope_granted:
        fake_slack.scopes.discard("channels:read")
    client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    assert asyncio.run(shared_externally(client, "C0ROOM", fake_slack.team_id, None)) is expected
