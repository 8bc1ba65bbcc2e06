"""`deepthread eval` end to end: real research runs against the fake Messages API and fake web,
graded by a scripted judge behind the same fake, scorecard and exports read back from disk."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent import Section, Source
from bot.cli.evaluate.claims import cited_sentences
from bot.cli.evaluate.judge import _fill, _json_object
from bot.cli.evaluate.markdown import scorecard_markdown
from bot.cli.evaluate.scorecard import QuestionResult, Rubric, Scorecard, totals_of
from bot.cli.main import main
from jobs import Run, RunState
from tests.fakes.anthropic import FakeAnthropic, Reply, text_reply, tool_reply
from tests.fakes.judge import REFERENCE_SCORE, REPORT_SCORE, JudgePolicy, with_judge
from tests.fakes.policies import URL, _blocks, _text, extract, is_extraction, question_of
from tests.processes import DEEPTHREAD, OUR_VARIABLES, ROOT, environment

EXCERPT = re.compile(r'(\[s\d+\]) "([^"]+)"')
MARKER = re.compile(r"\[s\d+\]")
UNSUPPORTED = "Astronauts founded this company on the Moon"
WRONG_FIGURE = "The fee is 12345.6% a year"
QUESTIONS: list[dict[str, Any]] = [
    {"id": "honest", "kind": "current figure", "question": "What is the expense ratio of VTI?",
     "facts": ["The expense ratio of VTI is 0.03%", "VTI was launched from a lunar base"],
     "reference": "VTI charges an expense ratio of 0.03% a year [1]."},
    {"id": "misattributed", "kind": "one fact", "question": "Who founded the company behind VTI?"},
    {"id": "wrong-figure", "kind": "one fact", "question": "What fee does VTI charge in percent?"},
]


class EvalResearchPolicy:
    """Three scripted researchers, chosen by the question:
    - honest: searches, reads the top page, quotes its excerpts in a section and in the summary;
    - misattributed: cites a search snippet for a sentence the snippet does not state;
    - wrong figure: writes a figure its passage does not state, and sends it again when refused."""

    def __call__(self, request: dict[str, Any]) -> Reply:
        if is_extraction(request):
            return extract(request)
        messages = request["messages"]
        question = question_of(request)
        forced = (request.get("tool_choice") or {}).get("type") == "none" or "FINAL TURN" in _text(messages[-1])
        previous = [b["name"] for b in _blocks(messages[-2]) if b["type"] == "tool_use"] if len(messages) > 1 else []
        seen = [m for msg in messages if msg["role"] == "user" for m in MARKER.findall(_text(msg))]
        if forced or previous == ["write_section"] and "section_id:" in _text(messages[-1]):
            return self.final(question, messages)
        if not previous:
            return tool_reply(("web_search", {"query": "expense ratio VTI fees"}))
        if "founded" in question:
            if previous == ["web_search"] and seen:
                return tool_reply(("write_section", {"title": "Background", "body": f"{UNSUPPORTED} {seen[0]}."}))
        elif "fee does" in question:
            if seen:
                return tool_reply(("write_section", {"title": "Fees", "body": f"{WRONG_FIGURE} {seen[0]}."}))
        elif previous == ["web_search"]:
            urls = URL.findall(_text(messages[-1]))
            return tool_reply(("read_page", {"url": urls[0], "goal": question}))
        elif previous == ["read_page"]:
            excerpts = EXCERPT.findall(_text(messages[-1]))[:3]
            body = "\n".join(f"- {text} {marker}" for marker, text in excerpts)
            return tool_reply(("write_section", {"title": "Expense ratio", "body": body}))
        return self.final(question, messages)

    @staticmethod
    def final(question: str, messages: list[dict[str, Any]]) -> Reply:
        excerpts = [e for m in messages if m["role"] == "user" for e in EXCERPT.findall(_text(m))]
        if "founded" in question or "fee does" in question or not excerpts:
            return text_reply("<summary>See the section above.</summary>")
        marker, text = excerpts[0]
        return text_reply(f"<summary>{text} {marker}</summary>")


@pytest.fixture
def questions_file(tmp_path: Path) -> Path:
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return path


def run_eval(fake_model: FakeAnthropic, fake_web: Any, *args: str) -> subprocess.CompletedProcess[str]:
    url: str = fake_model.url  # type: ignore[attr-defined]  # set by the fixture
    env = environment(ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=url, DEEPTHREAD_SEARCH="searxng",
                      SEARXNG_URL=fake_web.url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1")
    return subprocess.run(DEEPTHREAD + ["eval", *args], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=240, check=False)


def scorecard(out: Path) -> dict[str, Any]:
    return json.loads((out / "scorecard.json").read_text())


def by_id(card: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in card["results"]}


def test_eval_grades_citations_facts_flags_and_rubric_and_writes_the_scorecard(
        tmp_path: Path, questions_file: Path, fake_model: FakeAnthropic, fake_web: Any) -> None:
    judge = JudgePolicy()
    fake_model.policy = with_judge(EvalResearchPolicy(), judge)
    out, bench = tmp_path / "eval", tmp_path / "drb.jsonl"
    done = run_eval(fake_model, fake_web, str(questions_file), "--out", str(out), "--deepresearch-bench", str(bench))
    assert done.returncode == 0, done.stderr
    results = by_id(scorecard(out))

    honest = results["honest"]
    assert honest["status"] == "completed" and len(honest["sentences"]) >= 2
    assert {s["verdict"] for s in honest["sentences"]} == {"supported"} and honest["citation_support"] == 1.0
    assert [f["verdict"] for f in honest["facts"]] == ["stated", "missing"]
    assert honest["rubric"]["relative"] == pytest.approx(REPORT_SCORE / (REPORT_SCORE + REFERENCE_SCORE), abs=1e-3)
    assert honest["flags"] == [] and honest["figures_checked"] > 0
    assert honest["requests"] > 0 and honest["cost_usd"] > 0 and honest["judge_cost_usd"] > 0 and honest["seconds"] > 0

    # A sentence citing a passage that does not state it is counted as not supported.
    [misattributed] = results["misattributed"]["sentences"]
    assert misattributed["verdict"] == "not_supported" and misattributed["sentence"].startswith(UNSUPPORTED)
    assert results["misattributed"]["citation_support"] == 0.0

    # A wrong figure the model insisted on is flagged by the figure check, and not counted as supported.
    wrong = results["wrong-figure"]
    assert [f["figure"] for f in wrong["flags"]] == ["12345.6%"]
    assert [s["verdict"] for s in wrong["sentences"]] != ["supported"]

    totals = scorecard(out)["totals"]
    cited = sum(len(r["sentences"]) for r in results.values())
    assert totals["cited_sentences"] == cited and totals["supported"] == len(honest["sentences"])
    assert totals["citation_support"] == pytest.approx(totals["supported"] / cited)
    assert totals["figures_flagged"] == 1 and totals["facts"] == 2 and totals["facts_stated"] == 1
    assert judge.kinds.count("rubric") == 1 and judge.kinds.count("facts") == 1  # only where a reference / facts exist

    markdown = (out / "scorecard.md").read_text()
    support = f"**{totals['supported'] / cited:.0%}** of {cited} cited sentences"
    assert support in markdown
    assert UNSUPPORTED in markdown and "_not supported_" in markdown and "Partial" not in markdown
    assert "12345.6%" in markdown and "not found in [s" in markdown
    assert "VTI was launched from a lunar base" in markdown  # the fact the report does not state
    report = (out / honest["report_file"]).read_text()
    assert report.startswith("# What is the expense ratio of VTI?") and "## Sources" in report

    lines = [json.loads(line) for line in bench.read_text().splitlines()]
    assert [(line["id"], line["prompt"]) for line in lines] == [(q["id"], q["question"]) for q in QUESTIONS]
    assert lines[0]["article"] == report
    assert re.search(r"\[#{20}\] 3/3", done.stderr), "the progress bar reaches the end"
    assert "Citation support" in done.stdout and str(out / "scorecard.md") in done.stdout


def test_baseline_adds_a_side_by_side_comparison_and_concurrency_one_runs_one_at_a_time(
        tmp_path: Path, questions_file: Path, fake_model: FakeAnthropic, fake_web: Any) -> None:
    fake_model.policy = with_judge(EvalResearchPolicy(), JudgePolicy())
    first, second = tmp_path / "first", tmp_path / "second"
    assert run_eval(fake_model, fake_web, str(questions_file), "--out", str(first),
                    "--only", "honest,misattributed").returncode == 0
    done = run_eval(fake_model, fake_web, str(questions_file), "--out", str(second), "--baseline", str(first),
                    "--only", "honest,wrong-figure", "--concurrency", "1")
    assert done.returncode == 0, done.stderr
    markdown = (second / "scorecard.md").read_text()
    comparison = markdown.split("## Compared with the baseline", 1)[1]
    assert f"`{first}`" in comparison
    before, now = scorecard(first)["totals"], scorecard(second)["totals"]
    assert (f"| Citation support | {before['citation_support']:.0%} of {before['cited_sentences']} | "
            f"{now['citation_support']:.0%} of {now['cited_sentences']} |") in comparison
    assert re.search(r"\| honest \| 100% → 100% \| 1 → 1 of 2 \|", comparison)
    assert "only now: wrong-figure; only in the baseline: misattributed" in comparison
    running = [line.split("now: ", 1)[1] for line in done.stderr.splitlines() if "now: " in line]
    assert running and all("," not in now for now in running), "--concurrency 1 never runs two questions at once"


def test_a_judge_that_answers_prose_is_asked_again_then_reported_not_guessed(
        tmp_path: Path, questions_file: Path, fake_model: FakeAnthropic, fake_web: Any) -> None:
    judge = JudgePolicy(invalid_answers=1)
    fake_model.policy = with_judge(EvalResearchPolicy(), judge)
    retried = run_eval(fake_model, fake_web, str(questions_file), "--out", str(tmp_path / "a"), "--only", "honest")
    assert retried.returncode == 0, retried.stderr
    assert by_id(scorecard(tmp_path / "a"))["honest"]["citation_support"] == 1.0
    asked_again = [r for r in fake_model.requests if len(r["messages"]) == 3
                   and "could not be used: the answer holds no JSON object" in _text(r["messages"][2])]
    assert len(asked_again) == 1

    judge.invalid_answers = 100
    failed = run_eval(fake_model, fake_web, str(questions_file), "--out", str(tmp_path / "b"), "--only", "honest")
    assert failed.returncode == 1
    honest = by_id(scorecard(tmp_path / "b"))["honest"]
    assert honest["sentences"] == [] and honest["citation_support"] is None
    assert "citation support: the judge's answer did not fit the expected JSON twice" in honest["judge_error"]
    assert honest["ungraded"] == ["citations", "facts", "rubric"]
    markdown = (tmp_path / "b" / "scorecard.md").read_text()
    assert "| – (not graded) | not graded |" in markdown and "not fully graded" in markdown


def test_a_run_the_model_service_refuses_is_reported_with_its_reason(
        tmp_path: Path, questions_file: Path, fake_model: FakeAnthropic, fake_web: Any) -> None:
    fake_model.fail_always(401)
    done = run_eval(fake_model, fake_web, str(questions_file), "--out", str(tmp_path / "out"), "--only", "misattributed")
    assert done.returncode == 1
    [result] = scorecard(tmp_path / "out")["results"]
    assert result["status"] == "failed" and "rejected the API key" in result["reason"]
    assert "rejected the API key" in (tmp_path / "out" / "scorecard.md").read_text()


def test_bad_inputs_are_refused_before_any_model_request(tmp_path: Path, questions_file: Path,
                                                         fake_model: FakeAnthropic, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OUR_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_model.url)  # type: ignore[attr-defined]
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "question": "fine"}\n{"id": "b"}\n')
    assert main(["eval", str(broken)]) == 2
    assert f"{broken}:2: question: Field required" in capsys.readouterr().err
    assert main(["eval", str(questions_file), "--only", "nope"]) == 2
    assert "--only names ids not in" in capsys.readouterr().err
    assert main(["eval", str(questions_file), "--concurrency", "0"]) == 2
    assert "--concurrency must be at least 1" in capsys.readouterr().err
    assert main(["eval", str(questions_file), "--baseline", str(tmp_path / "missing"),
                 "--out", str(tmp_path / "out")]) == 2
    assert "give --baseline the output directory of an earlier" in capsys.readouterr().err
    assert fake_model.requests == []


def test_the_shipped_question_set_loads_and_covers_every_kind_the_issue_names() -> None:
    from bot.cli.evaluate import SHIPPED_QUESTIONS, load_questions

    questions = load_questions(SHIPPED_QUESTIONS)
    assert 10 <= len(questions) <= 20 and all(q.facts for q in questions)
    assert {"one fact", "current figure", "comparison", "survey", "contested claim", "not established"} <= {
        q.kind for q in questions}
    assert sum(1 for q in questions if q.reference) >= 2


def test_deepresearch_bench_queries_load_as_they_are(tmp_path: Path) -> None:
    from bot.cli.evaluate import load_questions

    path = tmp_path / "query.jsonl"
    path.write_text(json.dumps({"id": 51, "topic": "Finance & Business", "language": "en",
                                "prompt": "Compare the fee structures of total-market ETFs."}) + "\n")
    [question] = load_questions(path)
    assert (question.id, question.question, question.kind) == (
        "51", "Compare the fee structures of total-market ETFs.", "Finance & Business")


def test_cited_sentences_keep_their_known_markers_and_skip_uncited_text() -> None:
    source = Source(marker="s1", url="https://example.com", title="E", passage="VTI charges 0.03%.")
    state = RunState(run=Run(question="q"), summary="VTI charges 0.03% [s1]. Nothing cited here.",
                     sources={"s1": source},
                     sections=[Section(section_id="a", title="Fees", body="- ITOT too [s1] [s9]\n- no marker")])
    assert [(c.where, c.markers) for c in cited_sentences(state)] == [("Summary", ["s1"]), ("Fees", ["s1"])]


def test_the_rubric_score_is_half_when_the_report_matches_the_reference() -> None:
    scores = {"comprehensiveness": 7, "depth": 5, "instruction_following": 9, "readability": 0}
    assert Rubric(report=scores, reference=scores).relative == 0.5  # type: ignore[arg-type]


def test_a_scorecard_written_mid_eval_says_it_is_partial() -> None:
    done = QuestionResult(id="q1", question="?", status="completed")
    card = Scorecard(questions_file="q.jsonl", model="m", judge_model="j", planned=3, results=[done],
                     totals=totals_of([done]))
    assert "**Partial:** 1 of 3 questions measured so far." in scorecard_markdown(card)


@given(st.text(), st.text())
def test_text_put_into_a_judge_prompt_is_never_read_as_a_placeholder(passage: str, report: str) -> None:
    # A passage may contain "{report}" or "{count}" itself; it must reach the judge as written.
    assert _fill("<p>{items}</p><r>{report}</r>", items=passage, report=report) == f"<p>{passage}</p><r>{report}</r>"


def test_a_fenced_judge_answer_is_still_read() -> None:
    assert _json_object('Here you go:\n```json\n{"verdicts": []}\n```') == {"verdicts": []}


def test_compare_thinking_runs_the_same_questions_off_then_on_and_compares(
        tmp_path: Path, questions_file: Path, fake_model: FakeAnthropic, fake_web: Any) -> None:
    fake_model.policy = with_judge(EvalResearchPolicy(), JudgePolicy())
    fake_model.thinker = lambda request: "Which source states the fee for the year asked?"
    out = tmp_path / "thinking"
    done = run_eval(fake_model, fake_web, str(questions_file), "--out", str(out), "--only", "honest",
                    "--compare-thinking")
    assert done.returncode == 0, done.stderr
    off, on = scorecard(out / "thinking-off"), scorecard(out / "thinking-on")
    assert (off["thinking"], on["thinking"]) == (False, True)
    assert [r["id"] for r in off["results"]] == [r["id"] for r in on["results"]] == ["honest"]
    assert off["totals"]["thinking_tokens"] == 0 < on["totals"]["thinking_tokens"]
    markdown = (out / "thinking-on" / "scorecard.md").read_text()
    comparison = markdown.split("## Compared with the baseline", 1)[1]
    assert "(thinking off)" in comparison and "| Thinking tokens | 0 |" in comparison
    assert re.search(r"\| honest \| \d+% → \d+% \|", comparison)
    # The research turns of the "on" run asked for thinking; none of the "off" run's did.
    turns = [r for r in fake_model.requests if not is_extraction(r) and "Grade" not in json.dumps(r["system"])]
    assert any("thinking" in r for r in turns) and any("thinking" not in r for r in turns)
    assert fake_model.rejected == []


def test_compare_thinking_with_a_baseline_is_refused_before_any_request(
        tmp_path: Path, questions_file: Path, fake_model: FakeAnthropic, fake_web: Any) -> None:
    done = run_eval(fake_model, fake_web, str(questions_file), "--compare-thinking", "--baseline", str(tmp_path))
    assert done.returncode == 2 and "leave out --baseline" in done.stderr and fake_model.requests == []
