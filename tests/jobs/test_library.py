"""The team's library in a real Redis: reports shelved, found by their words in any form, replaced by
their thread's next run, and taken out of the index whole (by retention's rule, a forget, the sweep);
the index's invariants generated over any order of shelving and unshelving."""
from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis import Redis

from agent import Section, Source
from jobs import Run, RunState, RunStatus, keys
from jobs.records.library import POSTING, Library
from jobs.upkeep.retention import Retention
from tests.helpers import keys_holding


def _state(question: str, body: str, *, team: str | None = "T0LIB", channel: str = "C0LIB", thread: str = "1.1",
           run_id: str | None = None, summary: str = "", url: str = "https://example.com/a") -> RunState:
    run = Run(team=team, channel=channel, thread_ts=thread, requester="U0ANA", question=question,
              **({"id": run_id} if run_id else {}))
    source = Source(marker="s1", url=url, title="A page about it", passage="a passage")
    return RunState(run=run, status=RunStatus.completed, summary=summary or f"In short: {body} [s1]",
                    sections=[Section(section_id="sec1", title="What was found", body=f"{body} [s1]")],
                    sources={"s1": source}, finished_at=datetime(2026, 11, 12, tzinfo=UTC), version=7)


def _kept(redis: Redis, *states: RunState) -> None:
    """The runs' state in Redis, as the store leaves it (the library shelves only a run that is still there)."""
    for state in states:
        redis.hset(keys.run_state(state.run.id), "status", state.status.value)


def test_a_shelved_report_is_found_by_its_words_in_another_form_and_shows_what_it_holds(redis: Redis) -> None:
    library = Library(redis)
    fees = _state("What are the fees of VTI?", "VTI charges an expense ratio of 0.03%.")
    tracking = _state("Tracking error of SCHB", "SCHB tracked its index closely.", thread="1.2",
                      summary="SCHB tracked its index closely.")
    _kept(redis, fees, tracking)
    assert library.shelve(fees, "https://slack.example/p1") and library.shelve(tracking, "https://slack.example/p2")

    found = library.search("T0LIB", "fee ratios")
    assert [e.run_id for e in found] == [fees.run.id], "fee finds fees, ratios finds ratio"
    entry = found[0]
    assert entry.title == "What are the fees of VTI?" and entry.permalink == "https://slack.example/p1"
    assert entry.channel == "C0LIB" and entry.asker == "U0ANA" and entry.date == datetime(2026, 11, 12, tzinfo=UTC)
    assert [s.url for s in entry.sources] == ["https://example.com/a"] and entry.headings == ["What was found"]
    assert [e.run_id for e in library.search("T0LIB", "tracking")] == [tracking.run.id]
    assert library.search("T0LIB", "the and of") == [], "function words match nothing"


def test_a_german_report_is_found_by_a_query_whose_language_is_unclear(redis: Redis) -> None:
    library = Library(redis)
    report = _state("Wie hoch sind die Gebühren der ETFs?", "Die Gebühren liegen bei 0,03 Prozent.")
    _kept(redis, report)
    library.shelve(report, "")
    assert [e.run_id for e in library.search("T0LIB", "Gebühr ETF")] == [report.run.id]


def test_the_best_match_comes_first(redis: Redis) -> None:
    library = Library(redis)
    passing = _state("Bond funds", "Bonds yield more now; fees matter less.", thread="1.1")
    focused = _state("Fees of index funds", "Fees, fees and more fees: the fees of index funds.", thread="1.2")
    _kept(redis, passing, focused)
    library.shelve(passing, "")
    library.shelve(focused, "")
    assert [e.run_id for e in library.search("T0LIB", "fees")] == [focused.run.id, passing.run.id]


def test_another_workspace_never_finds_the_report(redis: Redis) -> None:
    library = Library(redis)
    report = _state("What are the fees of VTI?", "VTI costs 0.03%.")
    _kept(redis, report)
    library.shelve(report, "")
    assert library.search("T0OTHER", "fees VTI") == []
    assert library.search(None, "fees VTI") == []


def test_an_unfinished_empty_or_forgotten_run_is_not_shelved(redis: Redis) -> None:
    library = Library(redis)
    running = _state("q", "body").model_copy(update={"status": RunStatus.running})
    empty = RunState(run=Run(team="T0LIB", question="q"), status=RunStatus.failed)
    forgotten = _state("Fees of VTI", "VTI costs 0.03%.")  # forgotten while the publisher shelved it
    _kept(redis, running, empty)
    assert not library.shelve(running, "") and not library.shelve(empty, "") and not library.shelve(forgotten, "")
    assert library.size("T0LIB") == 0 and not keys_holding(redis, forgotten.run.id)


def test_the_next_run_of_the_thread_replaces_its_report_and_shelving_again_changes_nothing(redis: Redis) -> None:
    library = Library(redis)
    first = _state("What are the fees of VTI?", "VTI costs 0.03%.")
    later = _state("What are the fees of VTI?", "VTI costs 0.03%; ITOT costs 0.03% too.")
    _kept(redis, first, later)
    library.shelve(first, "p")
    library.shelve(later, "p", replaces=[first.run.id, later.run.id])
    library.shelve(later, "p", replaces=[first.run.id])  # a second replica, the same sync
    assert [e.run_id for e in library.search("T0LIB", "fees")] == [later.run.id]
    assert library.size("T0LIB") == 1 and library.shelved_version(later.run.id) == 7
    assert library.shelved_version(first.run.id) is None
    raw = redis.get(keys.library_term("T0LIB", "itot"))
    assert raw is not None and len(raw) == POSTING.size, "one posting per report and word"


def test_retention_takes_the_report_and_every_word_it_brought_out_of_the_index(redis: Redis) -> None:
    library = Library(redis)
    kept = _state("Expense ratios of bond funds", "Bond funds charge 0.05%.", thread="1.1")
    forgotten = _state("Zyxwq quarterly flowmetrics", "Zyxwq flowmetrics rose.", thread="1.2",
                       url="https://forgotten.example/page")
    _kept(redis, kept, forgotten)
    library.shelve(kept, "")
    library.shelve(forgotten, "")
    Retention(redis).forget_run(forgotten.run.id)
    assert library.search("T0LIB", "zyxwq flowmetrics") == []
    assert not keys_holding(redis, "zyxwq") and not keys_holding(redis, "flowmetr"), "no word of it stays"
    assert not keys_holding(redis, "forgotten.example") and not keys_holding(redis, forgotten.run.id)
    assert [e.run_id for e in library.search("T0LIB", "bond")] == [kept.run.id]


def test_the_sweep_takes_off_reports_whose_run_expired(redis: Redis) -> None:
    library = Library(redis)
    alive = _state("Fees of VTI", "VTI costs 0.03%.", thread="1.1")
    expired = _state("Fees of ITOT", "ITOT costs 0.03%.", thread="1.2")
    _kept(redis, alive, expired)
    for state in (alive, expired):
        library.shelve(state, "")
    redis.delete(keys.run_state(expired.run.id))  # its state expired by its TTL: no forget took the report
    assert library.sweep() == 1
    assert [e.run_id for e in library.search("T0LIB", "fees")] == [alive.run.id]
    assert not keys_holding(redis, "itot")


def _index_matches_shelf(redis: Redis, library: Library, shelved: dict[str, RunState]) -> None:
    docs = {int(k): v.decode() for k, v in redis.hgetall(keys.library_docs("T0LIB")).items()}
    assert sorted(docs.values()) == sorted(shelved), "every shelved report is numbered once, and only they"
    lengths = 0
    for run_id in shelved:
        fields = redis.hmget(keys.library_doc(run_id), ["terms", "length"])
        lengths += int(fields[1])
        for term in fields[0].decode().split():
            raw = redis.get(keys.library_term("T0LIB", term)) or b""
            numbers = [n for n, _, _ in POSTING.iter_unpack(raw)]
            assert sum(docs.get(n) == run_id for n in numbers) == 1, f"{run_id} posted once under {term}"
    for key in redis.scan_iter(match=keys.library_term("T0LIB", "*")):
        raw = redis.get(key)
        assert raw and len(raw) % POSTING.size == 0, "no empty or torn posting list is left"
        assert {n for n, _, _ in POSTING.iter_unpack(raw)} <= set(docs), "no posting names a report gone"
    assert int(redis.hget(keys.library_stats("T0LIB"), "length") or 0) == lengths


WORDS = st.sampled_from(["fees", "fee", "ratio", "bonds", "index", "tracking", "VTI", "SCHB", "Gebühren", "yield"])
OPS = st.lists(st.tuples(st.sampled_from(["shelve", "unshelve", "continue"]), st.integers(0, 4),
                         st.lists(WORDS, min_size=1, max_size=6)), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_any_order_of_shelving_and_unshelving_leaves_an_index_that_matches_the_shelf(redis: Redis, ops) -> None:  # noqa: ANN001
    redis.flushdb()
    library = Library(redis)
    shelved: dict[str, RunState] = {}
    threads: dict[int, str] = {}  # thread -> its run on the shelf
    for n, (op, thread, words) in enumerate(ops):
        if op == "unshelve":
            run_id = threads.pop(thread, None)
            if run_id is not None:
                assert library.unshelve(run_id)
                del shelved[run_id]
            continue
        state = _state(" ".join(words), " ".join(reversed(words)), thread=f"1.{thread}", run_id=f"r{n}")
        replaces = [threads[thread]] if op == "continue" and thread in threads else []
        if op == "shelve" and thread in threads:  # the same run again (a re-render): replaces itself
            state = state.model_copy(update={"run": state.run.model_copy(update={"id": threads[thread]})})
        _kept(redis, state)
        library.shelve(state, "", replaces=replaces)
        for gone in replaces:
            shelved.pop(gone, None)
        shelved[state.run.id] = state
        threads[thread] = state.run.id
        _index_matches_shelf(redis, library, shelved)
    _index_matches_shelf(redis, library, shelved)
