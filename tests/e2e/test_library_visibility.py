"""Nothing of a conversation's report reaches anyone who cannot read that conversation, on any surface of
the team's library, end to end (serve in Socket Mode, a worker, real Redis, the fake Slack describing
every conversation and person): reports from a conversation of every kind (public, private, a DM, a
public and a private channel shared with another organization) are shelved, and each surface is asked
by people of every kind (in them or not, a guest account, another organization's): `/deepthread library`
(search), `@deepthread library` (the command), the Home tab's search box, and a new run's earlier
research in threads of every kind. The matrix is generated from those dimensions and each answer is
checked against the rule written out as an oracle. Then `forget this thread` takes a report off every
surface."""
from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from agent import Section, Source
from bot.desk.home import HOME_SEARCH_ACTION
from jobs import Run, RunStatus, RunStore
from jobs.records.library import Library
from tests.e2e.stack import deliver, interact, socket_mode_stack
from tests.fakes.slack import TEAM_ID, FakeSlack, app_mention_event, message_event
from tests.fakes.slack_commands import command_response, send_slash_command
from tests.fakes.slack_views import app_home_opened_event, home_action, home_of, views_published
from tests.fakes.slack_web import EXTERNAL_TEAM
from tests.processes import Stack, wait_for

ANA, BEN, GUS, OUT, ADMIN = "U0ANA", "U0BEN", "U0GUS", "U0OUT", "U0ADMIN"
PEOPLE = {ANA: "full", BEN: "full", ADMIN: "full", GUS: "guest", OUT: "outside"}
# Where the reports were asked: (id, public, shared with another organization, members).
REPORTS = {
    "public": ("C0PUBLIC", True, False, {ANA, BEN, "UBOT"}),
    "private": ("G0PRIVATE", False, False, {ANA, ADMIN, "UBOT"}),
    "dm": ("D0ANA", False, False, {ANA, "UBOT"}),
    "shared_public": ("C0SHARED", True, True, {ANA, OUT, "UBOT"}),
    "shared_private": ("G0SHARED", False, True, {ANA, OUT, GUS, "UBOT"}),
}
HALL = ("C0HALL", True, False, {ANA, BEN, GUS, OUT, ADMIN, "UBOT"})  # where people ask the library
# Where a new run is asked, and by whom: its earlier research must be readable by all who read it.
THREADS = {
    "public": (("C0TEAM", True, False, {ANA, BEN, "UBOT"}), BEN),
    "private": (REPORTS["private"], ADMIN),
    "dm": (("D0BEN", False, False, {BEN, "UBOT"}), BEN),
    "shared_private": (REPORTS["shared_private"], ANA),
}
WORD = "ledgerwise"  # in every report's title, and nowhere else


def readers(conv: tuple[str, bool, bool, set[str]]) -> set[str]:
    """The rule, written out: its members now, and every person of the workspace if it is public."""
    _, public, _, members = conv
    return set(members) | ({p for p, kind in PEOPLE.items() if kind == "full"} if public else set())


def title(kind: str) -> str:
    return f"{WORD} report from the {kind.replace('_', ' ')} conversation"


@pytest.fixture
def stack(tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> Iterator[Stack]:
    for person, kind in PEOPLE.items():
        fake_slack.add_user(person, team_id=EXTERNAL_TEAM if kind == "outside" else None, guest=kind == "guest",
                            admin=person == ADMIN)
    for conv in [*REPORTS.values(), HALL, *(t for t, _ in THREADS.values())]:
        channel, public, shared, members = conv
        fake_slack.add_conversation(channel, private=not public, members=sorted(members), ext_shared=shared)
    redis = Redis.from_url(redis_url)
    store = RunStore(redis)
    for n, (kind, (channel, *_)) in enumerate(REPORTS.items()):
        run = Run(id=f"report{n:06d}", team=TEAM_ID, channel=channel, thread_ts=f"1700000000.00{n}000",
                  requester=ANA, question=title(kind))
        source = Source(marker="s1", url=f"https://{kind.replace('_', '-')}.example/page", title="A page",
                        passage="a passage")
        store.create(run, sections=[Section(section_id="sec1", title="Found", body=f"{WORD} facts [s1]")],
                     sources=[source])
        state = store.finish(run.id, RunStatus.completed, "")  # a finished run of its thread, as a worker leaves it
        assert Library(redis).shelve(state, f"https://deepthread-test.slack.com/archives/{channel}/p{n}")
    with socket_mode_stack(tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url,
                           web_url=fake_web.url) as s:
        yield s


def shown(text: str) -> set[str]:
    return {kind for kind in REPORTS if title(kind) in text}


def by_slash(slack: FakeSlack, person: str) -> set[str]:
    envelope_id = send_slash_command(slack, f"library {WORD}", user=person, channel=HALL[0])
    return shown(wait_for(lambda: command_response(slack, envelope_id), 10, "the slash answer")["text"])


def by_mention(slack: FakeSlack, person: str) -> set[str]:
    before = len([e for e in slack.ephemerals(HALL[0]) if e.user == person])
    deliver(slack, app_mention_event(f"<@UBOT> library {WORD}", channel=HALL[0], user=person))
    answers = wait_for(lambda: [e for e in slack.ephemerals(HALL[0]) if e.user == person][before:], 10, "the answer")
    return shown(answers[0].text)


def by_home(slack: FakeSlack, person: str) -> set[str]:
    deliver(slack, app_home_opened_event(person))
    wait_for(lambda: (TEAM_ID, person) in views_published(slack), 15, "the Home tab")
    count = views_published(slack).count((TEAM_ID, person))
    interact(slack, home_action(HOME_SEARCH_ACTION, user=person, view=home_of(slack, person), value=WORD,
                                kind="plain_text_input"))
    wait_for(lambda: views_published(slack).count((TEAM_ID, person)) > count, 15, "the tab with the search")
    return shown(str(home_of(slack, person)["blocks"]))


SURFACES = {"search": by_slash, "library command": by_mention, "Home tab": by_home}


def _first_turn(fake_model, question: str) -> dict | None:  # noqa: ANN001
    """The run's first request to the lead model (the one its opening search answered), if it was made."""
    for request in fake_model.requests:
        if "earlier_research" in {t["name"] for t in request.get("tools") or []} and question in str(
                request["messages"][0]):
            return request
    return None


def _given_to_run(fake_model, question: str) -> set[str]:  # noqa: ANN001
    """The conversations whose reports the run's opening search gave it (read off their permalinks)."""
    request = _first_turn(fake_model, question)
    assert request is not None, f"no first turn of the run asking {question!r}"
    opening = request["messages"][1]["content"] if len(request["messages"]) > 2 else []
    if not any(isinstance(b, dict) and b.get("id") == "toolu_earlier_research_opening" for b in opening):
        return set()
    return set(re.findall(r"/archives/([CDG][A-Z0-9]+)/p", str(request["messages"][2])))


def test_no_surface_shows_a_report_to_anyone_who_cannot_read_its_conversation(
        stack: Stack, fake_slack: FakeSlack, fake_model, redis_url: str) -> None:
    problems = []
    for (surface, ask), person in itertools.product(SURFACES.items(), PEOPLE):
        expected = {kind for kind, conv in REPORTS.items() if person in readers(conv)}
        got = ask(fake_slack, person)
        if got != expected:
            problems.append(f"{surface} for {PEOPLE[person]} {person}: shown {sorted(got)}, may see {sorted(expected)}")
    # Every conversation a report may come from: the shelved ones, and the threads of this test's own runs
    # (each is shelved when it ends, and is an earlier report for the runs after it).
    places = {conv[0]: conv for conv in [*REPORTS.values(), *(t for t, _ in THREADS.values())]}
    for thread_kind, (conv, asker) in THREADS.items():
        question = f"{WORD} question asked in the {thread_kind} thread"
        deliver(fake_slack, app_mention_event(f"<@UBOT> {question}", channel=conv[0], user=asker))
        wait_for(lambda q=question: _first_turn(fake_model, q), 30, "the run's first turn")
        given = _given_to_run(fake_model, question)
        allowed = {c for c, place in places.items() if readers(conv) - {"UBOT"} <= readers(place) or c == conv[0]}
        expected = {REPORTS[k][0] for k in REPORTS if REPORTS[k][0] in allowed}
        if not given <= allowed or not given:
            problems.append(f"earlier research in a {thread_kind} thread: given {sorted(given)}, may {sorted(allowed)}")
        assert expected, "every thread here may reuse some report"
    assert not problems, "\n".join(problems)


def test_forget_takes_a_report_off_every_surface(stack: Stack, fake_slack: FakeSlack, fake_model,
                                                 redis_url: str) -> None:
    assert "private" in by_slash(fake_slack, ADMIN)
    channel, thread = REPORTS["private"][0], "1700000000.001000"
    redis = Redis.from_url(redis_url)
    deliver(fake_slack, message_event("forget this thread", channel=channel, thread_ts=thread, user=ADMIN))
    wait_for(lambda: Library(redis).entry("report000001") is None, 15, "the report off the shelf")
    for ask in SURFACES.values():
        assert "private" not in ask(fake_slack, ADMIN)
    question = f"{WORD} question after the forget"
    deliver(fake_slack, app_mention_event(f"<@UBOT> {question}", channel=channel, user=ADMIN))
    wait_for(lambda: _first_turn(fake_model, question), 30, "the run's first turn")
    assert "report000001" not in str(_first_turn(fake_model, question)) and title("private") not in str(
        _first_turn(fake_model, question))
