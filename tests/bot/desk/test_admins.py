"""Who is an admin: this workspace's admins and owners (users.info, its team compared with the
installation's, or the Enterprise Grid organization's), and the operator's list; a Slack Connect
guest who is an admin of their own organization is not one here."""
from __future__ import annotations

import pytest
from redis import Redis
from slack_sdk.web.async_client import AsyncWebClient

from bot.desk.admins import is_admin
from bot.services import Services
from jobs import RunStore
from tests.fakes.slack import TEAM_ID, FakeSlack

CASES = [
    # (users.info says, DEEPTHREAD_ADMINS lists them, an admin here?)
    ({"admin": True}, False, True),
    ({"owner": True}, False, True),
    ({}, False, False),
    ({}, True, True),
    ({"admin": True, "team_id": "T0PARTNER"}, False, False),  # Slack Connect: admin of another org
    ({"owner": True, "team_id": "T0PARTNER"}, False, False),
    ({"admin": True, "team_id": "T0PARTNER"}, True, True),  # the operator listed them: their call
    ({"admin": True, "team_id": "T0SISTER", "enterprise_id": "E0ORG"}, False, True),  # same Grid organization
    ({"admin": True, "team_id": "T0SISTER", "enterprise_id": "E0OTHER"}, False, False),
]


@pytest.mark.parametrize(("profile", "listed", "expected"), CASES)
async def test_an_admin_is_one_of_this_workspace_or_organization(fake_slack: FakeSlack, redis: Redis, profile: dict,
                                                                  listed: bool, expected: bool) -> None:
    fake_slack.add_user("U0X", **profile)
    services = Services(redis=redis, store=RunStore(redis), team_id=TEAM_ID, enterprise_id="E0ORG",
                        admins=frozenset({"U0X"}) if listed else frozenset())
    client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    assert await is_admin(services, client, "U0X") is expected


async def test_without_users_read_only_listed_admins_count(fake_slack: FakeSlack, redis: Redis) -> None:
    fake_slack.add_user("U0X", admin=True)
    fake_slack.scopes.discard("users:read")
    services = Services(redis=redis, store=RunStore(redis), team_id=TEAM_ID)
    client = AsyncWebClient(token="xoxb-test", base_url=f"{fake_slack.url}/api/")
    assert await is_admin(services, client, "U0X") is False
    fake_slack.scope_refusals.clear()
