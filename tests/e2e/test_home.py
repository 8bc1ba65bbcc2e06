"""The Home tab end to end (real serve in Socket Mode, a worker, real Redis, the fake Slack keeping each
person's published view): opening it publishes a view for that person only, with their runs (a running
one with a stop button that stops it), their spend and budgets, a library search box that answers with
the reports they can see, and the help; an admin also sees the workspace's month."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from bot.desk.home import HOME_SEARCH_ACTION, HOME_STOP_ACTION
from jobs import Run, RunStore, keys
from jobs.records.library import Library
from tests.e2e.stack import deliver, interact, socket_mode_stack
from tests.fakes.slack import TEAM_ID, FakeSlack, app_mention_event
from tests.fakes.slack_views import app_home_opened_event, home_action, home_of, views_published
from tests.processes import Stack, wait_for

PUBLIC, SECRET = "C0PUBLIC", "G0SECRET"
ANA, BEN, ADMIN = "U0ANA", "U0BEN", "U0ADMIN"


@pytest.fixture
def stack(tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> Iterator[Stack]:
    fake_slack.add_user(ANA, name="ana")
    fake_slack.add_user(BEN, name="ben")
    fake_slack.add_user(ADMIN, name="alex", admin=True)
    fake_slack.add_conversation(PUBLIC, name="research", members=[ANA, BEN, ADMIN, "UBOT"])
    fake_slack.add_conversation(SECRET, name="deals", members=[ANA, "UBOT"])
    with socket_mode_stack(tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url,
                           web_url=fake_web.url) as s:
        yield s


def _texts(node) -> list[str]:  # noqa: ANN001 - a view's JSON
    if isinstance(node, list):
        return [t for item in node for t in _texts(item)]
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "text" and isinstance(v, str)] + [
            t for k, v in node.items() if k != "text" or not isinstance(v, str) for t in _texts(v)]
    return []


def _tab(slack: FakeSlack, user: str, after: int = 0) -> dict:
    """The view published for `user` once it is the `after`+1-th."""
    wait_for(lambda: sum(1 for key in views_published(slack) if key == (TEAM_ID, user)) > after, 15, "the Home tab")
    view = home_of(slack, user)
    assert view is not None
    return view


def _finished(slack: FakeSlack, redis: Redis, channel: str, question: str, user: str) -> str:
    ts = deliver(slack, app_mention_event(f"<@UBOT> {question}", channel=channel, user=user))
    store = RunStore(redis)
    run_id = wait_for(lambda: (ids := store.thread_run_ids(TEAM_ID, channel, ts)) and ids[-1], 15, "the run")
    wait_for(lambda: Library(redis).shelved_version(run_id) is not None, 60, "the report shelved")
    return run_id


def test_the_home_tab_is_published_for_the_viewer_only_with_their_runs_spend_and_a_library_search(
        stack: Stack, fake_slack: FakeSlack, redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    _finished(fake_slack, redis, PUBLIC, "expense ratio SCHB research", ANA)
    _finished(fake_slack, redis, SECRET, "expense ratio VTI deals", ANA)
    _finished(fake_slack, redis, PUBLIC, "tracking error ITOT", BEN)
    # A run of Ana's still queued (no job for it): shown with a stop button.
    waiting = RunStore(redis).create(Run(team=TEAM_ID, channel=PUBLIC, thread_ts="1700000000.000900",
                                         requester=ANA, question="ocean heat content trend"))

    deliver(fake_slack, app_home_opened_event(ANA))
    view = _tab(fake_slack, ANA)
    shown = "\n".join(_texts(view["blocks"]))
    assert views_published(fake_slack) == [(TEAM_ID, ANA)], "published for the viewer only"
    assert "expense ratio SCHB research" in shown and "expense ratio VTI deals" in shown, "her finished runs"
    assert "ocean heat content trend" in shown and "tracking error ITOT" not in shown, "hers, running too; not Ben's"
    stops = [b["accessory"] for b in view["blocks"] if (b.get("accessory") or {}).get("action_id") == HOME_STOP_ACTION]
    assert [s["value"] for s in stops] == [waiting.run.id], "a stop button for the running one only"
    assert "Your spend in" in shown and "across 2 runs" in shown
    assert "The workspace in" not in shown, "the workspace's totals are an admin's"
    inputs = [b for b in view["blocks"] if b["type"] == "input"]
    assert inputs and inputs[0]["dispatch_action"] is True
    assert inputs[0]["element"]["type"] == "plain_text_input" and inputs[0]["element"]["action_id"] == HOME_SEARCH_ACTION
    assert "How to ask" in shown

    # Ana stops her run from the tab: the stop is recorded and her tab published again.
    interact(fake_slack, home_action(HOME_STOP_ACTION, user=ANA, view=view, value=waiting.run.id))
    wait_for(lambda: redis.exists(keys.stop(waiting.run.id)), 10, "the stop recorded")
    _tab(fake_slack, ANA, after=1)

    # Ben searches the library from his tab: the public report, not the private channel's.
    deliver(fake_slack, app_home_opened_event(BEN))
    bens = _tab(fake_slack, BEN)
    interact(fake_slack, home_action(HOME_SEARCH_ACTION, user=BEN, view=bens, value="expense ratio",
                                     kind="plain_text_input"))
    found = "\n".join(_texts(_tab(fake_slack, BEN, after=1)["blocks"]))
    assert "expense ratio SCHB research" in found and "VTI deals" not in found
    assert "tracking error ITOT" in found, "his own run on his tab"

    # An admin sees the workspace's month.
    deliver(fake_slack, app_home_opened_event(ADMIN))
    admins = "\n".join(_texts(_tab(fake_slack, ADMIN)["blocks"]))
    assert "The workspace in" in admins and "across 3 runs" in admins and "3 reports in the library" in admins


def test_the_messages_tab_opening_publishes_nothing(stack: Stack, fake_slack: FakeSlack) -> None:
    deliver(fake_slack, app_home_opened_event(ANA, tab="messages"))
    deliver(fake_slack, app_home_opened_event(BEN))
    _tab(fake_slack, BEN)
    assert views_published(fake_slack) == [(TEAM_ID, BEN)]
