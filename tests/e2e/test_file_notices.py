"""A file the bot cannot open is said in its thread even when the model never tries to read it:
real serve and worker, the fake Slack answering files.info with Slack's refusal."""
from __future__ import annotations

from tests.e2e.stack import CHANNEL, block_text, bot_replies, post_event
from tests.fakes.slack import FakeSlack, app_mention_event
from tests.fakes.slack_files import attach_file
from tests.processes import Stack, wait_for


def test_a_mention_carrying_a_file_slack_says_is_not_found_is_told_in_its_thread(
        stack: Stack, fake_slack: FakeSlack, fake_model) -> None:
    envelope = app_mention_event("What did the board decide?", channel=CHANNEL)
    thread = fake_slack.seed_event(envelope)
    # Shared from where the bot is not a member: the message carries only the id, files.info answers file_not_found.
    hidden = attach_file(fake_slack, CHANNEL, thread, "board-minutes-q3.docx", b"minutes", not_member=True, thin=True)
    assert post_event(stack, envelope).status_code == 200  # the default policy answers without reading files

    wait_for(lambda: any("Done" in block_text(m) for m in bot_replies(fake_slack, thread)), 60, "the run to finish")
    told = wait_for(lambda: [m for m in bot_replies(fake_slack, thread) if m.user == "UBOT" and "I can't open" in m.text],
                    10, "the thread told about the file")
    assert len(told) == 1 and hidden in told[0].text and "Share it again in this thread" in told[0].text, told
