"""Export end to end (real serve in HTTP mode, a worker, Redis, the fake Slack keeping uploaded files):
`export pdf` and `export docx` in a finished run's thread and the report's Export button upload the
report to the thread as a file that opens (pypdf, python-docx) and holds the title and every source URL;
an unknown format is answered with the ones there are; none of it starts a run."""
from __future__ import annotations

import io

import httpx
from docx import Document
from pypdf import PdfReader
from redis import Redis

from agent import assemble
from jobs import RunStore
from tests.e2e.stack import CHANNEL, assert_cited_report_pinned, bot_replies, post_event, start
from tests.fakes.slack import FakeSlack, message_event, sign
from tests.fakes.slack_events import FORM, block_action_form
from tests.fakes.slack_records import TEAM_ID
from tests.processes import SIGNING_SECRET, Stack, wait_for


def _say(stack: Stack, slack: FakeSlack, thread: str, text: str) -> None:
    reply = message_event(text, channel=CHANNEL, thread_ts=thread, user="U0BEN")
    slack.seed_event(reply)
    assert post_event(stack, reply).status_code == 200


def _uploaded(slack: FakeSlack, suffix: str, count: int = 1):  # noqa: ANN202
    return wait_for(lambda: len(f := [x for x in slack.files() if x.filename.endswith(suffix) and x.completed]) >= count
                    and f, 30, f"the {suffix} file")[count - 1]


def test_export_uploads_the_report_as_a_file_that_opens_with_its_title_and_every_source(
        stack: Stack, fake_slack: FakeSlack, fake_web, redis_url: str) -> None:
    thread, _, report_ts = start(stack, fake_slack)
    assert_cited_report_pinned(fake_slack, thread, fake_web.url)
    store = RunStore(Redis.from_url(redis_url))
    [run_id] = store.thread_run_ids(TEAM_ID, CHANNEL, thread)
    state = store.get(run_id)
    urls = {note.source.url for note in assemble(state.summary, state.sections, state.sources).footnotes}
    assert urls, "the report cites sources"
    report = fake_slack.message(CHANNEL, report_ts)
    buttons = [e["action_id"] for b in report.blocks if b.get("block_id") == "report_export" for e in b["elements"]]
    assert buttons == ["report_export_pdf", "report_export_docx", "report_export_md"]

    _say(stack, fake_slack, thread, "export pdf")
    pdf = _uploaded(fake_slack, ".pdf")
    assert (pdf.channel_id, pdf.thread_ts) == (CHANNEL, thread) and "exported for <@U0BEN>" in pdf.initial_comment
    text = "".join("".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf.content)).pages).split())
    assert "".join(state.run.question.split()) in text and all(url in text for url in urls)

    body = block_action_form("report_export_docx", user="U0BEN", channel=CHANNEL, message_ts=report_ts)
    pressed = httpx.post(stack.events_url, content=body, headers={**sign(SIGNING_SECRET, body), "Content-Type": FORM})
    assert pressed.status_code == 200
    docx = Document(io.BytesIO(_uploaded(fake_slack, ".docx").content))
    words = "".join("\n".join(p.text for p in docx.paragraphs).split())
    assert "".join(state.run.question.split()) in words and all(url in words for url in urls)

    _say(stack, fake_slack, thread, "export")
    assert _uploaded(fake_slack, ".md").content.decode().startswith(f"# {state.run.question}")
    _say(stack, fake_slack, thread, "export odt")
    wait_for(lambda: [m for m in bot_replies(fake_slack, thread) if "not one of those" in m.text], 10, "the advice")
    assert store.thread_run_ids(TEAM_ID, CHANNEL, thread) == [run_id], "exports start no run"
