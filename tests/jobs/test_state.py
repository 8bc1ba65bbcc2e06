"""Run state has one owner: versioned writes, a lifecycle that only moves forward, and
incremental storage (a new source writes that source, not the run). Real redis-server."""
from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis import Redis

from agent import (
    Finished,
    Progress,
    SectionRevised,
    SectionWritten,
    Source,
    SourceAdded,
    UsageRecorded,
)
from agent.events import Disagreement
from jobs import Run, Runs, RunState, RunStatus, RunStore, keys
from jobs.records.state import apply_event

_ids = itertools.count()


def source(n: int) -> Source:
    return Source(marker=f"s{n}", url=f"https://example.com/{n}", title=f"Page {n}", passage=f"Passage {n} " * 20)


def new_run(store: RunStore, **fields: object) -> RunState:
    return store.create(Run(question="fees of VTI?", channel="C1", thread_ts=f"{next(_ids)}.0", **fields))


def test_a_stale_worker_copy_cannot_undo_a_forced_stop(redis: Redis) -> None:
    worker, bot = RunStore(redis), Runs(RunStore(redis))
    copy = worker.get(new_run(worker).run.id)
    copy = worker.apply(copy, Progress(phase="researching", activity="Reading vanguard.com"))
    copy = worker.apply(copy, SectionWritten(section_id="sec1", title="Fees", body="VTI 0.03%"))

    stopped = bot.force_stop(copy.run.id, "stopped by <@U0ANA> (forced after 90 s)")
    late = worker.apply(copy, SectionWritten(section_id="sec2", title="Late", body="written after the stop"))
    late = worker.apply(late, Finished(status="completed", summary="All done.", reason=""))

    final = worker.get(copy.run.id)
    assert final.status == RunStatus.stopped and final.reason == "stopped by <@U0ANA> (forced after 90 s)"
    assert [s.title for s in final.sections] == ["Fees"], "sections written before the stop are kept, later ones refused"
    assert final.version == stopped.version, "no write landed after the stop"
    assert late == final, "the late writer is handed the stopped run"
    assert copy.run.id not in worker.active_ids()


def test_a_writer_whose_copy_went_stale_reloads_and_loses_nothing(redis: Redis) -> None:
    one, two = RunStore(redis), RunStore(redis)
    run_id = new_run(one).run.id
    a, b = one.get(run_id), two.get(run_id)
    for n in range(1, 11):  # each write makes the other writer's copy stale
        a = one.apply(a, SourceAdded(source=source(2 * n)))
        b = two.apply(b, SourceAdded(source=source(2 * n + 1)))
    final = one.get(run_id)
    assert sorted(final.sources) == sorted(f"s{n}" for n in range(2, 22))
    assert final.version == 20 and b == final


def test_the_progress_status_never_moves_a_finished_run_back(redis: Redis) -> None:
    store = RunStore(redis)
    state = new_run(store)
    failed = store.mark_failed(state.run.id, "could not post in this channel (not_in_channel)")
    assert store.apply(state, Progress(phase="researching", activity="Searching")).status == RunStatus.failed
    assert store.finish(state.run.id, RunStatus.stopped, "stopped").reason == failed.reason, "the first ending stays"
    assert store.get(state.run.id) == failed


def test_messages_attach_and_find_their_run(redis: Redis) -> None:
    runs = Runs(RunStore(redis))
    state = runs.start(Run(question="q", channel="C1", thread_ts="9.0"))
    attached = runs.attach_messages(state.run.id, progress="9.1", report="9.2")
    assert (attached.run.progress_message, attached.run.report_message) == ("9.1", "9.2")
    assert runs.run_of_message(None, "C1", "9.2") == attached == runs.latest_in_thread(None, "C1", "9.0")
    assert runs.run_of_message(None, "C1", "9.3") is None


def test_a_new_source_writes_that_source_not_the_whole_run(redis: Redis) -> None:
    store = RunStore(redis)
    state = store.get(new_run(store).run.id)

    def bytes_written(event: SourceAdded) -> int:
        nonlocal state
        before = int(redis.info("stats")["total_net_input_bytes"])
        state = store.apply(state, event)
        return int(redis.info("stats")["total_net_input_bytes"]) - before

    early = bytes_written(SourceAdded(source=source(1)))
    for n in range(2, 1000):
        state = store.apply(state, SourceAdded(source=source(n)))
    late = bytes_written(SourceAdded(source=source(1000)))
    whole = len(state.model_dump_json())
    assert late <= early * 1.1, f"the 1,000th source wrote {late} bytes, the first {early}"
    assert late * 50 < whole, "far less than the run itself"


def test_a_run_stored_whole_by_an_earlier_version_is_read_and_continues(redis: Redis) -> None:
    legacy = RunState(run=Run(question="q", channel="C1", thread_ts="1.0", report_message="1.2"), version=7,
                      status=RunStatus.running, sections=[], sources={"s1": source(1)})
    redis.set(keys.run(legacy.run.id), legacy.model_dump_json())
    store = RunStore(redis)
    assert store.get(legacy.run.id) == legacy
    after = store.apply(store.get(legacy.run.id), SourceAdded(source=source(2)))
    assert list(store.get(legacy.run.id).sources) == ["s1", "s2"] and after.version == 8
    assert not redis.exists(keys.run(legacy.run.id)), "moved to the incremental layout once"


# --- generated: any sequence of events and outside endings -------------------------------

texts = st.text(alphabet="abc xyz01", min_size=0, max_size=12)
section_ids = st.sampled_from(["sec1", "sec2", "sec3"])
events = st.one_of(
    st.builds(Progress, phase=st.sampled_from(["researching", "writing"]), activity=texts),
    st.builds(Disagreement, text=texts),
    st.builds(lambda n: SourceAdded(source=source(n)), st.integers(1, 6)),
    st.builds(SectionWritten, section_id=section_ids, title=texts, body=texts),
    st.builds(SectionRevised, section_id=section_ids, body=texts, reason=texts),
    st.builds(UsageRecorded, requests=st.integers(0, 50), input_tokens=st.integers(0, 9), output_tokens=st.just(1),
              profile=st.just("standard"), requests_left=st.integers(0, 9), minutes_left=st.just(3.5)),
    st.builds(Finished, status=st.sampled_from(["completed", "failed", "stopped"]), summary=texts, reason=texts,
              context_summaries=st.lists(texts, max_size=2)),
)
RANK = {RunStatus.queued: 0, RunStatus.planned: 1, RunStatus.running: 2, RunStatus.completed: 3,
        RunStatus.failed: 3, RunStatus.stopped: 3}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(stream=st.lists(events, max_size=25))
def test_stored_state_is_the_events_applied_in_order(redis: Redis, stream: list) -> None:
    store = RunStore(redis)
    copy = new_run(store)
    expected = copy.model_copy(deep=True)
    for event in stream:
        if not expected.status.finished:
            expected = apply_event(expected, event)
        copy = store.apply(copy, event)
    stored = store.get(copy.run.id)
    assert stored == copy, "what the store assembles is exactly the writer's state"
    volatile = {"updated_at", "report_updated_at", "finished_at"}
    assert stored.model_dump(exclude=volatile) == expected.model_dump(exclude=volatile), \
        "the same as applying the events in memory, up to the first ending"


@SETTINGS
@given(steps=st.lists(st.one_of(events, st.sampled_from(["force_stop", "fail", "messages"])), max_size=25))
def test_lifecycle_only_moves_forward_whoever_writes(redis: Redis, steps: list) -> None:
    worker, bot = RunStore(redis), Runs(RunStore(redis))
    copy = new_run(worker)
    seen = [worker.get(copy.run.id)]
    for step in steps:
        if step == "force_stop":
            bot.force_stop(copy.run.id, "stopped by <@U0ANA>")
        elif step == "fail":
            bot.fail(copy.run.id, "internal error")
        elif step == "messages":
            bot.attach_messages(copy.run.id, progress="1.1", report="1.2")
        else:
            copy = worker.apply(copy, step)
        seen.append(worker.get(copy.run.id))
    for before, after in itertools.pairwise(seen):
        assert RANK[after.status] >= RANK[before.status], f"{before.status} -> {after.status}"
        assert after.version >= before.version
        if before.status.finished:
            content = {"status", "reason", "summary", "sections", "sources", "usage", "phase", "finished_at"}
            assert after.model_dump(include=content) == before.model_dump(include=content), "an ending is final"


def test_a_run_stored_before_the_rename_keeps_its_follow_up() -> None:
    """Run.request became Run.follow_up (ResearchTask's name): records written before still load."""
    old = Run(question="fees of VTI?").model_dump(mode="json")
    old.pop("follow_up")
    old["request"] = "Now add ITOT"
    assert Run.model_validate(old).follow_up == "Now add ITOT"
    assert Run.model_validate_json(Run(question="q", follow_up="and SCHB").model_dump_json()).follow_up == "and SCHB"


def test_an_unreadable_file_is_noted_once_and_survives_the_store(redis) -> None:
    """FileUnreadable lands in run state once per file, and reads back from Redis as it was written."""
    from agent.events import FileUnreadable
    from jobs import Run, RunStore

    store = RunStore(redis)
    state = store.create(Run(channel="C1", thread_ts="1.0", question="what did the board decide?"))
    event = FileUnreadable(file_id="F1", name="minutes.docx", notice="I can't open minutes.docx: share it again.")
    for _ in range(3):
        state = store.apply(state, event)
    state = store.apply(state, FileUnreadable(file_id="F2", name="b.pdf", notice="I can't open b.pdf: too large."))
    assert [n.file_id for n in state.file_notices] == ["F1", "F2"]
    assert store.get(state.run.id).file_notices == state.file_notices
