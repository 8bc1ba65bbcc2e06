"""`claim check on|off`: a workspace's admins turn the claim check off (or on again) for their
workspace; anyone may ask where it stands; each run reads the setting when it starts."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis import Redis
from slack_sdk.web.async_client import AsyncWebClient

from agent import AgentConfig
from bot.desk.claim_check import claim_check_command, claim_check_switch
from bot.services import Services
from bot.surface.reading import read_question, read_thread_reply
from jobs import RunStore
from jobs.records.workspace_settings import claim_check_on, config_for
from tests.fakes.slack import TEAM_ID, FakeSlack


@pytest.mark.parametrize(("text", "asked"), [
    ("claim check off", "off"), ("Claim check ON", "on"), ("<@U0BOT> claim check off", "off"),
    ("claims check on.", "on"), ("claim-check", "show"), ("claim check", "show"), ("  claim check off! ", "off"),
])
def test_the_command_is_read_in_every_form(text: str, asked: str) -> None:
    assert claim_check_switch(text) == asked
    assert read_question(text, "C0TEST").claim_check == asked
    assert read_thread_reply(text, "C0TEST").claim_check == asked, "a command in a thread, never a note or a run"


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=60))
def test_a_question_that_starts_with_the_words_stays_a_question(rest: str) -> None:
    text = f"claim check {rest}"
    if rest.strip().lower().rstrip(".!") in ("on", "off", ""):
        return
    assert claim_check_switch(text) is None
    assert read_question(text, "C0TEST").claim_check is None


def _services(redis: Redis, *, deployment_on: bool = True) -> Services:
    return Services(redis=redis, store=RunStore(redis), team_id=TEAM_ID, claim_check=deployment_on)


async def test_an_admin_turns_it_off_for_the_workspace_and_each_run_after_reads_it(
        fake_slack: FakeSlack, redis: Redis) -> None:
    fake_slack.add_user("U0ADM", admin=True)
    fake_slack.add_user("U0BEN")
    services = _services(redis)
    client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    deployed = AgentConfig()
    assert config_for(redis, TEAM_ID, deployed).claim_check is True

    refused = await claim_check_command(services, client, team=TEAM_ID, user="U0BEN", ask="off")
    assert "Only a workspace admin" in refused and claim_check_on(redis, TEAM_ID)

    answer = await claim_check_command(services, client, team=TEAM_ID, user="U0ADM", ask="off")
    assert "off in this workspace from the next run on" in answer
    assert config_for(redis, TEAM_ID, deployed).claim_check is False
    assert config_for(redis, "T0OTHER", deployed).claim_check is True, "another workspace keeps its own"
    shown = await claim_check_command(services, client, team=TEAM_ID, user="U0BEN", ask="show")
    assert shown.startswith("The claim check is off (an admin turned it off")

    assert "is on in this workspace" in await claim_check_command(services, client, team=TEAM_ID, user="U0ADM", ask="on")
    assert config_for(redis, TEAM_ID, deployed).claim_check is True


async def test_off_for_the_deployment_wins_over_any_workspace(fake_slack: FakeSlack, redis: Redis) -> None:
    fake_slack.add_user("U0ADM", admin=True)
    services = _services(redis, deployment_on=False)
    client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    assert "DEEPTHREAD_CLAIM_CHECK=off" in await claim_check_command(services, client, team=TEAM_ID, user="U0ADM",
                                                                   ask="show")
    assert "DEEPTHREAD_CLAIM_CHECK=off" in await claim_check_command(services, client, team=TEAM_ID, user="U0ADM",
                                                                   ask="on")
    assert config_for(redis, TEAM_ID, AgentConfig(claim_check=False)).claim_check is False
