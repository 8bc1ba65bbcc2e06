"""The installation store (tokens encrypted at rest, found as Bolt finds them, org-wide installs
included), the OAuth state store, and the shared client acting for one installation at a time."""
from __future__ import annotations

import base64
import time

import pytest
from cryptography.fernet import Fernet
from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from slack_sdk.oauth.installation_store import Installation

from bot import keys
from bot.exceptions import NotInstalled, TokenKeyMismatch
from bot.slack.client import LimitedWebClient
from bot.slack.installations import InstallationTokens, RedisInstallationStore, TokenCipher
from bot.slack.admission import InstallAllowlist
from bot.slack.oauth_state import InstallsBusy, RedisOAuthStateStore
from bot.slack.tenancy import Tenant, acting_for
from tests.fakes.server import ServerThread
from tests.fakes.slack import FakeSlack

KEY = Fernet.generate_key().decode()
# In test ids, so the same on every test process (pytest-xdist collects in each).
FIXED_KEY = base64.urlsafe_b64encode(b"k" * 32).decode()


def installation(team: str | None, *, token: str, enterprise: str | None = None, org_wide: bool = False,
                 refresh: str | None = None) -> Installation:
    return Installation(
        app_id="A0TEST", enterprise_id=enterprise, team_id=None if org_wide else team, team_name=f"Team {team}",
        bot_token=token, bot_id=f"B{team}", bot_user_id=f"UBOT{team}", bot_scopes="chat:write,pins:write",
        bot_refresh_token=refresh, user_id="U0INSTALLER", is_enterprise_install=org_wide, installed_at=time.time(),
    )


async def test_a_saved_installation_keeps_its_tokens_encrypted_and_is_found_again(async_redis: AsyncRedis,
                                                                                 redis: Redis) -> None:
    store = RedisInstallationStore(async_redis, TokenCipher(KEY))
    await store.async_save(installation("T1", token="xoxb-secret-one", refresh="xoxe-refresh-one"))
    raw = redis.get(keys.installation("-", "T1"))
    assert raw and b"xoxb-secret-one" not in raw and b"xoxe-refresh-one" not in raw, "nothing in clear"
    bot = await store.async_find_bot(enterprise_id=None, team_id="T1")
    assert bot is not None and (bot.bot_token, bot.bot_refresh_token) == ("xoxb-secret-one", "xoxe-refresh-one")
    assert (bot.bot_id, bot.bot_user_id, bot.bot_scopes) == ("BT1", "UBOTT1", ["chat:write", "pins:write"])
    assert await store.async_find_bot(enterprise_id=None, team_id="T2") is None, "another workspace has none"
    found = await store.async_find_installation(enterprise_id=None, team_id="T1")
    assert found is not None and found.bot_token == "xoxb-secret-one"
    assert await store.bot_token(Tenant(team="T1")) == "xoxb-secret-one"
    assert InstallationTokens(redis, TokenCipher(KEY)).bot_token(Tenant(team="T1")) == "xoxb-secret-one"
    assert [s.team_id for s in await store.installed()] == ["T1"]


async def test_an_org_wide_install_is_found_for_every_workspace_of_the_org_and_only_its_own(
        async_redis: AsyncRedis, redis: Redis) -> None:
    store = RedisInstallationStore(async_redis, TokenCipher(KEY))
    await store.async_save(installation("E1", token="xoxb-org", enterprise="E1", org_wide=True))
    await store.async_save(installation("T9", token="xoxb-plain"))
    for tenant in (Tenant(team="T1", enterprise="E1", enterprise_install=True), Tenant(team="T2", enterprise="E1")):
        assert await store.bot_token(tenant) == "xoxb-org"
        assert InstallationTokens(redis, TokenCipher(KEY)).bot_token(tenant) == "xoxb-org"
    assert await store.bot_token(Tenant(team="T1", enterprise="E2")) is None, "another org"
    assert await store.bot_token(Tenant(team="T1")) is None, "a workspace outside the org"
    await store.async_delete_all(enterprise_id="E1", team_id=None)  # removed from the org
    assert await store.bot_token(Tenant(team="T1", enterprise="E1", enterprise_install=True)) is None
    assert await store.bot_token(Tenant(team="T9")) == "xoxb-plain", "other installations stay"


@pytest.mark.parametrize(("allow", "admitted"), [
    ("T1", {"T1"}),
    ("E1", {"E1-org"}),
    ("E2", {"T3@E2"}),
    ("T1, E2", {"T1", "T3@E2"}),
])
async def test_an_installation_saved_before_the_allowlist_and_outside_it_is_found_by_nothing(
        async_redis: AsyncRedis, redis: Redis, allow: str, admitted: set[str]) -> None:
    """Saved while anyone could install; read with the list set: only what it admits is found, by the
    events' authorize, the publisher and the workers alike."""
    await RedisInstallationStore(async_redis, TokenCipher(KEY)).async_save(installation("T1", token="xoxb-t1"))
    await RedisInstallationStore(async_redis, TokenCipher(KEY)).async_save(
        installation("E1", token="xoxb-e1", enterprise="E1", org_wide=True))
    await RedisInstallationStore(async_redis, TokenCipher(KEY)).async_save(
        installation("T3", token="xoxb-t3", enterprise="E2"))
    allowlist = InstallAllowlist.parse(allow)
    store = RedisInstallationStore(async_redis, TokenCipher(KEY), allowlist)
    tokens = InstallationTokens(redis, TokenCipher(KEY), allowlist)
    tenants = {"T1": Tenant(team="T1"), "E1-org": Tenant(team="T7", enterprise="E1", enterprise_install=True),
               "T3@E2": Tenant(team="T3", enterprise="E2")}
    for name, tenant in tenants.items():
        found = await store.bot_token(tenant)
        assert (found is not None) == (name in admitted) == (tokens.bot_token(tenant) is not None), name
    refused = {s.team_id or s.enterprise_id for s in await store.refused()}
    assert len(refused) == 3 - len(admitted)


async def test_uninstalling_deletes_the_workspaces_tokens_only(async_redis: AsyncRedis, redis: Redis) -> None:
    store = RedisInstallationStore(async_redis, TokenCipher(KEY))
    for team in ("T1", "T2"):
        await store.async_save(installation(team, token=f"xoxb-{team}"))
    await store.async_delete_all(enterprise_id=None, team_id="T1")
    assert await store.bot_token(Tenant(team="T1")) is None
    assert await store.bot_token(Tenant(team="T2")) == "xoxb-T2"
    assert redis.smembers(keys.INSTALLATIONS) == {keys.installation("-", "T2").encode()}


async def test_a_rotated_key_still_reads_tokens_sealed_with_the_old_one_and_a_lost_key_says_what_to_do(
        async_redis: AsyncRedis, redis: Redis) -> None:
    old, new = KEY, Fernet.generate_key().decode()
    await RedisInstallationStore(async_redis, TokenCipher(old)).async_save(installation("T1", token="xoxb-one"))
    rotated = RedisInstallationStore(async_redis, TokenCipher(f"{new},{old}"))
    assert await rotated.bot_token(Tenant(team="T1")) == "xoxb-one"
    with pytest.raises(TokenKeyMismatch, match=r"DEEPTHREAD_TOKEN_KEY=new,old"):
        await RedisInstallationStore(async_redis, TokenCipher(new)).bot_token(Tenant(team="T1"))


@pytest.mark.parametrize("key", ["", "  ", "not-a-key", "c2hvcnQ=", f"{FIXED_KEY},garbage"])
def test_a_token_key_that_is_not_a_fernet_key_is_refused_with_how_to_make_one(key: str) -> None:
    with pytest.raises(ValueError, match=r"DEEPTHREAD_TOKEN_KEY"):
        TokenCipher(key)


async def test_an_oauth_state_is_good_once_and_only_if_this_deployment_signed_it(async_redis: AsyncRedis) -> None:
    states = RedisOAuthStateStore(async_redis, "secret")
    state = await states.async_issue()
    assert await states.async_consume(state)
    assert not await states.async_consume(state), "a replayed redirect is refused"
    nonce = (await states.async_issue()).split(".")[0]
    assert not await states.async_consume(f"{nonce}.{'0' * 64}"), "a forged signature is refused"
    assert not await RedisOAuthStateStore(async_redis, "another-secret").async_consume(await states.async_issue())
    assert not await states.async_consume(""), "no state at all"
    brief = RedisOAuthStateStore(async_redis, "secret", expiration_seconds=1)
    expired = await brief.async_issue()
    await async_redis.zadd(keys.OAUTH_STATES, {expired.split(".")[0]: 1})  # what the passing of time does
    assert not await brief.async_consume(expired)


async def test_the_install_flows_in_progress_are_capped_and_expire_by_themselves(async_redis: AsyncRedis) -> None:
    states = RedisOAuthStateStore(async_redis, "secret", expiration_seconds=300, max_pending=3)
    issued = [await states.async_issue() for _ in range(3)]
    with pytest.raises(InstallsBusy):
        await states.async_issue()
    assert await async_redis.zcard(keys.OAUTH_STATES) == 3, "one key, never more than the cap"
    assert 0 < await async_redis.ttl(keys.OAUTH_STATES) <= 301, "it expires with its last state"
    assert await states.async_consume(issued[0])
    assert await states.async_issue(), "a finished install makes room"
    await async_redis.zadd(keys.OAUTH_STATES, {issued[1].split(".")[0]: 1})  # abandoned long ago
    fresh = await states.async_issue()
    assert await states.async_consume(fresh) and not await states.async_consume(issued[1])


@pytest.fixture
def slack() -> FakeSlack:
    fake = FakeSlack()
    with ServerThread(fake.app()) as server:
        fake.url = server.url  # type: ignore[attr-defined]
        yield fake


async def test_the_shared_client_uses_the_token_of_the_installation_it_acts_for(async_redis: AsyncRedis,
                                                                               slack: FakeSlack) -> None:
    for team in ("T1", "T2"):
        slack.add_workspace(team, channels=(f"C{team}",))
    slack.configure_oauth("cid", "secret", "http://127.0.0.1:1/slack/oauth_redirect")
    store = RedisInstallationStore(async_redis, TokenCipher(KEY))
    for team in ("T1", "T2"):
        await store.async_save(installation(team, token=slack.issue_token(team)))
    client = LimitedWebClient(base_url=f"{slack.url}/api/", tokens=store)
    for team in ("T1", "T2"):
        with acting_for(Tenant(team=team)):
            assert (await client.auth_test())["team_id"] == team
            await client.chat_postMessage(channel=f"C{team}", text="hello")
    assert [m.user for m in slack.messages("CT1")] == ["UBOTT1"]
    with pytest.raises(NotInstalled, match="without saying which installation"):
        await client.auth_test()
    await store.async_delete_all(enterprise_id=None, team_id="T1")
    with acting_for(Tenant(team="T1")), pytest.raises(NotInstalled, match="not installed in T1"):
        await client.chat_postMessage(channel="CT1", text="after the uninstall")
    assert len(slack.messages("CT1")) == 1, "nothing reached Slack"
