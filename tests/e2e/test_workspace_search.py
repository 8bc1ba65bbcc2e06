"""The team's own Slack as a source, end to end: real serve and worker, the fake Slack answering
`assistant.search.context` as the requester. A report in a public channel cites only public-channel
results; in a DM with the requester (DEEPTHREAD_WORKSPACE_SEARCH=dm) private ones too; a request
without Slack's permission gets a clear tool result and one notice."""

from __future__ import annotations

import re
from pathlib import Path

from redis import Redis

from tests.e2e.stack import block_text, bot_replies, main_requests, post_event
from tests.fakes.policies import CiteWhatOneToolFindsPolicy
from tests.fakes.slack import FakeSlack, app_mention_event, message_event
from tests.fakes.slack_search import issue_action_token, queries, set_members
from tests.processes import deepthread_stack, wait_for
from tests.redis_values import holding

PRIVATE_SCOPES = {"search:read.private", "search:read.mpim", "search:read.im"}
PUBLIC, PRIVATE, DM, SHARED = "C0TEAM", "G0SECRET", "D0ANA", "C0CONNECT"
QUESTION = "What did the team decide about the Gizmo vendor?"


def seed(slack: FakeSlack) -> None:
    slack.scopes |= PRIVATE_SCOPES  # the admin granted the private search scopes (DEEPTHREAD_WORKSPACE_SEARCH=dm)
    set_members(slack, PRIVATE, {"U0ANA"})
    set_members(slack, DM, {"U0ANA"})
    slack.add_user_message(PUBLIC, "Decision: the Gizmo vendor wins on fees", "U0BEN")
    slack.add_user_message(PRIVATE, "Gizmo vendor discount is confidential", "U0CAL")


def final_report(slack: FakeSlack, channel: str, thread: str) -> str:
    replies = wait_for(
        lambda: len(bot_replies_in(slack, channel, thread)) >= 2 and bot_replies_in(slack, channel, thread),
        15,
        "the run's messages",
    )
    return wait_for(
        lambda: (
            "Final" in block_text(slack.message(channel, replies[1].ts))
            and block_text(slack.message(channel, replies[1].ts))
        ),
        40,
        "the final report",
    )


def bot_replies_in(slack: FakeSlack, channel: str, thread: str):
    return [m for m in slack.thread(channel, thread) if m.ts != thread and m.user == "UBOT"]


def test_a_public_report_cites_the_public_message_and_a_dm_report_the_private_ones_too(
    tmp_path: Path, redis_url, fake_slack, fake_model, fake_web
) -> None:
    seed(fake_slack)
    fake_model.policy = CiteWhatOneToolFindsPolicy("search_workspace", {"query": "Gizmo vendor"})
    with deepthread_stack(
        tmp_path,
        redis_url=redis_url,
        slack_url=fake_slack.url,
        model_url=fake_model.url,
        web_url=fake_web.url,
        DEEPTHREAD_WORKSPACE_SEARCH="dm",
    ) as stack:
        tokens = [issue_action_token(fake_slack, "U0ANA") for _ in range(2)]
        mention = app_mention_event(QUESTION, channel="C0TEST", action_token=tokens[0])
        thread = fake_slack.seed_event(mention)
        assert post_event(stack, mention).status_code == 200
        public_report = final_report(fake_slack, "C0TEST", thread)

        direct = message_event(
            QUESTION, channel=DM, channel_type="im", user="U0ANA", action_token=tokens[1]
        )
        dm_thread = fake_slack.seed_event(direct)
        assert post_event(stack, direct).status_code == 200
        dm_report = final_report(fake_slack, DM, dm_thread)

    # The public channel's report: the public decision, linked to its permalink; nothing private,
    # and the private kinds of conversation were never even asked for.
    assert f"/archives/{PUBLIC}/" in public_report and "wins on fees" in public_report, public_report
    assert PRIVATE not in public_report and "confidential" not in public_report
    assert re.search(rf"<https://deepthread-test\.slack\.com/archives/{PUBLIC}/p\d+\|", public_report), (
        "the footnote links to the message's permalink"
    )
    first_search, dm_searches = queries(fake_slack)[0], queries(fake_slack)[1:]
    assert first_search["types"] == ["public_channel"] and first_search["user"] == "U0ANA"

    # The requester's DM: the private channel's message is used and cited too.
    assert f"/archives/{PRIVATE}/" in dm_report and "confidential" in dm_report, dm_report
    assert f"/archives/{PUBLIC}/" in dm_report
    assert [q["types"] for q in dm_searches] == [["public_channel"], ["im", "mpim", "private_channel"]]

    # Both runs' action tokens are still within their life, and no key of Redis holds one readably.
    for token in tokens:
        assert not holding(Redis.from_url(redis_url), token), "an action token is readable in Redis"


def test_a_question_in_a_channel_shared_with_another_organization_cites_no_workspace_result(
    tmp_path: Path, redis_url, fake_slack, fake_model, fake_web
) -> None:
    seed(fake_slack)
    fake_slack.add_conversation(SHARED, name="acme-partners", private=False, ext_shared=True)
    fake_model.policy = CiteWhatOneToolFindsPolicy("search_workspace", {"query": "Gizmo vendor"})
    with deepthread_stack(
        tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url, web_url=fake_web.url
    ) as stack:
        mention = app_mention_event(QUESTION, channel=SHARED, action_token=issue_action_token(fake_slack, "U0ANA"))
        thread = fake_slack.seed_event(mention)
        assert post_event(stack, mention).status_code == 200
        report = final_report(fake_slack, SHARED, thread)

    assert "wins on fees" not in report and "/archives/" not in report, report
    assert queries(fake_slack) == [], "the team's Slack was not even searched for an outside audience"
    assert "search_workspace" not in {t["name"] for t in main_requests(fake_model)[0]["tools"]}


def test_a_request_without_slacks_search_permission_gets_a_clear_result_and_one_notice(
    tmp_path: Path, redis_url, fake_slack, fake_model, fake_web
) -> None:
    seed(fake_slack)
    fake_model.policy = CiteWhatOneToolFindsPolicy("search_workspace", {"query": "Gizmo vendor"})
    with deepthread_stack(
        tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url, web_url=fake_web.url
    ) as stack:
        mention = app_mention_event(QUESTION, channel="C0TEST")  # no action token on the event
        thread = fake_slack.seed_event(mention)
        assert post_event(stack, mention).status_code == 200
        final_report(fake_slack, "C0TEST", thread)
        progress = block_text(bot_replies(fake_slack, thread)[0])
    results = [
        str(r["messages"][-1])
        for r in main_requests(fake_model)
        if "search_workspace could not" in str(r["messages"][-1])
    ]
    assert results and "no action token" in results[0], "the model was told why, and not to retry"
    assert progress.count("Searching the team's Slack is unavailable") == 1, progress
    assert queries(fake_slack) == []
