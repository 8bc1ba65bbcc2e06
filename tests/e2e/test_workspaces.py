"""Many workspaces, end to end: two workspaces install the app through Slack's OAuth flow (Bolt's
/slack/install and /slack/oauth_redirect against the fake Slack's authorize page and
oauth.v2.access), ask side by side through one real serve and one real worker, and nothing of one
reaches the other: tokens, Slack calls, usage, budgets, re-checks, reports, files, rate buckets,
and every Redis record (checked kind by kind, the kinds read from the key builders themselves)."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis import Redis
from rq.job import Job

from jobs import RunStatus, RunStore
from jobs import keys as job_keys
from jobs.budgets.spend import Spend
from jobs.upkeep.recheck import Rechecks
from tests.e2e.stack import (
    APP_TOKEN,
    begin_install,
    block_text,
    install,
    post_event,
    workspaces_environment,
    workspaces_stack,
)
from tests.fakes.policies import SteadyPolicy
from tests.fakes.slack import FakeSlack, FakeWorkspace, app_mention_event, message_event
from tests.fakes.slack_files import share_file
from tests.helpers import constant_keys, key_kinds, keys_holding
from tests.processes import STARTUP_SECONDS, Stack, free_port, running, wait_for, wait_listening

ALPHA, BETA = "T0ALPHA", "T0BETA"
CHANNELS = {ALPHA: "C0ALPHA", BETA: "C0BETA"}
OTHER = {ALPHA: BETA, BETA: ALPHA}
ANA, BEN, ADMIN = "U0ANA", "U0BEN", "U0ADMIN"
# Process-wide records: work lists, cursors and indexes holding run ids (or installation keys)
# of every workspace. Only serve and the workers read them; no command, tool or cache does.
SHARED_CONSTANTS = set(constant_keys())
RQ_INFRASTRUCTURE = re.compile(r"rq:(queues|workers|workers:.+|worker:.+|scheduler.*|clean_.+|finished:.+|"
                               r"queue:.+|scheduled:.+|started:.+|failed:.+|deferred:.+|canceled:.+|pubsub:.+)")
RQ_JOB = re.compile(r"rq:(?:job|results):(?P<job>[^:]+)(?::.+)?")
# The organization's model capacity (jobs/budgets/capacity.py) is one limiter for every workspace by design:
# its queues and last-served marks hold the ids of both workspaces' runs, read only by the limiter.
ORGANIZATION_WIDE = re.compile(re.escape(job_keys.capacity("MODEL").split("MODEL")[0]) + r".+")


@pytest.fixture
def workspaces(fake_slack: FakeSlack) -> dict[str, FakeWorkspace]:
    fake_slack.admins.add(ADMIN)
    return {team: fake_slack.add_workspace(team, name=f"Team {team[2:].title()}", channels=(channel,))
            for team, channel in CHANNELS.items()}


@pytest.fixture
def stack(tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web,
          workspaces: dict[str, FakeWorkspace]) -> Iterator[tuple[str, Stack]]:
    with workspaces_stack(tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url,
                          web_url=fake_web.url) as s:
        yield s


def bot_replies(slack: FakeSlack, channel: str, thread_ts: str) -> list:
    """The bot's messages in the thread (not the people's, nor their shared files)."""
    return [m for m in slack.thread(channel, thread_ts) if m.ts != thread_ts and m.bot_id]


def mention(slack: FakeSlack, workspace: FakeWorkspace, question: str, *, user: str = ANA) -> dict[str, Any]:
    envelope = app_mention_event(question, channel=CHANNELS[workspace.team_id], user=user,
                                 team_id=workspace.team_id, bot_user_id=workspace.bot_user_id)
    slack.seed_event(envelope)
    return envelope


def say(stack: Stack, slack: FakeSlack, workspace: FakeWorkspace, thread_ts: str, text: str, *,
        user: str = ANA) -> str:
    """A reply in the workspace's thread; returns the bot's answer in the thread."""
    channel = CHANNELS[workspace.team_id]
    before = len(bot_replies(slack, channel, thread_ts))
    envelope = message_event(text, channel=channel, thread_ts=thread_ts, user=user, team_id=workspace.team_id,
                             bot_user_id=workspace.bot_user_id)
    slack.seed_event(envelope)
    assert post_event(stack, envelope).status_code == 200
    replies = wait_for(lambda: bot_replies(slack, channel, thread_ts)[before:], 15, f"the answer to {text!r}")
    return replies[-1].text


def finished_report(slack: FakeSlack, channel: str, thread_ts: str, timeout: float = 60) -> str:
    replies = wait_for(lambda: len(bot_replies(slack, channel, thread_ts)) >= 2 and bot_replies(slack, channel,
                                                                                                 thread_ts),
                       20, "progress and report replies")
    report_ts = replies[1].ts
    wait_for(lambda: re.search(r"Final|Stopped|Incomplete", block_text(slack.message(channel, report_ts))), timeout,
             "the run to end")
    return report_ts


def every_value(redis: Redis, key: str) -> str:
    """A record's whole content as text, whatever its type."""
    kind = redis.type(key).decode()
    if kind == "string":
        raw: Any = redis.get(key)
    elif kind == "hash":
        raw = redis.hgetall(key)
    elif kind == "list":
        raw = redis.lrange(key, 0, -1)
    elif kind == "set":
        raw = redis.smembers(key)
    elif kind == "zset":
        raw = redis.zrange(key, 0, -1)
    elif kind == "stream":
        raw = redis.xrange(key)
    else:
        raw = ""
    return repr(raw)


def owner_of(key: str, redis: Redis, store: RunStore, slack: FakeSlack, runs: dict[str, str]) -> set[str | None]:
    """The workspaces a key belongs to, read from its kind: its team part, the team of the run it
    names, the workspace of the channel it names. A key no kind explains has no owner (empty)."""
    job = RQ_JOB.fullmatch(key)
    if job:
        if job["job"].startswith("run-"):
            return {runs.get(job["job"][4:], "<unknown run>")}
        return {Job.fetch(job["job"], connection=redis).args[3]}  # a scheduled re-check: its team
    for kind in key_kinds():
        match = kind.pattern.fullmatch(key)
        if match is None:
            continue
        assert not kind.name.startswith("legacy_"), f"{key}: written under a name from before keys had a team"
        parts = match.groupdict()
        owners: set[str | None] = set()
        if "team" in parts:
            owners.add(None if parts["team"] == "-" else parts["team"])
        if "run_id" in parts:
            owners.add(runs.get(parts["run_id"], "<unknown run>"))
        if "channel" in parts:
            owners.add(slack.team_of_channel(parts["channel"]))
        if kind.name == "dedupe":  # a run's own marks: the run id is inside the name
            owners |= {team for run, team in runs.items() if run in parts["name"]}
        return owners
    return set()


def test_two_workspaces_install_through_oauth_and_nothing_crosses(stack, fake_slack: FakeSlack, redis_url: str,
                                                                  workspaces: dict[str, FakeWorkspace]) -> None:
    base, s = stack
    redis = Redis.from_url(redis_url)

    # Both install through Slack's OAuth flow: Bolt's pages, the fake's authorize page and oauth.v2.access.
    for team in CHANNELS:
        done = install(base, team)
        assert done.status_code == 200 and "Thank you!" in done.text, done.text
    assert sorted(team for team, _ in fake_slack.installs) == [ALPHA, BETA]
    tokens = {team: fake_slack.token_of(team) for team in CHANNELS}
    assert all(tokens.values()) and tokens[ALPHA] != tokens[BETA]

    # Each asks in its own channel, a file shared in Alpha's thread first.
    envelopes = {team: mention(fake_slack, workspaces[team], "expense ratio VTI SCHB ITOT") for team in CHANNELS}
    threads = {team: envelope["event"]["ts"] for team, envelope in envelopes.items()}
    alpha_file = share_file(fake_slack, CHANNELS[ALPHA], threads[ALPHA], "fees.csv", b"fund,fee\nVTI,0.03%\n")
    for envelope in envelopes.values():
        assert post_event(s, envelope).status_code == 200
    reports = {team: finished_report(fake_slack, CHANNELS[team], ts) for team, ts in threads.items()}
    store = RunStore(redis)
    run_ids = {team: store.thread_run_ids(team, CHANNELS[team], threads[team]) for team in CHANNELS}
    assert all(len(ids) == 1 for ids in run_ids.values())
    runs = {ids[0]: team for team, ids in run_ids.items()}
    for run_id, team in runs.items():
        assert store.get(run_id).run.team == team

    # Rate buckets: each workspace's writes were counted in its own buckets, and only there.
    for team in CHANNELS:
        for method in ("chat.update", "pins.add", "assistant.threads.setStatus"):
            made = sum(1 for m, _ in fake_slack.calls_in(team) if m == method)
            assert redis.zcard(f"deepthread:ratelimit:{team}:{method}") == made, (team, method)
        posts = sum(1 for m, _ in fake_slack.calls_in(team) if m == "chat.postMessage")
        assert redis.zcard(f"deepthread:ratelimit:{team}:chat.postMessage:{CHANNELS[team]}") == posts

    # Slack calls and reports: every call with a workspace's token stays in that workspace; each
    # report is posted, pinned and final in its own channel by its own bot user.
    for team, workspace in workspaces.items():
        channels = {p.get("channel") or p.get("channel_id") for _, p in fake_slack.calls_in(team)} - {None}
        assert channels == {CHANNELS[team]}, (team, channels)
        assert [p.ts for p in fake_slack.pins(CHANNELS[team])] == [reports[team]]
        assert {m.user for m in bot_replies(fake_slack, CHANNELS[team], threads[team])} == {workspace.bot_user_id}
        assert "Final" in block_text(fake_slack.message(CHANNELS[team], reports[team]))
    assert not [r for r in fake_slack.refused if r[1] in ("channel_not_found", "not_authed", "invalid_auth",
                                                            "token_revoked", "file_not_found")], fake_slack.refused

    # Files: Alpha's run read its thread (and the file in it) with Alpha's token; Beta's token
    # cannot see Alpha's file or channel at all.
    assert any(m == "files.info" and p.get("file") == alpha_file for m, p in fake_slack.calls_in(ALPHA)) or any(
        m == "conversations.replies" and p.get("channel") == CHANNELS[ALPHA] for m, p in fake_slack.calls_in(ALPHA))
    assert not any(m in ("files.info", "conversations.replies") for m, p in fake_slack.calls_in(BETA)
                   if p.get("channel") == CHANNELS[ALPHA] or p.get("file") == alpha_file)
    as_beta = {"Authorization": f"Bearer {tokens[BETA]}"}
    refused = httpx.post(f"{fake_slack.url}/api/files.info", data={"file": alpha_file}, headers=as_beta).json()
    assert refused == {"ok": False, "error": "file_not_found"}
    refused = httpx.post(f"{fake_slack.url}/api/conversations.replies",
                         data={"channel": CHANNELS[ALPHA], "ts": threads[ALPHA]}, headers=as_beta).json()
    assert refused == {"ok": False, "error": "channel_not_found"}

    # Usage, budgets, re-checks: each workspace's commands see only its own.
    for team in CHANNELS:
        usage = say(s, fake_slack, workspaces[team], threads[team], "usage")
        assert "across 1 run" in usage and f"<#{CHANNELS[team]}>" in usage, usage
        assert CHANNELS[OTHER[team]] not in usage
        assert {r.run_id for r in Spend(redis).month(team).top_runs} == set(run_ids[team])
    assert "Budget" in say(s, fake_slack, workspaces[ALPHA], threads[ALPHA], "budget workspace $70/month", user=ADMIN)
    assert [c.limit_micros for c in Spend(redis).caps(ALPHA, CHANNELS[ALPHA])] == [70_000_000]
    assert [c.limit_micros for c in Spend(redis).caps(BETA, CHANNELS[BETA])] == [50_000_000], (
        "Beta keeps the budget every new workspace starts with"
    )
    assert "$70.00" not in say(s, fake_slack, workspaces[BETA], threads[BETA], "usage")
    assert say(s, fake_slack, workspaces[ALPHA], threads[ALPHA], "recheck weekly").startswith("Re-check scheduled")
    assert say(s, fake_slack, workspaces[BETA], threads[BETA], "recheck").startswith("No re-check is scheduled")
    rechecks = Rechecks(redis)
    assert rechecks.get(ALPHA, CHANNELS[ALPHA], threads[ALPHA]) is not None
    assert rechecks.get(BETA, CHANNELS[ALPHA], threads[ALPHA]) is None

    # A reply claiming to come from Beta in Alpha's thread (Slack would never send it) reaches
    # nothing: no continuation, no note, no answer, in either workspace.
    forged = message_event("Now add ITOT's tracking difference", channel=CHANNELS[ALPHA], thread_ts=threads[ALPHA],
                           user=BEN, team_id=BETA, bot_user_id=workspaces[BETA].bot_user_id)
    alpha_before = len(bot_replies(fake_slack, CHANNELS[ALPHA], threads[ALPHA]))
    assert post_event(s, forged).status_code == 200
    wait_for(lambda: redis.exists(f"deepthread:seen:{BETA}:event:{forged['event_id']}"), 10, "the forged event")
    assert say(s, fake_slack, workspaces[BETA], threads[BETA], "recheck").startswith("No re-check")  # a barrier
    assert len(bot_replies(fake_slack, CHANNELS[ALPHA], threads[ALPHA])) == alpha_before
    assert store.thread_run_ids(ALPHA, CHANNELS[ALPHA], threads[ALPHA]) == run_ids[ALPHA]
    assert store.thread_run_ids(BETA, CHANNELS[ALPHA], threads[ALPHA]) == []

    # Every Redis record belongs to exactly one workspace, and none names the other's ids or
    # tokens; process-wide records are the modules' named constants and RQ's own. Tokens are
    # nowhere in clear.
    ids = {team: {team, CHANNELS[team], threads[team], *run_ids[team]} for team in CHANNELS}
    for raw_key in redis.scan_iter("*"):
        key = raw_key.decode()
        value = every_value(redis, key)
        for token in tokens.values():
            assert token not in value, f"{key} holds a token in clear"
        if key in SHARED_CONSTANTS or RQ_INFRASTRUCTURE.fullmatch(key) or ORGANIZATION_WIDE.fullmatch(key):
            continue
        owners = owner_of(key, redis, store, fake_slack, runs)
        assert len(owners) == 1 and None not in owners, f"{key}: owned by {owners or 'no one'}"
        (team,) = owners
        for foreign in ids[OTHER[team]]:
            assert foreign not in key and foreign not in value, f"{key} of {team} names {foreign} of {OTHER[team]}"


@pytest.mark.parametrize("how", ["app_uninstalled", "tokens_revoked"])
def test_an_uninstalled_workspace_has_its_runs_stopped_and_tokens_deleted_while_the_other_goes_on(
        how: str, stack, fake_slack: FakeSlack, fake_model, redis_url: str,
        workspaces: dict[str, FakeWorkspace]) -> None:
    base, s = stack
    redis = Redis.from_url(redis_url)
    for team in CHANNELS:
        assert install(base, team).status_code == 200
    fake_model.delay = 0.2
    fake_model.policy = SteadyPolicy(turns=12)
    alpha = mention(fake_slack, workspaces[ALPHA], "expense ratio VTI SCHB ITOT")
    assert post_event(s, alpha).status_code == 200
    store = RunStore(redis)
    alpha_run = wait_for(lambda: store.thread_run_ids(ALPHA, CHANNELS[ALPHA], alpha["event"]["ts"]), 10,
                         "Alpha's run")[0]
    wait_for(lambda: store.get(alpha_run).status == RunStatus.running, 20, "Alpha's run to start")
    beta = mention(fake_slack, workspaces[BETA], "expense ratio VTI SCHB ITOT")
    assert post_event(s, beta).status_code == 200

    envelope = fake_slack.uninstall(ALPHA) if how == "app_uninstalled" else fake_slack.revoke_bot_token(ALPHA)
    calls_before = len(fake_slack.calls_in(ALPHA))
    assert post_event(s, envelope).status_code == 200

    if how == "app_uninstalled":
        # An uninstall stops the workspace's runs and forgets its data (jobs/upkeep/retention.py): the run's
        # every record goes, not only its tokens.
        # 45 s: a loaded 2-core CI once took over 20 (alone ~5 s); what is still held is said if it fails.
        try:
            wait_for(lambda: not keys_holding(redis, alpha_run), 45, "Alpha's run to be stopped and forgotten")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: still held by {keys_holding(redis, alpha_run)}") from None
    else:
        stopped = wait_for(lambda: store.get(alpha_run).status.finished and store.get(alpha_run), 20,
                           "Alpha's run to stop")
        assert stopped.status == RunStatus.stopped
        assert stopped.reason == "the app's access to this workspace was revoked"
    assert not redis.exists(f"deepthread:installation:-:{ALPHA}"), "Alpha's tokens are deleted"
    assert redis.exists(f"deepthread:installation:-:{BETA}"), "Beta's are kept"
    assert redis.smembers("deepthread:installations") == {f"deepthread:installation:-:{BETA}".encode()}

    # Beta's run (queued behind Alpha's on the one worker) runs to its end.
    report = finished_report(fake_slack, CHANNELS[BETA], beta["event"]["ts"], timeout=90)
    assert "Final" in block_text(fake_slack.message(CHANNELS[BETA], report))
    # Nothing was sent with Alpha's revoked token: the publisher had no token left to send with.
    assert len(fake_slack.calls_in(ALPHA)) == calls_before
    assert ("chat.update", "token_revoked") not in fake_slack.refused


def test_an_install_that_goes_wrong_is_refused_with_a_page_that_says_so_and_saves_nothing(
        stack, fake_slack: FakeSlack, redis_url: str) -> None:
    base, _ = stack
    redis = Redis.from_url(redis_url)

    def saved() -> set[bytes]:
        return redis.smembers("deepthread:installations")

    fake_slack.deny_next_install()  # the person presses Cancel on Slack's page
    cancelled = install(base, ALPHA)
    assert cancelled.status_code == 200 and "access_denied" in cancelled.text and not saved()

    cookie, back = begin_install(base, ALPHA)
    elsewhere = httpx.get(back, timeout=10)  # another browser: no state cookie
    assert elsewhere.status_code == 400 and not saved()
    code = re.search(r"code=([^&]+)", back).group(1)
    forged = httpx.get(f"{base}/slack/oauth_redirect", params={"code": code, "state": "made-up.0"},
                       headers={"Cookie": "slack-app-oauth-state=made-up.0"}, timeout=10)
    assert forged.status_code == 401 and not saved(), "a state this deployment did not sign"

    done = httpx.get(back, headers={"Cookie": cookie}, timeout=10)
    assert done.status_code == 200 and saved() == {b"deepthread:installation:-:T0ALPHA"}
    replayed = httpx.get(back, headers={"Cookie": cookie}, timeout=10)
    assert replayed.status_code == 401, "the state was used once"
    assert [team for team, _ in fake_slack.installs] == [ALPHA], "the code was exchanged once"


def test_an_install_from_a_workspace_outside_the_allowlist_is_refused_and_a_new_one_gets_its_budget(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web,
        workspaces: dict[str, FakeWorkspace]) -> None:
    redis = Redis.from_url(redis_url)
    with workspaces_stack(tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url, web_url=fake_web.url,
                          DEEPTHREAD_INSTALL_ALLOW=f"E0SOMEORG, {ALPHA}",
                          DEEPTHREAD_NEW_WORKSPACE_BUDGET_USD="25") as (base, _):
        refused = install(base, BETA)
        assert refused.status_code == 403, refused.text
        assert "not on this Deepthread deployment's list" in refused.text and BETA in refused.text
        assert "DEEPTHREAD_INSTALL_ALLOW" in refused.text, "the page says what to ask for"
        assert redis.smembers("deepthread:installations") == set(), "nothing of the refused workspace is saved"
        assert install(base, ALPHA).status_code == 200
        assert redis.smembers("deepthread:installations") == {b"deepthread:installation:-:T0ALPHA"}
    caps = Spend(redis).caps(ALPHA, CHANNELS[ALPHA])
    assert [(c.scope, c.limit_micros) for c in caps] == [("workspace", 25_000_000)], "a new workspace has a cap"
    assert "refused an install" in (tmp_path / "serve.log").read_text()


def test_in_socket_mode_workspaces_install_over_http_and_their_events_come_over_the_socket(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web,
        workspaces: dict[str, FakeWorkspace]) -> None:
    port = free_port()
    env = workspaces_environment(redis_url, fake_slack, fake_model.url, fake_web.url, port, SLACK_APP_TOKEN=APP_TOKEN)
    with running(["serve"], env, tmp_path / "serve.log") as serve, running(["worker"], env, tmp_path / "worker.log"):
        base = wait_listening(port, serve, tmp_path / "serve.log")
        wait_for(lambda: fake_slack.socket_connections == 1, STARTUP_SECONDS, "the Socket Mode connection")
        assert httpx.post(f"{base}/slack/events", content=b"{}", timeout=10).status_code == 404, \
            "events come over the socket, not HTTP"
        for team in CHANNELS:
            assert "Thank you!" in install(base, team).text
        envelopes = {team: mention(fake_slack, workspaces[team], "expense ratio VTI SCHB ITOT") for team in CHANNELS}
        for envelope in envelopes.values():
            fake_slack.send_socket_event(envelope)
        for team, envelope in envelopes.items():
            report = finished_report(fake_slack, CHANNELS[team], envelope["event"]["ts"])
            assert "Final" in block_text(fake_slack.message(CHANNELS[team], report))
            assert {m.user for m in bot_replies(fake_slack, CHANNELS[team], envelope["event"]["ts"])} == {
                workspaces[team].bot_user_id}


def test_an_org_wide_install_serves_each_workspace_of_the_org_with_its_own_records(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    """Enterprise Grid, as Bolt handles it: one install for the org, found for an event of any of
    its workspaces; spend and rate buckets stay per workspace; removing it from the org stops the
    runs of all of them and deletes the org's token."""
    org, teams = "E0ORG", {"T0EAST": "C0EAST", "T0WEST": "C0WEST"}
    for team, channel in teams.items():
        fake_slack.add_workspace(team, channels=(channel,), enterprise_id=org)
    bot = fake_slack.orgs[org].bot_user_id
    with workspaces_stack(tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url,
                          web_url=fake_web.url) as (base, s):
        assert "Thank you!" in install(base, org).text
        redis = Redis.from_url(redis_url)
        assert redis.smembers("deepthread:installations") == {f"deepthread:installation:{org}:-".encode()}
        threads = {}
        for team, channel in teams.items():
            envelope = app_mention_event("expense ratio VTI SCHB ITOT", channel=channel, team_id=team,
                                         bot_user_id=bot, enterprise_id=org, is_enterprise_install=True)
            threads[team] = fake_slack.seed_event(envelope)
            assert post_event(s, envelope).status_code == 200
        store = RunStore(redis)
        for team, channel in teams.items():
            report = finished_report(fake_slack, channel, threads[team])
            assert "Final" in block_text(fake_slack.message(channel, report))
            (run_id,) = store.thread_run_ids(team, channel, threads[team])
            run = store.get(run_id).run
            assert (run.team, run.enterprise, run.enterprise_install) == (team, org, True)
            assert [r.run_id for r in Spend(redis).month(team).top_runs] == [run_id], "spend stays per workspace"
            assert redis.exists(f"deepthread:ratelimit:{team}:chat.update")
            assert {m.user for m in bot_replies(fake_slack, channel, threads[team])} == {bot}
        assert not list(redis.scan_iter("deepthread:ratelimit:default:*")), "no bucket shared by the org's workspaces"

        assert post_event(s, fake_slack.uninstall(org)).status_code == 200
        wait_for(lambda: not redis.exists(f"deepthread:installation:{org}:-"), 20, "the org's token to be deleted")


def test_an_org_wide_install_gives_each_of_its_workspaces_the_new_workspace_budget(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    """Enterprise Grid: the install names no workspace, yet each workspace of the org that asks starts
    with the same monthly budget a workspace install gets (DEEPTHREAD_NEW_WORKSPACE_BUDGET_USD)."""
    org, teams = "E0ORG", {"T0EAST": "C0EAST", "T0WEST": "C0WEST"}
    for team, channel in teams.items():
        fake_slack.add_workspace(team, channels=(channel,), enterprise_id=org)
    bot = fake_slack.orgs[org].bot_user_id
    redis = Redis.from_url(redis_url)
    with workspaces_stack(tmp_path, fake_slack, redis_url=redis_url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_NEW_WORKSPACE_BUDGET_USD="25") as (base, s):
        assert "Thank you!" in install(base, org).text
        Spend(redis).set_budget("T0WEST", "workspace", None)  # an admin of one workspace lifted it already
        for team, channel in teams.items():
            envelope = app_mention_event("expense ratio VTI SCHB ITOT", channel=channel, team_id=team,
                                         bot_user_id=bot, enterprise_id=org, is_enterprise_install=True)
            ts = fake_slack.seed_event(envelope)
            assert post_event(s, envelope).status_code == 200
            finished_report(fake_slack, channel, ts)
    east = Spend(redis).caps("T0EAST", "C0EAST")
    assert [(c.scope, c.limit_micros) for c in east] == [("workspace", 25_000_000)], "the same default as an install"
    assert Spend(redis).caps("T0WEST", "C0WEST") == [], "a workspace's own choice is kept"
