"""Races on run state, with a real redis-server and writers in concurrent threads (each with
its own connection, as serve and the worker have): replies racing to continue a thread, and
a stop racing the worker's last writes."""
from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from redis import Redis
from rq import Queue

from agent import Finished, Progress, SectionWritten, UsageRecorded
from agent.control import Note
from jobs import Run, Runs, RunState, RunStatus, RunStore, keys
from tests.fakes.slack_records import TEAM_ID

T = TypeVar("T")
TRIALS = 25
_threads = itertools.count()


def together(*calls: Callable[[], T]) -> list[T]:
    """Run the calls in threads released at the same instant."""
    barrier = threading.Barrier(len(calls))

    def go(call: Callable[[], T]) -> T:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return [f.result() for f in [pool.submit(go, call) for call in calls]]


def ended_run(runs: Runs) -> RunState:
    thread = f"{next(_threads)}.0"
    state = runs.start(Run(question="fees of VTI?", channel="C1", thread_ts=thread, requester="U0ANA"))
    runs.attach_messages(state.run.id, progress=f"{thread}1", report=f"{thread}2")
    return runs.store.apply(runs.get(state.run.id), Finished(status="completed", summary="0.03%", reason=""))


def two_replies_at_once(redis_url: str, trial: int) -> None:
    first, second = Runs(RunStore(Redis.from_url(redis_url))), Runs(RunStore(Redis.from_url(redis_url)))
    parent = ended_run(first)
    outcomes = together(
        lambda: first.continue_from(parent, "Now add ITOT", requester="U0ANA", author="<@U0ANA>",
                                    event_id=f"Ev{trial}a"),
        lambda: second.continue_from(parent, "and SCHB too", requester="U0BEN", author="<@U0BEN>",
                                     event_id=f"Ev{trial}b"),
    )
    started = [o for o in outcomes if o is not None and o.started]
    noted = [o for o in outcomes if o is not None and not o.started]
    assert len(started) == 1 and len(noted) == 1, f"trial {trial}: exactly one continuation"
    child = started[0].state
    assert noted[0].state.run.id == child.run.id, "the second reply joined the run that started"
    assert first.store.thread_run_ids(None, "C1", parent.run.thread_ts or "") == [parent.run.id, child.run.id]
    raw_notes = Redis.from_url(redis_url).lrange(keys.notes(child.run.id), 0, -1)
    loser_text = "and SCHB too" if child.run.follow_up == "Now add ITOT" else "Now add ITOT"
    assert [Note.model_validate_json(raw).text for raw in raw_notes] == [loser_text], \
        "the second reply reaches the continuation as a note"
    assert first.get(child.run.id).sections == parent.sections


def test_two_replies_after_the_end_start_one_continuation_and_the_second_becomes_its_note(redis_url: str) -> None:
    for trial in range(TRIALS):
        two_replies_at_once(redis_url, trial)


def test_a_repeated_delivery_of_a_reply_continues_nothing(redis: Redis) -> None:
    runs = Runs(RunStore(redis))
    parent = ended_run(runs)
    assert runs.continue_from(parent, "more", requester="U0ANA", author="<@U0ANA>", event_id="Ev1").started
    assert runs.continue_from(parent, "more", requester="U0ANA", author="<@U0ANA>", event_id="Ev1") is None


LAST_WRITES = [
    Progress(phase="writing", activity="Writing the summary"),
    SectionWritten(section_id="sec2", title="Tracking", body="ITOT 0.05%"),
    UsageRecorded(requests=12, input_tokens=100, output_tokens=10),
    Finished(status="completed", summary="All three cost 0.03%.", reason=""),
]


def stop_during_last_writes(redis_url: str, stop_before: int | None) -> RunStatus:
    """The worker applies its last writes while the bot forces a stop: before write
    `stop_before`, or (None) released at the same instant. Returns how the run ended."""
    worker, bot = RunStore(Redis.from_url(redis_url)), Runs(RunStore(Redis.from_url(redis_url)))
    run_id = bot.start(Run(question="fees?", channel="C1", thread_ts=f"{next(_threads)}.0")).run.id
    first = worker.apply(worker.get(run_id), SectionWritten(section_id="sec1", title="Fees", body="0.03%"))
    stopped: list[RunState] = []

    def stop() -> RunState:
        stopped.append(bot.force_stop(run_id, "stopped by <@U0ANA> (forced after 90 s)"))
        return stopped[-1]

    def work() -> RunState:
        copy = first
        for n, event in enumerate(LAST_WRITES):
            if n == stop_before:
                stop()
            copy = worker.apply(copy, event)
        return copy

    worker_end = work() if stop_before is not None else together(work, stop)[0]
    final = worker.get(run_id)
    assert final == worker_end, "the worker ends up holding exactly what is stored"
    if stopped[0].status == RunStatus.stopped:  # the stop landed before the worker finished
        assert final.status == RunStatus.stopped and final.reason.startswith("stopped by <@U0ANA>")
        assert final.version == stopped[0].version, "nothing the worker wrote after the stop landed"
    else:
        assert final.status == RunStatus.completed and final.summary == "All three cost 0.03%.", \
            "the run had completed: a late stop changes nothing"
    assert final.section("sec1") is not None, "the sections written before the stop are kept"
    assert run_id not in worker.active_ids()
    return final.status


def test_a_stop_racing_the_workers_last_writes_leaves_the_run_stopped(redis_url: str) -> None:
    for stop_before in range(len(LAST_WRITES)):
        assert stop_during_last_writes(redis_url, stop_before) == RunStatus.stopped
    for _ in range(TRIALS):
        stop_during_last_writes(redis_url, None)


async def _two_replies_through_the_listener(redis: Redis, slack_url: str, fake_slack) -> None:
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.services import Services
    from bot.slack.tenancy import Tenant
    from bot.surface.steering import thread_message
    from tests.fakes.slack import message_event

    services = Services(redis=redis, store=RunStore(redis))
    client = AsyncWebClient(token="xoxb-test-token", base_url=f"{slack_url}/api/")
    parent = ended_run(services.runs.sync)
    channel, thread = parent.run.channel or "", parent.run.thread_ts or ""
    replies = [message_event(text, channel=channel, thread_ts=thread, user=user)
               for user, text in (("U0ANA", "Now add ITOT"), ("U0BEN", "and SCHB too"))]
    stamps = [fake_slack.seed_event(reply) for reply in replies]
    await asyncio.gather(*[
        thread_message(services, client, tenant=Tenant(team=None), channel=channel, thread_ts=thread, ts=ts, user=reply["event"]["user"],
                       text=reply["event"]["text"], event_id=reply["event_id"])
        for reply, ts in zip(replies, stamps, strict=True)])

    thread_runs = services.store.thread_run_ids(None, channel, thread)
    assert len(thread_runs) == 2, "one continuation"
    child = services.store.get(thread_runs[-1])
    assert Queue(keys.QUEUE, connection=redis).job_ids == [keys.job_id(child.run.id)], "one job queued"
    assert child.run.progress_message and child.run.report_message == parent.run.report_message
    noted = stamps[0] if child.run.follow_up == "and SCHB too" else stamps[1]
    assert "memo" in fake_slack.message(channel, noted).reactions, "the other reply is acknowledged as a note"


def test_two_replies_through_the_listener_start_one_continuation(redis: Redis, fake_slack) -> None:
    """The bot's own handler, twice at once on one event loop (its Redis calls in threads)."""
    asyncio.run(_two_replies_through_the_listener(redis, fake_slack.url, fake_slack))


def test_two_replies_racing_in_slack_start_one_continuation_that_hears_both(tmp_path, redis_url: str, fake_slack,
                                                                          fake_model, fake_web) -> None:
    """The same race through real `deepthread serve` and worker processes and Slack events."""
    from tests.e2e.stack import CHANNEL, block_text, bot_replies, main_requests, post_event, start
    from tests.e2e.stack import report_text as report
    from tests.fakes.policies import SteadyPolicy
    from tests.fakes.slack import message_event
    from tests.processes import deepthread_stack, wait_for

    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url) as stack:
        fake_model.policy = SteadyPolicy(turns=3)
        thread, _, report_ts = start(stack, fake_slack)
        wait_for(lambda: "Final" in report(fake_slack, report_ts), 40, "the first run to end")
        first_run_requests = len(main_requests(fake_model))
        fake_model.delay = 0.2
        fake_model.policy = SteadyPolicy(turns=4)
        texts = {"U0ANA": "Now add ITOT's tracking difference", "U0BEN": "Also SCHB's, please"}
        replies = [message_event(text, channel=CHANNEL, thread_ts=thread, user=user) for user, text in texts.items()]
        reply_ts = [fake_slack.seed_event(reply) for reply in replies]
        assert together(*[lambda r=reply: post_event(stack, r).status_code for reply in replies]) == [200, 200]

        wait_for(lambda: len([m for m in bot_replies(fake_slack, thread) if "Done" in block_text(m)]) == 2, 40,
                 "the continuation to finish")
        runs = RunStore(Redis.from_url(redis_url)).thread_run_ids(TEAM_ID, CHANNEL, thread)
        assert len(runs) == 2, "one continuation, not two"
        later = [json.dumps(r["messages"]) for r in main_requests(fake_model)[first_run_requests:]]
        winner = next(text for text in texts.values() if f"<follow_up>\\n{text}\\n</follow_up>" in later[0])
        loser_user, loser = next((user, text) for user, text in texts.items() if text != winner)
        assert any(loser in request for request in later), "the second reply reached the continuation as a note"
        assert not any(f"<follow_up>\\n{loser}" in request for request in later)
        noted = reply_ts[list(texts).index(loser_user)]
        assert "memo" in fake_slack.message(CHANNEL, noted).reactions, "the second reply is acknowledged as noted"
        assert [p.ts for p in fake_slack.pins(CHANNEL)] == [report_ts]


def test_a_worker_still_writing_after_a_forced_stop_cannot_undo_it(tmp_path, redis_url: str, fake_slack, fake_model,
                                                                   fake_web) -> None:
    """Real serve and worker processes: the stop is recorded while the job runs on (not killed),
    so every write the worker makes afterwards races the stop, and loses; the first it loses stops
    the job (nothing it still asked of the model could be shown)."""
    from rq.job import Job

    from jobs.budgets.spend import record_spend
    from tests.e2e.stack import CHANNEL, block_text, main_requests, start
    from tests.fakes.policies import SteadyPolicy
    from tests.processes import deepthread_stack, wait_for

    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url) as stack:
        fake_model.delay = 0.2
        fake_model.policy = SteadyPolicy(turns=10)
        thread, progress, _ = start(stack, fake_slack)
        wait_for(lambda: len(main_requests(fake_model)) >= 3, 30, "a few turns")
        redis = Redis.from_url(redis_url)
        store = RunStore(redis)
        run_id = store.thread_run_ids(TEAM_ID, CHANNEL, thread)[-1]
        # What Runs.force_stop does, but the kill is lost: the job runs on.
        record_spend(redis, store.finish(run_id, RunStatus.stopped, "stopped by <@U0ANA> (forced after 90 s)"))
        stopped = store.get(run_id)
        asked = len(main_requests(fake_model))
        job = Job.fetch(keys.job_id(run_id), connection=redis)
        wait_for(lambda: job.get_status(refresh=True) == "finished", 60, "the job to run to its end")
        assert len(main_requests(fake_model)) <= asked + 1, "the job stops at its first refused write: no more turns"
        final = store.get(run_id)
        assert final.status == RunStatus.stopped and final.version == stopped.version, "none of its writes landed"
        assert job.return_value() == "stopped"
        wait_for(lambda: "Stopped" in block_text(fake_slack.message(CHANNEL, progress)), 15, "Slack to show the stop")
        assert "ended from outside" in (tmp_path / "worker.log").read_text()
