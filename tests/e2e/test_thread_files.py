"""Files shared in a Slack thread, end to end: real serve and worker, the fake Slack serving
files.info, conversations.replies and the private download with its auth rules."""
from __future__ import annotations

import re

from tests.e2e.stack import CHANNEL, block_text, bot_replies, post_event
from tests.fakes.file_reader import FilesPolicy
from tests.fakes.pdf import make_pdf
from tests.fakes.slack import FakeSlack, app_mention_event, message_event
from tests.fakes.slack_files import share_file
from tests.processes import Stack, wait_for

PDF = make_pdf([["Vendor comparison 2024.", "This report compares three index fund providers."],
                ["The SCHB expense ratio was 0.03 percent in 2024.",
                 "Schwab lowered the SCHB expense ratio in March 2024."]], title="Vendor report")
CSV = b"Fund,Expense ratio,As of\nVTI,0.03%,2024-06-30\nSCHB,0.03%,2024-03-31\n"



def test_a_question_with_an_attached_pdf_and_spreadsheet_gets_a_report_citing_both(
        stack: Stack, fake_slack: FakeSlack, fake_model) -> None:
    envelope = app_mention_event("Check SCHB's 2024 fee in the files I attach", channel=CHANNEL)
    thread = fake_slack.seed_event(envelope)
    share_file(fake_slack, CHANNEL, thread, "vendor-report.pdf", PDF, text="the vendor report")
    share_file(fake_slack, CHANNEL, thread, "fees.csv", CSV, text="and our fee sheet")
    late: list[str] = []
    fake_model.policy = FilesPolicy(
        on_turn_two=lambda: late.append(share_file(fake_slack, CHANNEL, thread, "late-fees.csv", CSV)),
        search_after=True)
    fake_model.delay = 0.3  # turns take a moment, as real ones do: the thread is re-read every few seconds
    assert post_event(stack, envelope).status_code == 200

    replies = wait_for(lambda: len([m for m in bot_replies(fake_slack, thread) if m.user == "UBOT"]) >= 2
                       and [m for m in bot_replies(fake_slack, thread) if m.user == "UBOT"], 15, "the run's messages")
    report = wait_for(lambda: "Final" in block_text(fake_slack.message(CHANNEL, replies[1].ts))
                      and block_text(fake_slack.message(CHANNEL, replies[1].ts)), 60, "the final report")
    sources = [line for line in report.splitlines() if re.match(r"^\[\d+\] ", line)]
    assert any("file: vendor-report.pdf, page 2" in line for line in sources), report
    assert any("file: fees.csv, row " in line for line in sources), report
    assert "0.03" in report and "SCHB" in report

    downloads = [p for m, p in fake_slack.calls if m == "files.info"]
    assert downloads, "files were looked up through Slack's files.info with the bot token"
    note = [r for r in fake_model.requests if "New in the thread since your last turn" in str(r["messages"][-1])]
    assert late and note and "late-fees.csv" in str(note[0]["messages"][-1]), "a file shared mid-run reached the loop"


NOTICE = ("I can't open board-minutes-q3.docx: it was deleted, or shared where I'm not a member. "
          "Share it again in this thread.")


def test_a_file_the_bot_cannot_open_is_said_in_the_thread_once_in_words_a_person_can_act_on(
        stack: Stack, fake_slack: FakeSlack, fake_model) -> None:
    envelope = app_mention_event("What did the board decide, and what does SCHB cost?", channel=CHANNEL)
    thread = fake_slack.seed_event(envelope)
    share_file(fake_slack, CHANNEL, thread, "fees.csv", CSV, text="our fee sheet")
    hidden = share_file(fake_slack, CHANNEL, thread, "board-minutes-q3.docx", b"minutes", not_member=True,
                        text="and the board minutes")
    fake_model.policy = FilesPolicy()
    assert post_event(stack, envelope).status_code == 200

    def told() -> list:
        return [m for m in bot_replies(fake_slack, thread) if m.user == "UBOT" and m.text == NOTICE]

    def done(runs: int) -> bool:
        return len([m for m in bot_replies(fake_slack, thread) if "Done" in block_text(m)]) == runs

    wait_for(lambda: done(1), 60, "the first run to finish")
    wait_for(told, 10, "the thread told about the file")
    first_asks = [c for c in fake_slack.calls_of("files.info") if c.get("file") == hidden]
    assert len(first_asks) == 1, "files.info asked once for the missing file"

    fake_model.policy = FilesPolicy()  # the continuation reads the thread's files again, and fails again
    reply = message_event("Try the minutes once more", channel=CHANNEL, thread_ts=thread, user="U0ANA")
    assert post_event(stack, reply).status_code == 200
    wait_for(lambda: done(2), 60, "the continuation to finish")
    assert len(told()) == 1, "said once in the thread, not once per run or per attempt"
    assert any("share it again in this thread" in str(r["messages"]) for r in fake_model.requests), \
        "the model was told what to do as well"
