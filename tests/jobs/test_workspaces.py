"""Runs belong to their workspace: an uninstall stops that workspace's runs (or an org's, for an
org-wide install) and no other, and a message or thread of one workspace never hands out
another's run, whatever a link in Redis says."""
from __future__ import annotations

from pydantic import SecretStr
from redis import Redis

from jobs import Run, Runs, RunStatus, RunStore, keys


def start(runs: Runs, team: str, *, enterprise: str | None = None, thread: str = "1.0") -> str:
    state = runs.start(Run(team=team, enterprise=enterprise, question="q", channel=f"C{team}", thread_ts=thread))
    return state.run.id


def test_an_uninstall_stops_the_workspaces_active_runs_and_no_other(redis: Redis) -> None:
    runs = Runs(RunStore(redis))
    mine, other = start(runs, "T1"), start(runs, "T2")
    done = start(runs, "T1", thread="2.0")
    runs.store.finish(done, RunStatus.completed, "")
    assert runs.stop_workspace("T1", "the app was uninstalled from this workspace") == [mine]
    stopped = runs.get(mine)
    assert stopped.status == RunStatus.stopped and stopped.reason == "the app was uninstalled from this workspace"
    assert runs.get(other).status == RunStatus.queued, "another workspace's run goes on"
    assert runs.get(done).status == RunStatus.completed, "an ended run keeps its ending"
    assert redis.zscore(keys.UNPOSTED, mine) is None, "nothing is left to post for it"


def test_an_uninstall_deletes_its_runs_action_tokens_and_no_others(redis: Redis, sealing_key: str) -> None:
    runs = Runs(RunStore(redis))
    mine, other = (
        runs.start(Run(team=team, question="q", channel=f"C{team}", thread_ts="1.0",
                       action_token=SecretStr(f"xoxe-action-{team}"))).run.id
        for team in ("T1", "T2")
    )
    assert redis.exists(keys.action_token(mine)) and redis.exists(keys.action_token(other))
    runs.stop_workspace("T1", "the app was uninstalled from this workspace")
    assert not redis.exists(keys.action_token(mine)), "the uninstalled workspace's search permission is gone"
    assert runs.get(mine).run.action_token is None
    assert runs.get(other).run.action_token == SecretStr("xoxe-action-T2")


def test_an_org_wide_uninstall_stops_every_workspace_of_the_org(redis: Redis) -> None:
    runs = Runs(RunStore(redis))
    a, b, outside = start(runs, "T1", enterprise="E1"), start(runs, "T2", enterprise="E1"), start(runs, "T3")
    assert sorted(runs.stop_workspace("T1", "removed from the org", enterprise="E1")) == sorted([a, b])
    assert runs.get(outside).status == RunStatus.queued


def test_a_link_to_another_workspaces_run_hands_out_nothing(redis: Redis) -> None:
    runs = Runs(RunStore(redis))
    theirs = start(runs, "T2")
    runs.attach_messages(theirs, progress="1.1", report="1.2")
    redis.set(keys.message_run("T1", "CT2", "1.2"), theirs)  # however it got there
    assert runs.run_of_message("T1", "CT2", "1.2") is None
    assert runs.run_of_message("T2", "CT2", "1.2").run.id == theirs  # type: ignore[union-attr]
    assert runs.latest_in_thread("T1", "CT2", "1.0") is None
