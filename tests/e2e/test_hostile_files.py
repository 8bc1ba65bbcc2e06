"""Hostile files shared in a thread, end to end (real serve, a real RQ worker, the fake Slack serving
the files): the run reads around them, finishes with its report, and the worker's peak memory
stays within 500 MB of an ordinary run's with ordinary files of the same sizes."""
from __future__ import annotations

from pathlib import Path

from tests.e2e.stack import CHANNEL, block_text, bot_replies, burst_worker_peak_kb, post_event, serve_only, stack_environment
from tests.fakes.file_reader import FilesPolicy
from tests.fakes.hostile_files import HOSTILE
from tests.fakes.slack import FakeSlack, app_mention_event
from tests.fakes.slack_files import share_file
from tests.processes import wait_for

FEES = b"Fund,Expense ratio,As of\nVTI,0.03%,2024-06-30\nSCHB,0.03%,2024-03-31\n"
PEAK_MARGIN_KB = 500 * 1024


def _research(tmp: Path, env: dict[str, str], slack: FakeSlack, model, files: list[tuple[str, bytes]]) -> tuple[str, int]:
    envelope = app_mention_event("Check SCHB's 2024 fee in the files I attach", channel=CHANNEL)
    thread = slack.seed_event(envelope)
    for name, data in files:
        share_file(slack, CHANNEL, thread, name, data)
    share_file(slack, CHANNEL, thread, "fees.csv", FEES, text="and our fee sheet")
    model.policy = FilesPolicy()
    with serve_only(env, tmp / "serve.log") as (_, stack):
        assert post_event(stack, envelope).status_code == 200
        replies = wait_for(lambda: len([m for m in bot_replies(slack, thread) if m.user == "UBOT"]) >= 2
                           and [m for m in bot_replies(slack, thread) if m.user == "UBOT"], 20, "the run's messages")
        peak = burst_worker_peak_kb(env, tmp / "worker.log")
        report = wait_for(lambda: "Final" in block_text(slack.message(CHANNEL, replies[1].ts))
                          and block_text(slack.message(CHANNEL, replies[1].ts)), 30, "the final report")
    return report, peak


def test_a_thread_of_hostile_files_gets_its_report_and_the_worker_s_memory_stays_bounded(
        tmp_path: Path, redis_url: str, fake_slack: FakeSlack, fake_model, fake_web) -> None:
    env = stack_environment(redis_url, fake_slack, fake_model, fake_web)
    hostile = [(spec.name, spec.build()) for spec in HOSTILE]
    ordinary = [(spec.name, spec.ordinary(len(data))) for spec, (_, data) in zip(HOSTILE, hostile, strict=True)]
    (tmp_path / "ordinary").mkdir()
    (tmp_path / "hostile").mkdir()
    _, ordinary_peak = _research(tmp_path / "ordinary", env, fake_slack, fake_model, ordinary)
    ordinary_requests = list(fake_model.requests)
    assert not [r for r in ordinary_requests if "Could not read this file" in str(r["messages"][-1])], \
        "every ordinary file is read"
    report, hostile_peak = _research(tmp_path / "hostile", env, fake_slack, fake_model, hostile)

    assert "file: fees.csv, row " in report and "0.03" in report, "the run read around them and cited the readable file"
    refusals = [r for r in fake_model.requests[len(ordinary_requests):] if "Could not read this file" in str(r["messages"][-1])]
    assert refusals, "each hostile file came back to the model as a tool result"
    said = str(refusals[0]["messages"][-1])
    for spec in HOSTILE:
        if spec.name != "wide.csv":  # read within its column cap
            assert f"{spec.name}: " in said, spec.name
    assert hostile_peak <= ordinary_peak + PEAK_MARGIN_KB, (hostile_peak, ordinary_peak)
