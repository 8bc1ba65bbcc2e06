"""Who may read a report, decided at read time from Slack (bot/slack/readers.py), generated over
conversations of every kind (public, private, DM, shared with another organization) with any members,
and people of every kind (of the workspace, its guest accounts, another organization's), against the
rule written out as an oracle: a person reads a report iff they are in its conversation now, or it is a
public channel and they are a person of the workspace; a report is reused in a thread only if every
reader of the thread reads it (never granted where the oracle forbids it)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.readers import Readers
from tests.fakes.slack import TEAM_ID, FakeSlack
from tests.fakes.slack_web import EXTERNAL_TEAM

PEOPLE = {"U0FULL1": "full", "U0FULL2": "full", "U0FULL3": "full", "U0GUEST": "guest", "U0OUTSIDE": "outside"}


@dataclass(frozen=True)
class Conv:
    id: str
    public: bool
    ext_shared: bool
    members: frozenset[str]


def _readers(conv: Conv) -> set[str]:
    """Everyone of PEOPLE who can read the conversation."""
    full = {p for p, kind in PEOPLE.items() if kind == "full"}
    return set(conv.members) | (full if conv.public else set())


@st.composite
def conversations(draw: st.DrawFn, n: int) -> Conv:
    kind = draw(st.sampled_from(["public", "private", "dm", "shared_public", "shared_private"]))
    if kind == "dm":
        person = draw(st.sampled_from(sorted(p for p, k in PEOPLE.items() if k != "outside")))
        return Conv(f"D0CONV{n}", False, False, frozenset({person, "UBOT"}))
    members = draw(st.frozensets(st.sampled_from(sorted(PEOPLE)), max_size=len(PEOPLE)))
    shared = kind.startswith("shared")
    if not shared:
        members = frozenset(m for m in members if PEOPLE[m] != "outside")
    public = kind.endswith("public")
    return Conv(f"{'C' if public else 'G'}0CONV{n}", public, shared, members | {"UBOT"})


def _describe(slack: FakeSlack, *convs: Conv) -> None:
    for person, kind in PEOPLE.items():
        slack.add_user(person, team_id=EXTERNAL_TEAM if kind == "outside" else None, guest=kind == "guest")
    for conv in convs:
        slack.add_conversation(conv.id, private=not conv.public, members=sorted(conv.members),
                               ext_shared=conv.ext_shared)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(report=conversations(1), thread=conversations(2), viewer=st.sampled_from(sorted(PEOPLE)))
def test_who_reads_a_report_and_where_it_may_be_reused_follows_the_rule(fake_slack: FakeSlack, report: Conv,
                                                                          thread: Conv, viewer: str) -> None:
    _describe(fake_slack, report, thread)

    async def ask() -> tuple[bool, bool]:
        client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
        readers = Readers(seconds=0)
        return (await readers.can_read(client, TEAM_ID, None, viewer, report.id),
                await readers.all_can_read(client, TEAM_ID, None, report.id, thread.id, bot_user="UBOT"))

    reads, reusable = asyncio.run(ask())
    assert reads == (viewer in _readers(report)), (report, viewer)
    if reusable:  # never granted where a reader of the thread could not read the report
        assert _readers(thread) - {"UBOT"} <= _readers(report) | {"UBOT"}, (report, thread)
    if not thread.public and not report.public:  # exact where no "whole workspace" is involved
        assert reusable == (thread.members - {"UBOT"} <= report.members), (report, thread)


def test_a_conversation_slack_does_not_describe_is_read_by_nobody(fake_slack: FakeSlack) -> None:
    fake_slack.fail_next("conversations.info", error="channel_not_found")

    async def ask() -> bool:
        client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
        return await Readers(seconds=0).can_read(client, TEAM_ID, None, "U0FULL1", "C0GONE")

    assert asyncio.run(ask()) is False
