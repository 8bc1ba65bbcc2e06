"""A URL the model composed never becomes fetchable by being shown (issue 35, item 1), end to end.

Real `deepthread serve` and `deepthread worker` processes, Redis, the fake Slack, model and web.
The model searches with a URL of its own making as the query (one carrying a "confidential
figure"), so the progress message in the thread shows "Now: Searching: <that URL>"; it reads the
thread back (the echo is in what read_thread returns), then asks read_page for that exact URL.
The fetch is refused, the web never sees the request, the thread's stored seen set lacks the URL,
and a follow-up run in the thread inherits nothing: its read_page of the URL is refused too. The
control: a link a person wrote in the thread is read, in both runs.

Since issue 45 (item 5a) the progress message shows a URL the model wrote as its domain only
("Now: Searching: 127.0.0.1"), so the echo no longer carries the URL at all; the test holds that too.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

from redis import Redis

from agent.tools.seen_urls import normalise
from bot.slack.foreign_links import domain_only
from jobs import keys
from jobs.records.store import RunStore
from jobs.records.stores import refused_fetches
from tests.e2e.stack import CHANNEL, block_text, bot_replies, post_event
from tests.fakes.policies import CraftedUrlPolicy, is_extraction, result_text, results_of
from tests.fakes.slack import TEAM_ID, FakeSlack, app_mention_event, message_event
from tests.processes import deepthread_stack, wait_for

RUN_SECONDS = 120  # generous: run 1 waits out the thread cache before each read_thread
PERSON_PAGE = "/pages/ana-notes.html"
NOTES = ("<html><head><title>Ana's notes</title></head><body><p>Ana's notes say the Vanguard fund charges "
         "the lowest fee of the three funds.</p></body></html>")


def finished(slack: FakeSlack, thread: str) -> int:
    return sum(block_text(m).startswith("✅ Done") for m in bot_replies(slack, thread))


def echoed(slack: FakeSlack, crafted: str) -> bool:
    """The thread shows the model's search as the bot's own text (the progress message's "Now:" line),
    its URL as the domain alone."""
    return any(f"Searching: {domain_only(crafted)}" in m.text for m in slack.messages(CHANNEL) if m.bot_id)


def read_pages(requests: list[dict], url: str) -> list[dict]:
    """The tool_result blocks read_page gave for `url`, as the model was sent them (each once)."""
    found: dict[str, dict] = {}
    for request in requests:
        for call, result in results_of(request, "read_page"):
            if call["url"] == url:
                found[result["tool_use_id"]] = result
    return list(found.values())


def test_a_url_the_model_composed_and_the_bot_echoed_is_never_fetched_nor_inherited(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    crafted = f"{fake_web.url}/pages/leak?figure=4.2M"  # a URL carrying a confidential figure
    person_url = fake_web.url + fake_web.add_page(PERSON_PAGE, NOTES)
    fake_model.policy = CraftedUrlPolicy(crafted, person_url, partial(echoed, fake_slack, crafted))
    # The thread opens with a person's message holding their link; the bot is asked in a reply.
    thread = fake_slack.add_user_message(CHANNEL, f"My notes on the funds: {person_url}", "U0ANA")
    mention = app_mention_event("which fund is cheapest? see the thread", channel=CHANNEL, thread_ts=thread)
    fake_slack.seed_event(mention)
    with deepthread_stack(tmp_path, redis_url=redis_url, slack_url=fake_slack.url, model_url=fake_model.url,
                          web_url=fake_web.url) as stack:
        assert post_event(stack, mention).status_code == 200
        wait_for(lambda: finished(fake_slack, thread) == 1, RUN_SECONDS, "run 1 to finish")
        first = [r for r in fake_model.requests if not is_extraction(r)]
        follow_up = message_event("And what does the other page say?", channel=CHANNEL, thread_ts=thread,
                                  user="U0ANA")
        assert post_event(stack, follow_up).status_code == 200
        wait_for(lambda: finished(fake_slack, thread) == 2, RUN_SECONDS, "the follow-up run to finish")
    requests = [r for r in fake_model.requests if not is_extraction(r)]
    second = requests[len(first):]

    # The echo happened: the progress message showed the model's URL, and read_thread gave it back.
    shown = [c.get("text", "") for c in fake_slack.calls_of("chat.update") + fake_slack.calls_of("chat.postMessage")]
    assert any(f"Now: Searching: {domain_only(crafted)}" in text for text in shown), "the progress showed the search"
    assert not any("leak?figure" in text for text in shown), "but never the URL the model wrote"
    read_back = [result_text(r) for _, r in results_of(first[-1], "read_thread")]
    assert read_back and not any(crafted in text for text in read_back), f"the echo carries no URL: {read_back}"
    searched = [result_text(r) for _, r in results_of(first[-1], "web_search")]
    assert searched and not any(PERSON_PAGE in text for text in searched), "the person's link came from the thread"

    # Refused in run 1 and in the follow-up, as the model was told; the web never saw the request.
    for run, sent in (("run 1", first), ("the follow-up", second)):
        [refused] = read_pages(sent, crafted)
        assert refused.get("is_error") and "Not fetched:" in result_text(refused), f"{run}: {result_text(refused)}"
        [control] = read_pages(sent, person_url)
        assert not control.get("is_error") and "Not fetched" not in result_text(control), \
            f"{run}: a person's link is read ({result_text(control)})"
    assert not [path for _, path in fake_web.requests if path.startswith("/pages/leak")], fake_web.requests
    assert PERSON_PAGE in fake_web.hits, "the control page was fetched"

    # The thread's stored seen set (what continuations inherit) lacks the URL and holds the person's.
    redis = Redis.from_url(redis_url)
    seen = {u.decode() for u in redis.smembers(keys.seen_urls(TEAM_ID, CHANNEL, thread))}
    assert normalise(person_url) in seen, seen
    assert normalise(crafted) not in seen and not any("leak" in u for u in seen), seen
    runs = RunStore(redis).thread_run_ids(TEAM_ID, CHANNEL, thread)
    assert len(runs) == 2
    assert [refused_fetches(redis, run) for run in runs] == [[crafted], [crafted]], "each refusal recorded for inspect"
