"""The fake Slack's install flow and its workspaces, proven with the real slack_sdk client: the
authorize page, oauth.v2.access answered (and refused) the way Slack does, and every call acting
in the workspace of its token."""
from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.fakes.server import ServerThread
from tests.fakes.slack import FakeSlack

CLIENT_ID, SECRET = "111.222", "s3cret"
REDIRECT = "https://bot.example.com/slack/oauth_redirect"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack()
    fake.add_workspace("T1", name="One", channels=("C1",))
    fake.add_workspace("T2", name="Two", channels=("C2",))
    fake.configure_oauth(CLIENT_ID, SECRET, REDIRECT)
    with ServerThread(fake.app()) as server:
        fake.url = server.url  # type: ignore[attr-defined]
        yield fake


def approve(slack: FakeSlack, **query: str) -> dict[str, list[str]]:
    """The authorize page, approved: the query Slack sends the browser back with."""
    params = {"client_id": CLIENT_ID, "scope": "chat:write,pins:write", "state": "st", **query}
    answer = httpx.get(f"{slack.url}/oauth/v2/authorize", params=params)
    assert answer.status_code == 302, answer.text
    location = answer.headers["location"]
    assert location.startswith(query.get("redirect_uri", REDIRECT))
    return parse_qs(urlsplit(location).query)


def api(slack: FakeSlack, token: str | None = None) -> AsyncWebClient:
    return AsyncWebClient(token=token, base_url=f"{slack.url}/api/")


async def test_an_approved_install_exchanges_its_code_once_for_the_workspaces_bot_token(slack: FakeSlack) -> None:
    back = approve(slack, team="T2")
    assert back["state"] == ["st"]
    answer = await api(slack).oauth_v2_access(client_id=CLIENT_ID, client_secret=SECRET, code=back["code"][0])
    assert answer["token_type"] == "bot" and answer["access_token"].startswith("xoxb-")
    assert answer["team"] == {"id": "T2", "name": "Two"} and answer["enterprise"] is None
    assert answer["bot_user_id"] == "UBOTT2" and answer["scope"] == "chat:write,pins:write"
    assert answer["is_enterprise_install"] is False and answer["authed_user"]["id"]
    who = await api(slack, answer["access_token"]).auth_test()
    assert (who["team_id"], who["user_id"], who["bot_id"]) == ("T2", "UBOTT2", "BT2")
    with pytest.raises(SlackApiError, match="invalid_code"):
        await api(slack).oauth_v2_access(client_id=CLIENT_ID, client_secret=SECRET, code=back["code"][0])
    again = await api(slack).oauth_v2_access(client_id=CLIENT_ID, client_secret=SECRET,
                                             code=approve(slack, team="T2")["code"][0])
    assert again["access_token"] == answer["access_token"], "a reinstall keeps the bot token"


async def test_credentials_arrive_by_basic_auth_or_in_the_form(slack: FakeSlack) -> None:
    code = approve(slack, team="T1")["code"][0]
    basic = httpx.post(f"{slack.url}/api/oauth.v2.access", data={"code": code}, auth=(CLIENT_ID, SECRET)).json()
    assert basic["ok"] and basic["team"]["id"] == "T1"


@pytest.mark.parametrize(("change", "error"), [
    ({"client_id": "999.999"}, "invalid_client_id"),
    ({"client_secret": "wrong"}, "bad_client_secret"),
    ({"code": "123.abc"}, "invalid_code"),
    ({"redirect_uri": "https://elsewhere.example.com/cb"}, "bad_redirect_uri"),
])
async def test_a_bad_code_exchange_is_refused_as_slack_refuses_it(slack: FakeSlack, change: dict[str, str],
                                                                  error: str) -> None:
    code = approve(slack, team="T1", redirect_uri=REDIRECT)["code"][0]
    arguments = {"client_id": CLIENT_ID, "client_secret": SECRET, "code": code, "redirect_uri": REDIRECT, **change}
    with pytest.raises(SlackApiError) as refused:
        await api(slack).oauth_v2_access(**arguments)
    assert refused.value.response["error"] == error
    assert slack.installs == []


def test_the_authorize_page_refuses_an_unknown_app_or_redirect_and_can_be_cancelled(slack: FakeSlack) -> None:
    base = {"client_id": CLIENT_ID, "scope": "chat:write", "state": "st"}
    assert httpx.get(f"{slack.url}/oauth/v2/authorize", params={**base, "client_id": "1.2"}).status_code == 400
    assert httpx.get(f"{slack.url}/oauth/v2/authorize",
                     params={**base, "redirect_uri": "https://evil.example.com/"}).status_code == 400
    assert httpx.get(f"{slack.url}/oauth/v2/authorize", params={**base, "scope": ""}).status_code == 400
    slack.deny_next_install()
    assert approve(slack) == {"error": ["access_denied"], "state": ["st"]}


async def test_each_token_acts_in_its_own_workspace_and_a_revoked_one_nowhere(slack: FakeSlack) -> None:
    one, two = api(slack, slack.issue_token("T1")), api(slack, slack.issue_token("T2"))
    posted = await one.chat_postMessage(channel="C1", text="hello")
    assert posted["message"]["team"] == "T1" and posted["message"]["user"] == "UBOTT1"
    for call in (two.chat_postMessage(channel="C1", text="x"), two.conversations_replies(channel="C1", ts=posted["ts"]),
                 two.chat_update(channel="C1", ts=posted["ts"], text="x")):
        with pytest.raises(SlackApiError, match="channel_not_found"):
            await call
    with pytest.raises(SlackApiError, match="invalid_auth"):
        await api(slack, "xoxb-made-up").auth_test()
    slack.uninstall("T1")
    with pytest.raises(SlackApiError, match="token_revoked"):
        await one.auth_test()
    assert (await two.auth_test())["team_id"] == "T2"
    assert [m for m, _ in slack.calls_in("T1")] == ["chat.postMessage"]


async def test_rate_limits_count_per_workspace(slack: FakeSlack) -> None:
    slack.set_rate_limit("chat.postMessage", 1)
    one, two = api(slack, slack.issue_token("T1")), api(slack, slack.issue_token("T2"))
    await one.chat_postMessage(channel="C1", text="a")
    await two.chat_postMessage(channel="C2", text="b")  # another workspace has its own window
    with pytest.raises(SlackApiError) as limited:
        await one.chat_postMessage(channel="C1", text="c")
    assert limited.value.response.status_code == 429


async def test_an_org_wide_install_gives_one_token_for_every_workspace_of_the_org_and_no_other(
        slack: FakeSlack) -> None:
    slack.add_workspace("T3", channels=("C3",), enterprise_id="E1")
    slack.add_workspace("T4", channels=("C4",), enterprise_id="E1")
    back = approve(slack, team="E1")  # an org admin installs for the whole org
    answer = await api(slack).oauth_v2_access(client_id=CLIENT_ID, client_secret=SECRET, code=back["code"][0])
    assert answer["team"] is None and answer["enterprise"] == {"id": "E1", "name": "Org E1"}
    assert answer["is_enterprise_install"] is True
    org = api(slack, answer["access_token"])
    who = await org.auth_test()
    assert who["is_enterprise_install"] is True and who["enterprise_id"] == "E1"
    for channel, team in (("C3", "T3"), ("C4", "T4")):
        posted = await org.chat_postMessage(channel=channel, text="hello")
        assert posted["message"]["team"] == team and posted["message"]["user"] == "WBOTE1"
    with pytest.raises(SlackApiError, match="channel_not_found"):
        await org.chat_postMessage(channel="C1", text="a workspace outside the org")
    slack.uninstall("E1")
    with pytest.raises(SlackApiError, match="token_revoked"):
        await org.chat_postMessage(channel="C3", text="after")
