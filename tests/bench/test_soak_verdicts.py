"""bench.soak's judging, apart from the processes it starts: the chaos schedule is seeded and does
every kind in turn, and the figures it reads from scrapes are what the scrapes say."""
from __future__ import annotations

import math

import pytest

from bench.soak.chaos import KINDS, schedule
from bench.soak.sampling import WATCHED, Samples, moved, p99_of, watched
from bench.soak.topology import ROLES

METRICS = """# HELP deepthread_slack_calls_total Slack Web API calls
deepthread_slack_calls_total{method="chat.update"} 40.0
deepthread_slack_calls_total{method="chat.postMessage"} 2.0
deepthread_event_loop_lag_seconds_bucket{le="0.005"} 90.0
deepthread_event_loop_lag_seconds_bucket{le="0.05"} 99.0
deepthread_event_loop_lag_seconds_bucket{le="0.25"} 100.0
deepthread_event_loop_lag_seconds_bucket{le="+Inf"} 100.0
"""


def test_the_schedule_is_seeded_and_does_every_kind_in_turn_each_kill_another_process() -> None:
    for minutes in (3, 20, 60):
        faults = schedule(9, minutes * 60, outage_seconds=60, burst_seconds=30)
        assert [f.kind for f in faults[: len(KINDS)]] == list(KINDS), "every kind, in the issue's order"
        assert [f.describe() for f in faults] == [f.describe() for f in schedule(9, minutes * 60, outage_seconds=60,
                                                                                 burst_seconds=30)]
        times = [f.at for f in faults]
        assert times == sorted(times) and times[0] > 0 and times[-1] < minutes * 60 - min(150, minutes * 60 * 0.2), "room to recover"
        victims = [f.target for f in faults if f.kind == "SIGKILL"]
        first = victims[: len(ROLES)]
        assert set(victims) <= set(ROLES) and len(first) == len(set(first)), "no process killed twice before all were"
    assert len(schedule(9, 1200, outage_seconds=60, burst_seconds=30)) > len(KINDS), "a second round in 20 minutes"
    assert {f.target for s in range(20) for f in schedule(s, 180, outage_seconds=20, burst_seconds=10)
            if f.kind == "SIGKILL"} == set(ROLES), "the seed chooses which process is killed"


def test_scrapes_are_read_as_they_say() -> None:
    totals = watched(METRICS)
    assert totals["deepthread_slack_calls_total"] == 42.0 and set(totals) == set(WATCHED)
    assert p99_of({0.005: 90.0, 0.05: 99.0, 0.25: 100.0, math.inf: 100.0}) == 0.05
    assert math.isnan(p99_of({}))
    samples = Samples(history={1: [(0.0, watched(METRICS)), (10.0, {**watched(METRICS),
                                                                      "deepthread_slack_calls_total": 52.0})],
                               2: [(5.0, {**watched(METRICS), "deepthread_slack_calls_total": 7.0})]})
    grown = moved(samples, 1.0, 10.0)
    # Process 1 grew by 10 after its scrape at 0; process 2 started after 1.0 and counts from zero.
    assert grown["deepthread_slack_calls_total"] == 17.0


def test_the_time_to_show_an_end_is_judged_by_its_slowest_thread() -> None:
    from bench.soak.verdict import end_shown_checks

    [(name, value, met, goal)] = end_shown_checks([3.0, 1.0, 2.0, 40.0, 5.0, 4.0, 6.0, 7.0, 8.0, 9.0])
    assert (value, met, goal) == ("p50 6 s, p90 9 s, max 40 s over 10 threads", True, "max ≤ 120 s")
    assert end_shown_checks([1.0, 121.0])[0][2] is False, "one end shown past two minutes misses"
    assert end_shown_checks([])[0][2] is False, "a soak where no end was shown shows nothing"


@pytest.mark.parametrize(("status", "reason"), [
    ("completed", ""),
    ("stopped", "stopped by <@U0ANA> at 10:42 UTC"),  # said once: "Stopped by <@U0ANA> at 10:42 UTC"
    ("stopped", "the run's budget of 80 requests was spent"),  # "Stopped: the run's budget …"
    ("failed", "the model service kept failing (HTTP 529)"),
    ("failed", "incomplete after the model refused to go on"),  # said once
])
def test_the_soak_knows_every_end_as_the_report_shows_it(status: str, reason: str) -> None:
    """The words the soak looks for are the ones the renderer writes, however a reason is phrased:
    a report's status line said once as "Stopped by …" was counted as a lost run (9 of 59)."""
    from agent import Finished, SectionWritten
    from bench.soak.verdict import END_WORDS, STATUS_LINE
    from bot.publishing.report_render import render_report
    from jobs import Run, RunState
    from jobs.records.state import apply_event
    from tests.e2e.stack import block_text

    state = RunState(run=Run(channel="C0", thread_ts="1700000000.000001", requester="U0ANA",
                             question="soak-q001 expense ratio VTI SCHB ITOT", team="T0"))
    for event in (SectionWritten(section_id="1", title="Fees", body="VTI's expense ratio is 0.03%."),
                  Finished(status=status, summary="In short: 0.03%.", reason=reason)):  # type: ignore[arg-type]
        state = apply_event(state, event)  # type: ignore[arg-type]
    message = render_report(state)
    text = block_text(message)
    assert END_WORDS[status] in text, text[:300]
    assert STATUS_LINE.search(text), "a second report message like this one would be counted as a double"
