"""The Home tab's view, laid out from what one person's tab shows: valid by slack_sdk's view model
whatever the questions hold (generated), within Slack's limits at the most it lists, and what people
wrote shown as written, never as a mention, a broadcast or a link of theirs."""
from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.desk.home import HOME_SEARCH_ACTION, HOME_STOP_ACTION, HomeContent, home_view
from jobs import Run, RunStatus
from jobs.budgets.spend import CapState, MonthUsage, RunSpend, Tally
from jobs.lifecycle.person import SHOWN, ActiveRun, PersonRuns
from jobs.records.library import LibraryEntry

HOSTILE = st.text(min_size=1, max_size=400) | st.sampled_from(
    ["<!channel> urgent", "<@U0BOSS> look", "<https://evil.test|click>", "*bold* `code` > quote", "x" * 5000])


def _content(question: str, search: str | None = "fees") -> HomeContent:
    active = [ActiveRun(run=Run(id=f"r{i}", team="T1", channel="C1", thread_ts="1.1", requester="U1",
                                question=question), status=RunStatus.running) for i in range(SHOWN)]
    recent = [RunSpend(run_id=f"s{i}", team="T1", channel="C1", user="U1", thread_ts="1.2", question=question,
                       status="completed", micros=420_000, requests=12, finished_at=datetime(2026, 11, 12, tzinfo=UTC))
              for i in range(SHOWN)]
    cap = CapState(scope="workspace", limit_micros=50_000_000, spent_micros=1_000_000, overridden=False)
    found = [LibraryEntry(run_id=f"l{i}", channel="C1", date=datetime(2026, 11, 12, tzinfo=UTC), title=question,
                          permalink="https://team.slack.com/archives/C1/p1") for i in range(8)]
    return HomeContent(
        user="U1", runs=PersonRuns(active=active, recent=recent, spent_micros=8_400_000, runs=20),
        links={"r0": "https://team.slack.com/archives/C1/p1"}, caps=[("The workspace", cap)], month="November 2026",
        workspace=MonthUsage(team="T1", month="2026-11", total=Tally(key="total", micros=9, runs=3, requests=4),
                             channels=[], users=[], days=[], top_runs=[]),
        library_size=3, search=search, found=found)


@settings(max_examples=60, deadline=None)
@given(HOSTILE)
def test_the_view_is_valid_for_any_question_and_shows_it_as_written(question: str) -> None:
    view = home_view(_content(question)).to_dict()  # validate_json ran inside: a refused view raises
    assert view["type"] == "home" and len(view["blocks"]) <= 100
    for block in view["blocks"]:
        text = (block.get("text") or {}).get("text", "")
        assert len(text) <= 3000
        assert "<!channel>" not in text and "<@U0BOSS>" not in text and "<https://evil.test|" not in text


def test_running_runs_have_a_stop_button_and_the_search_box_dispatches_on_enter() -> None:
    view = home_view(_content("What are the fees of VTI?")).to_dict()
    stops = [b["accessory"] for b in view["blocks"] if (b.get("accessory") or {}).get("action_id") == HOME_STOP_ACTION]
    assert [s["value"] for s in stops] == [f"r{i}" for i in range(SHOWN)]
    [box] = [b for b in view["blocks"] if b["type"] == "input"]
    assert box["dispatch_action"] is True and box["element"]["action_id"] == HOME_SEARCH_ACTION
    assert box["element"]["dispatch_action_config"] == {"trigger_actions_on": ["on_enter_pressed"]}
    assert box["element"]["initial_value"] == "fees"
