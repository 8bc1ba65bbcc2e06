"""Records written before keys had a team (a single-workspace deployment, upgraded) are found by
their own workspace and moved under its team the first time, and by no other workspace."""
from __future__ import annotations

from redis import Redis

from jobs import Run, Runs, RunStore, keys
from jobs.records.models import utcnow
from jobs.upkeep.recheck import Rechecks, Schedule

TEAM, OTHER = "T0TEST", "T0OTHER"


def legacy_thread(redis: Redis) -> tuple[Runs, str]:
    """A run in thread C1/9.0 with its messages, linked as the version without teams linked them."""
    runs = Runs(RunStore(redis))
    state = runs.start(Run(team=TEAM, question="q", channel="C1", thread_ts="9.0"))
    runs.attach_messages(state.run.id, progress="9.1", report="9.2")
    for new, old in ((keys.thread_runs(TEAM, "C1", "9.0"), keys.legacy_thread_runs("C1", "9.0")),
                     (keys.message_run(TEAM, "C1", "9.2"), keys.legacy_message_run("C1", "9.2")),
                     (keys.message_run(TEAM, "C1", "9.1"), keys.legacy_message_run("C1", "9.1"))):
        redis.rename(new, old)
    return runs, state.run.id


def test_an_old_thread_and_its_messages_are_found_by_their_workspace_and_moved_under_it(redis: Redis) -> None:
    runs, run_id = legacy_thread(redis)
    assert runs.latest_in_thread(OTHER, "C1", "9.0") is None, "another workspace finds nothing"
    assert runs.run_of_message(OTHER, "C1", "9.2") is None
    assert redis.exists(keys.legacy_thread_runs("C1", "9.0")), "and moves nothing"
    latest = runs.latest_in_thread(TEAM, "C1", "9.0")
    assert latest is not None and latest.run.id == run_id
    found = runs.run_of_message(TEAM, "C1", "9.2")
    assert found is not None and found.run.id == run_id
    assert not redis.exists(keys.legacy_thread_runs("C1", "9.0"), keys.legacy_message_run("C1", "9.2"))
    assert redis.lrange(keys.thread_runs(TEAM, "C1", "9.0"), 0, -1) == [run_id.encode()]
    assert runs.in_thread(TEAM, "C1", "9.0") and not runs.in_thread(OTHER, "C1", "9.0")


def test_a_record_written_under_the_new_name_meanwhile_wins_over_the_old_one(redis: Redis) -> None:
    runs, run_id = legacy_thread(redis)
    newer = runs.start(Run(team=TEAM, question="q2", channel="C1", thread_ts="9.0"))
    assert runs.latest_in_thread(TEAM, "C1", "9.0").run.id == newer.run.id  # type: ignore[union-attr]
    assert redis.exists(keys.legacy_thread_runs("C1", "9.0")), "the old list is left, not merged over the new"


def test_an_old_recheck_schedule_is_its_workspaces_and_moves_under_its_team_when_saved(redis: Redis) -> None:
    schedule = Schedule(channel="C1", thread_ts="9.0", team=TEAM, delay_seconds=60, next_at=utcnow(), token="t",
                        set_at=utcnow())
    redis.set(keys.legacy_recheck_schedule("C1", "9.0"), schedule.model_dump_json())
    rechecks = Rechecks(redis)
    assert rechecks.get(OTHER, "C1", "9.0") is None
    assert rechecks.get(TEAM, "C1", "9.0") == schedule
    assert rechecks.get(None, "C1", "9.0") == schedule, "a job planned before teams finds it by its own team"
    rechecks.cancel(TEAM, "C1", "9.0")
    assert not redis.exists(keys.legacy_recheck_schedule("C1", "9.0"), keys.recheck_schedule(TEAM, "C1", "9.0"))


def test_an_event_claimed_by_the_version_without_teams_is_not_handled_twice(redis: Redis) -> None:
    store = RunStore(redis)
    redis.set(keys.dedupe("event:Ev1"), "1", ex=60)
    assert not store.claim_event(TEAM, "event:Ev1", 60)
    assert store.claim_event(TEAM, "event:Ev2", 60) and not store.claim_event(TEAM, "event:Ev2", 60)
    assert store.claim_event(OTHER, "event:Ev2", 60), "each workspace's events are its own"
