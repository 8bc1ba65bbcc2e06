"""Installs made before DEEPTHREAD_INSTALL_ALLOW was set are refused once it is (issue 45, item 5d).

Real `deepthread serve` and `deepthread worker` processes, Redis and the fake Slack's OAuth flow. Two
workspaces install while the deployment admits anyone; Beta's run is under way. The operator sets
DEEPTHREAD_INSTALL_ALLOW to Alpha alone and restarts: Beta is refused as an install from outside the
list is. The app uninstalls itself there (apps.uninstall), Beta's tokens are deleted and its run is
stopped with the reason, its events are not served (no run, no Slack call), and nothing is sent with
its token; Alpha is served as before.
"""
from __future__ import annotations

from pathlib import Path

from cryptography.fernet import Fernet
from redis import Redis

from bot.surface.oauth import REFUSED_REASON
from jobs import RunStatus, RunStore
from tests.e2e.stack import install, post_event, workspaces_stack
from tests.fakes.policies import SteadyPolicy
from tests.fakes.slack import FakeSlack, FakeWorkspace, app_mention_event
from tests.processes import wait_for

ALPHA, BETA = "T0ALPHA", "T0BETA"
CHANNELS = {ALPHA: "C0ALPHA", BETA: "C0BETA"}


def mention(slack: FakeSlack, workspace: FakeWorkspace, question: str) -> dict:
    envelope = app_mention_event(question, channel=CHANNELS[workspace.team_id], team_id=workspace.team_id,
                                 bot_user_id=workspace.bot_user_id)
    slack.seed_event(envelope)
    return envelope


def test_a_workspace_installed_before_the_allowlist_and_outside_it_is_refused_once_it_is_set(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    workspaces = {team: fake_slack.add_workspace(team, name=f"Team {team[2:].title()}", channels=(channel,))
                  for team, channel in CHANNELS.items()}
    redis = Redis.from_url(redis_url)
    store = RunStore(redis)
    fake_model.delay = 0.2
    fake_model.policy = SteadyPolicy(turns=200)  # Beta's run is still going when the list is set
    for part in ("open", "listed"):
        (tmp_path / part).mkdir()
    key = Fernet.generate_key().decode()  # the deployment's, kept across the restart
    with workspaces_stack(tmp_path / "open", fake_slack, redis_url=redis_url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_TOKEN_KEY=key) as (base, stack):
        for team in CHANNELS:
            assert install(base, team).status_code == 200
        beta = mention(fake_slack, workspaces[BETA], "expense ratio VTI SCHB ITOT")
        assert post_event(stack, beta).status_code == 200
        [beta_run] = wait_for(lambda: store.thread_run_ids(BETA, CHANNELS[BETA], beta["event"]["ts"]), 10,
                              "Beta's run")
        wait_for(lambda: store.get(beta_run).status == RunStatus.running, 30, "Beta's run to start")
    assert redis.scard("deepthread:installations") == 2

    with workspaces_stack(tmp_path / "listed", fake_slack, redis_url=redis_url, model_url=fake_model.url,
                          web_url=fake_web.url, DEEPTHREAD_TOKEN_KEY=key, DEEPTHREAD_INSTALL_ALLOW=ALPHA) as (base, stack):
        wait_for(lambda: fake_slack.uninstalled_by_app == [BETA], 20, "the app to uninstall itself from Beta")
        assert redis.smembers("deepthread:installations") == {f"deepthread:installation:-:{ALPHA}".encode()}
        stopped = wait_for(lambda: store.get(beta_run).status.finished and store.get(beta_run), 30,
                           "Beta's run to stop")
        assert stopped.status == RunStatus.stopped and stopped.reason == REFUSED_REASON

        calls_before = len(fake_slack.calls_in(BETA))
        again = mention(fake_slack, workspaces[BETA], "and the fees of VOO?")
        assert post_event(stack, again).status_code == 200
        fake_model.policy = SteadyPolicy(turns=2)
        alpha = mention(fake_slack, workspaces[ALPHA], "expense ratio VTI SCHB ITOT")
        assert post_event(stack, alpha).status_code == 200
        wait_for(lambda: store.thread_run_ids(ALPHA, CHANNELS[ALPHA], alpha["event"]["ts"]), 15,
                 "Alpha's question to be served")
        assert not store.thread_run_ids(BETA, CHANNELS[BETA], again["event"]["ts"]), "Beta's event is not served"
        assert len(fake_slack.calls_in(BETA)) == calls_before, "nothing is sent with Beta's token"
    log = (tmp_path / "listed" / "serve.log").read_text()
    assert f"{BETA}: not in DEEPTHREAD_INSTALL_ALLOW; the app uninstalled itself there" in log
