"""Continuation runs: a reply in a thread whose run has ended continues the same research."""

from __future__ import annotations

from pydantic import SecretStr

from agent.control import Note
from agent.task import PriorRun

from ..keyspace import keys
from ..keyspace.connection import text
from .models import Run, RunState
from .store import RunStore

__all__ = ["create_successor", "latest_run", "notes_of", "prior_of", "successor"]


def notes_of(store: RunStore, run_id: str) -> list[str]:
    raw = store.redis.lrange(keys.notes(run_id), 0, -1)
    return [f"{n.author}: {n.text}" for n in (Note.model_validate_json(r) for r in raw)]


def successor(
    store: RunStore,
    parent: RunState,
    request: str,
    requester: str | None,
    action_token: SecretStr | None = None,
    *,
    shared_audience: bool = False,
    question_ts: str | None = None,
) -> Run:
    """The next run in the thread: the original question and constraints (with the notes
    given along the way), the new request verbatim, the same pinned report."""
    run = parent.run
    channel, thread_ts = run.channel or "", run.thread_ts or ""
    # `parent` is this thread's run, so a profile recorded before keys had a team is this thread's too.
    profile = store.redis.get(keys.thread_profile(run.team, channel, thread_ts)) or store.redis.get(
        keys.legacy_thread_profile(channel, thread_ts)
    )
    constraints = list(dict.fromkeys([*run.constraints, *notes_of(store, run.id)]))
    return Run(
        team=run.team,
        enterprise=run.enterprise,
        enterprise_install=run.enterprise_install,
        channel=run.channel,
        thread_ts=run.thread_ts,
        requester=requester or run.requester,
        question=run.question,
        constraints=constraints,
        profile=text(profile) if profile else run.profile,
        parent_run_id=run.id,
        follow_up=request,
        report_message=run.report_message,
        private_sources=run.private_sources,  # the same thread, the same audience
        # Once shared with another organization, the thread's later runs stay outside too.
        shared_audience=run.shared_audience or shared_audience,
        action_token=action_token,  # the reply's own: the parent's has expired or will soon
        question_ts=question_ts,
    )


def create_successor(store: RunStore, parent: RunState, run: Run) -> RunState:
    """Its state starts with the parent's report and sources, so the pinned report keeps them.
    Linked only while the parent is still the thread's latest run (else ThreadMoved)."""
    return store.create(
        run,
        sections=[s.model_copy(deep=True) for s in parent.sections],
        sources=parent.sources.values(),
        # The parent's charts stay linked from their sections (the same files in the thread).
        charts=[c.model_copy(update={"run_id": c.drawn_by(parent.run.id)}) for c in parent.charts],
        after=parent.run.id,
        next_check=parent.next_check,  # a scheduled re-check belongs to the thread: the footer keeps it
        earlier=parent.earlier,  # the report's opening keeps naming the team's earlier reports it built on
    )


# How far back the chain of runs is walked for earlier follow-ups (each is one Redis read).
MAX_CHAIN = 200


def prior_of(store: RunStore, state: RunState) -> PriorRun | None:
    """What a continuation inherits: the parent's report and rolling thread summary, and every
    follow-up asked before its own, oldest first (verbatim: they are short)."""
    if not state.run.parent_run_id:
        return None
    parent = store.get(state.run.parent_run_id)
    chain = [parent]
    while chain[-1].run.parent_run_id and len(chain) < MAX_CHAIN:
        chain.append(store.get(chain[-1].run.parent_run_id))
    follow_ups = [s.run.follow_up for s in reversed(chain) if s.run.follow_up]
    return PriorRun(
        run_id=parent.run.id,
        summary=parent.summary,
        sections=parent.sections,
        context_summaries=parent.context_summaries,
        sources=list(parent.sources.values()),
        thread_summary=parent.thread_summary,
        follow_ups=follow_ups,
        runs_before=len(chain),
    )


def latest_run(store: RunStore, team: str | None, channel: str, thread_ts: str) -> RunState | None:
    ids = store.thread_run_ids(team, channel, thread_ts)
    return store.get(ids[-1]) if ids else None
