"""Fault: `deepthread up` restarts. Its embedded Redis keeps its data in a data directory with
an append-only file, so every run survives and a reply in an old thread still continues it."""
from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from redis import Redis

from bot.cli.local_redis import DataDirInUse, LocalRedis
from bot.settings import DATA_DIR_VARIABLE, default_data_dir
from tests.e2e.stack import CHANNEL, block_text, bot_replies, post_event
from tests.fakes.policies import is_extraction
from tests.fakes.server import free_port
from tests.fakes.slack import FakeSlack, app_mention_event, message_event
from tests.processes import SIGNING_SECRET, Stack, environment, running, wait_for, wait_listening


def test_the_data_directory_is_ours_then_xdg_then_the_home_default() -> None:
    assert default_data_dir({DATA_DIR_VARIABLE: "/srv/dt", "XDG_DATA_HOME": "/x"}) == Path("/srv/dt")
    assert default_data_dir({"XDG_DATA_HOME": "/x"}) == Path("/x/deepthread")
    assert default_data_dir({}) == Path.home() / ".local" / "share" / "deepthread"


def test_data_written_before_a_stop_is_there_after_a_start(tmp_path: Path) -> None:
    with LocalRedis(data_dir=tmp_path) as first:
        Redis.from_url(first.url).set("deepthread:run:abc", "kept")
    assert list((tmp_path / "redis").glob("appendonlydir/*.aof")), "an append-only file in the data directory"
    with LocalRedis(data_dir=tmp_path) as second:
        assert Redis.from_url(second.url).get("deepthread:run:abc") == b"kept"


def test_a_second_server_on_the_same_data_directory_is_refused_with_advice(tmp_path: Path) -> None:
    with LocalRedis(data_dir=tmp_path), pytest.raises(
            DataDirInUse, match=f"another `deepthread up` is using .* {DATA_DIR_VARIABLE}"):
        LocalRedis(data_dir=tmp_path).start()
    with LocalRedis(data_dir=tmp_path):  # free again once the first one stopped
        pass


def test_without_a_data_directory_nothing_is_kept(tmp_path: Path) -> None:
    with LocalRedis() as throwaway:
        Redis.from_url(throwaway.url).set("k", "v")
    with LocalRedis() as fresh:
        assert Redis.from_url(fresh.url).get("k") is None


@contextmanager
def up(env: dict[str, str], log: Path, port: int) -> Iterator[Stack]:
    with running(["up"], env, log, grace=40) as process:
        base = wait_listening(port, process, log, command="up")
        yield Stack(events_url=f"{base}/slack/events", env=env, logs=log.parent)




def test_a_reply_in_an_old_thread_continues_it_after_up_restarts(tmp_path: Path, fake_slack: FakeSlack, fake_model,
                                                                 fake_web) -> None:
    port = free_port()
    env = environment(
        SLACK_BOT_TOKEN="xoxb-test", SLACK_SIGNING_SECRET=SIGNING_SECRET, SLACK_API_URL=f"{fake_slack.url}/api/",
        ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=fake_model.url, DEEPTHREAD_SEARCH="searxng",
        SEARXNG_URL=fake_web.url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1", PORT=str(port),
        **{DATA_DIR_VARIABLE: str(tmp_path / "data")},
    )  # no REDIS_URL: the embedded default
    envelope = app_mention_event("expense ratio VTI SCHB ITOT", channel=CHANNEL)
    thread = fake_slack.seed_event(envelope)
    with up(env, tmp_path / "up-1.log", port) as stack:
        assert post_event(stack, envelope).status_code == 200
        replies = wait_for(lambda: len(bot_replies(fake_slack, thread)) >= 2 and bot_replies(fake_slack, thread),
                           20, "progress and report")
        report_ts = replies[1].ts
        wait_for(lambda: "Final" in block_text(fake_slack.message(CHANNEL, report_ts)), 60, "the first run's report")
    first_requests = len(fake_model.requests)

    with up(env, tmp_path / "up-2.log", port) as stack:
        reply = message_event("Now add ITOT's tracking difference", channel=CHANNEL, thread_ts=thread)
        fake_slack.seed_event(reply)
        assert post_event(stack, reply).status_code == 200
        turns = wait_for(lambda: [r for r in fake_model.requests[first_requests:] if not is_extraction(r)], 30,
                         "the continuation's first turn")  # after the small model's constraints pass
        opening = json.dumps(turns[0]["messages"][0])
        assert "expense ratio VTI SCHB ITOT" in opening and "tracking difference" in opening, \
            "the continuation carries the old run's question and the new request"
        wait_for(lambda: len([m for m in bot_replies(fake_slack, thread) if "Done" in block_text(m)]) == 2, 60,
                 "the continuation to finish")
        assert [p.ts for p in fake_slack.pins(CHANNEL)] == [report_ts], "it edits the same pinned report"
    assert "data in" in (tmp_path / "up-2.log").read_text(), "up says where its data lives"
