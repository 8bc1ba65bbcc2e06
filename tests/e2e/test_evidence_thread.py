"""`source N` and `sources` in the thread: the evidence behind a footnote, end to end."""
from __future__ import annotations

import re

from tests.e2e.stack import CHANNEL, block_text, bot_replies, post_event, report_text, start
from tests.fakes.slack import FakeSlack, message_event
from tests.processes import Stack, wait_for


def ask_in_thread(stack: Stack, slack: FakeSlack, thread: str, text: str) -> str:
    before = len(bot_replies(slack, thread))
    assert post_event(stack, message_event(text, channel=CHANNEL, thread_ts=thread, user="U0BEN")).status_code == 200
    replies = wait_for(lambda: len(bot_replies(slack, thread)) > before and bot_replies(slack, thread), 15,
                       f"the answer to {text!r}")
    return replies[-1].text


def test_source_n_replies_with_the_full_passage_its_page_context_and_fetch_time(stack, fake_slack) -> None:
    thread, _, report_ts = start(stack, fake_slack)
    report = wait_for(lambda: "Final" in report_text(fake_slack, report_ts) and report_text(fake_slack, report_ts), 40,
                      "the final report")
    first_source = re.search(r"^\[1\] .*?“(.+?)…?” · fetched", report, re.M)
    assert first_source, report

    answer = ask_in_thread(stack, fake_slack, thread, "source 1")
    assert answer.startswith("*[1]*") and "Fetched 20" in answer and "page excerpt, verified" in answer
    assert "*The passage:*" in answer and first_source.group(1)[:40] in answer
    assert "*Around it on the page:*" in answer and "Page text SHA-256" in answer

    listing = ask_in_thread(stack, fake_slack, thread, "sources")
    assert listing.startswith("*Sources cited in the report*") and "\n[1] " in listing

    missing = ask_in_thread(stack, fake_slack, thread, "source 99")
    assert "no footnote 99" in missing
    assert len([m for m in bot_replies(fake_slack, thread) if "Researching" in block_text(m)]) == 0, \
        "the commands started no continuation"
