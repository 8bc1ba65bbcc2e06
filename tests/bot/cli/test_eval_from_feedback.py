"""`deepthread eval --from-feedback`: the 👎-rated questions of public channels, with the team's
notes and the report's sources, written as a question set `deepthread eval` loads; private channels'
and DMs' questions never leave them; `--since` keeps only later verdicts."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from redis import Redis

from agent import SectionWritten, Source, SourceAdded
from bot.cli.evaluate import load_questions
from jobs import Run, RunStore, keys
from jobs.records.feedback import FeedbackStore, Verdict
from tests.processes import DEEPTHREAD, ROOT, environment

FETCHED = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)


def _rated_run(redis: Redis, question: str, channel: str) -> str:
    store = RunStore(redis)
    state = store.create(Run(channel=channel, thread_ts="1700000000.000001", requester="U0ANA", question=question,
                             team="T0TEST"))
    source = Source(marker="s1", url=f"https://example.org/{channel}", title="Fact sheet", passage="0.03%",
                    retrieved_at=FETCHED)
    state = store.apply(state, SourceAdded(source=source))
    store.apply(state, SectionWritten(section_id="a", title="Fees", body="VTI charges 0.03% [s1]."))
    return state.run.id


def _export(redis_url: str, out: Path, *extra: str) -> list[dict]:
    done = subprocess.run(DEEPTHREAD + ["eval", "--from-feedback", str(out), *extra], env=environment(REDIS_URL=redis_url),
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "run them with: deepthread eval" in done.stdout
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_rated_down_public_questions_are_exported_as_a_runnable_set(redis: Redis, redis_url: str,
                                                                    tmp_path: Path) -> None:
    feedback = FeedbackStore(redis)
    public = _rated_run(redis, "What does VTI charge?", "C0PUBLIC")
    liked = _rated_run(redis, "What does ITOT charge?", "C0PUBLIC")
    private = _rated_run(redis, "Our private plan's fees?", "C0SECRET")
    direct = _rated_run(redis, "My own fund's fees?", "D0ANA")
    for run_id, where in ((public, "public"), (private, "private"), (direct, "direct")):
        assert feedback.record(run_id, "U0ANA", "unhelpful", {"a": 0}, where)
        feedback.note(run_id, "U0ANA", "wrong_figure", "It is 0.02% now")
    feedback.record(public, "U0BEN", "unhelpful", {"a": 0}, "public")
    feedback.record(liked, "U0ANA", "helpful", {"a": 0}, "public")

    out = tmp_path / "feedback.jsonl"
    rows = _export(redis_url, out)
    assert [r["question"] for r in rows] == ["What does VTI charge?"], "only the public 👎; never a private or DM one"
    assert rows[0]["notes"] == ["A wrong figure: It is 0.02% now", "rated down, no note"]
    assert rows[0]["sources"] == ["https://example.org/C0PUBLIC"]
    [question] = load_questions(out)  # the file is a question set `deepthread eval` runs
    assert question.question == "What does VTI charge?" and question.kind == "rated down"


def test_since_keeps_only_later_verdicts(redis: Redis, redis_url: str, tmp_path: Path) -> None:
    run_id = _rated_run(redis, "What does SCHB charge?", "C0PUBLIC")
    old = Verdict(user="U0ANA", verdict="unhelpful", at=datetime(2026, 10, 1, tzinfo=UTC), where="public")
    redis.hset(keys.feedback(run_id), "U0ANA", old.model_dump_json())
    assert _export(redis_url, tmp_path / "all.jsonl") != []
    assert _export(redis_url, tmp_path / "recent.jsonl", "--since", "2026-11-01") == []


def test_the_export_runs_as_an_eval_set(redis: Redis, redis_url: str, tmp_path: Path, fake_model, fake_web) -> None:
    from tests.bot.cli.test_eval import EvalResearchPolicy, JudgePolicy, by_id, run_eval, scorecard, with_judge

    run_id = _rated_run(redis, "What is the expense ratio of VTI?", "C0PUBLIC")
    feedback = FeedbackStore(redis)
    feedback.record(run_id, "U0ANA", "unhelpful", {"a": 0}, "public")
    feedback.note(run_id, "U0ANA", "outdated", "an older fact sheet")
    exported = tmp_path / "feedback.jsonl"
    [row] = _export(redis_url, exported)

    fake_model.policy = with_judge(EvalResearchPolicy(), JudgePolicy())
    out = tmp_path / "eval"
    done = run_eval(fake_model, fake_web, str(exported), "--out", str(out))
    assert done.returncode == 0, done.stderr
    [result] = by_id(scorecard(out)).values()
    assert result["status"] == "completed" and result["requests"] > 0, result
    assert (out / result["report_file"]).read_text().startswith("# What is the expense ratio of VTI?")
    assert row["id"] in by_id(scorecard(out))
