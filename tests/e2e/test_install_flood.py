"""`/slack/install` cannot fill Redis (issue 45, item 5c), through a real `deepthread serve`.

Each unauthenticated visit to the install page began an install flow: a Redis key per GET (4,571 in
ten seconds). Now one client gets VISITS_PER_CLIENT visits a minute and a 429 with when to come back;
the flows in progress are one key holding at most MAX_PENDING_STATES states, each good for
STATE_SECONDS; a flood from many addresses is refused past that with a page that says so; and an
install a person began before the flood still completes.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from redis import Redis

from bot import keys
from bot.slack.oauth_state import MAX_PENDING_STATES, STATE_SECONDS
from bot.surface.install_limits import VISITS_PER_CLIENT
from tests.e2e.stack import begin_install, workspaces_environment
from tests.fakes.slack import FakeSlack
from tests.processes import free_port, running, wait_listening

ALPHA = "T0ALPHA"


def visit(base: str, address: str, times: int = 1) -> list[httpx.Response]:
    """GETs of the install page from a loopback address of its own (127.0.0.0/8 is all ours)."""
    with httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=20) as client:
        return [client.get(f"{base}/slack/install") for _ in range(times)]


def oauth_keys(redis: Redis) -> list[bytes]:
    return [k for k in redis.scan_iter(match="deepthread:oauth*", count=1000)]


def test_install_page_visits_are_limited_per_client_and_the_flows_in_progress_are_capped(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    fake_slack.add_workspace(ALPHA, name="Team Alpha", channels=("C0ALPHA",))
    port = free_port()
    env = workspaces_environment(redis_url, fake_slack, fake_model.url, fake_web.url, port)
    redis = Redis.from_url(redis_url)
    with running(["serve"], env, tmp_path / "serve.log") as serve:
        base = wait_listening(port, serve, tmp_path / "serve.log")
        cookie, back = begin_install(base, ALPHA)  # a person begins an install before the flood

        # One client, 200 visits: a person's few, then 429 with when to come back.
        with ThreadPoolExecutor(8) as pool:
            answers = [a for batch in pool.map(lambda _: visit(base, "127.0.0.2", 25), range(8)) for a in batch]
        assert sum(a.status_code == 200 for a in answers) == VISITS_PER_CLIENT, [a.status_code for a in answers]
        refused = [a for a in answers if a.status_code == 429]
        assert len(refused) == 200 - VISITS_PER_CLIENT
        assert all(0 < int(a.headers["Retry-After"]) <= 60 and "opened too often" in a.text for a in refused)

        # Many clients: the flows in progress stop at the cap, in one key that expires by itself.
        clients = MAX_PENDING_STATES // VISITS_PER_CLIENT + 20
        addresses = [f"127.0.{1 + n // 250}.{1 + n % 250}" for n in range(3, 3 + clients)]
        with ThreadPoolExecutor(8) as pool:
            flood = [a for batch in pool.map(lambda a: visit(base, a, VISITS_PER_CLIENT), addresses) for a in batch]
        busy = [a for a in flood if a.status_code == 429]
        assert busy and all("Too many installs" in a.text and int(a.headers["Retry-After"]) == STATE_SECONDS
                            for a in busy), {a.status_code for a in flood}
        assert oauth_keys(redis) == [keys.OAUTH_STATES.encode()], "one key, whatever the traffic"
        assert redis.zcard(keys.OAUTH_STATES) == MAX_PENDING_STATES
        assert 0 < redis.ttl(keys.OAUTH_STATES) <= STATE_SECONDS + 1

        done = httpx.get(back, headers={"Cookie": cookie}, timeout=10)
        assert done.status_code == 200, "the install begun before the flood completes"
        assert redis.smembers("deepthread:installations") == {f"deepthread:installation:-:{ALPHA}".encode()}
    log = (tmp_path / "serve.log").read_text()
    assert log.count("install flows are in progress") == 1, "the refusals are logged once, not per visit"
