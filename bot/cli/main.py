"""The `deepthread` command: serve, worker, up, ask, doctor, inspect, eval, forget."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from pydantic import ValidationError

from agent import MAX_QUESTION_CHARS
from bot.settings import DATA_DIR_VARIABLE, Settings, blank_variables

from .doctor import blank_problems, check, model_notices
from .observability import MULTIPROC_VARIABLE, metrics_directory, setup_logging

log = logging.getLogger("deepthread")


def load_settings() -> Settings:
    """Settings, read once; this process's key prefix and queue are set from them (jobs.keyspace.keys)."""
    try:
        settings = Settings()
    except ValidationError as exc:
        for error in exc.errors():
            name = str(error["loc"][0]).upper() if error["loc"] else "setting"
            print(f"{name}: {error['msg'].removeprefix('Value error, ')}", file=sys.stderr)
        raise SystemExit(2) from None
    from jobs import keys
    from jobs.records import sealing

    keys.configure(**settings.deployment())
    try:
        sealing.configure(settings.sealing_key())
    except ValueError:  # a malformed DEEPTHREAD_TOKEN_KEY: doctor says how to make one; seal nothing till then
        sealing.configure(None)
    return settings


def require(settings: Settings, command: str) -> None:
    problems = check(settings, command)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        raise SystemExit(2)


def cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    problems = blank_problems(blank_variables()) + check(settings, "doctor")
    if args.live:
        from .doctor_live import live_problems

        found, live = asyncio.run(live_problems(settings))
        for fact in found:  # what the services turned out to be, problems or not
            print(fact)
        problems += live
    for problem in problems:
        print(problem)
    for notice in model_notices(settings):
        print(f"note: {notice}")
    if not problems:
        mode = "Socket Mode" if settings.socket_mode else f"HTTP mode on port {settings.port}"
        if settings.multi_workspace:
            mode += f", many workspaces (installs at /slack/install on port {settings.port})"
        checked = "checked live" if args.live else "looks complete"
        via = "" if settings.model_provider == "anthropic" else f" on {settings.provider_config().label}"
        print(f"Configuration {checked}: {mode}, search via {settings.search}, model {settings.model}{via}.")
    return 1 if problems else 0


def cmd_serve(settings: Settings, _: argparse.Namespace) -> int:
    require(settings, "serve")
    from .processes import serve

    gc.freeze()  # start-up objects live forever: keep them out of full collections (see jobs.workers.executor)
    return asyncio.run(serve(settings))


def cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    require(settings, "worker")
    from .processes import work

    return work(settings, burst=args.burst)


def cmd_up(settings: Settings, _: argparse.Namespace) -> int:
    require(settings, "up")
    from .local_redis import LocalRedis

    local = None
    if not settings.redis_url:
        local = LocalRedis(data_dir=settings.data_dir).start()
        settings = settings.model_copy(update={"redis_url": local.url})
        print(
            f"Started a local redis-server at {local.url}, data in {local.data_dir} "
            f"(set {DATA_DIR_VARIABLE} to keep it elsewhere); `deepthread inspect` and `forget` find it while "
            "this runs",
            file=sys.stderr,
        )
    env = {**os.environ, "REDIS_URL": settings.redis_url or ""}
    if settings.metrics_port is not None:
        # One endpoint for both: serve's, summing the worker's counters from a directory they share.
        env[MULTIPROC_VARIABLE] = metrics_directory()
        env.pop("DEEPTHREAD_METRICS_PORT", None)
    worker = subprocess.Popen([sys.executable, "-m", "bot.cli", "worker"], env=env)
    try:
        from .processes import serve

        return asyncio.run(serve(settings))
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
        if local:
            local.stop()


def cmd_ask(settings: Settings, args: argparse.Namespace) -> int:
    question = " ".join(args.question).strip()
    if not question:
        print('Give a question, e.g. deepthread ask "what is the expense ratio of VTI?"', file=sys.stderr)
        return 2
    if len(question) > MAX_QUESTION_CHARS:
        print(f"The question is {len(question):,} characters; the limit is {MAX_QUESTION_CHARS:,}.", file=sys.stderr)
        return 2
    from .terminal import ReportFile, ask, default_output, out_problem

    path = Path(args.out) if args.out else default_output(question)
    problem = out_problem(path)  # before any work: a run must not end unable to write its report
    if problem:
        print(problem, file=sys.stderr)
        return 2
    require(settings, "ask")
    from .runtime import job_runtime

    gc.freeze()
    report = ReportFile(path)
    try:
        return asyncio.run(ask(question, job_runtime(settings), path, args.profile, report))
    except KeyboardInterrupt:
        report.interrupted()
        print(f"\nInterrupted: the report so far is in {path}", file=sys.stderr)
        return 130


def stored_runs_url(settings: Settings) -> str | None:
    """Where the runs are for inspect, forget and eval --from-feedback: REDIS_URL, else the Redis of a
    `deepthread up` running on this machine's data directory; None (said on stderr) when neither."""
    if settings.redis_url:
        return settings.redis_url
    from .local_redis import running_url

    url = running_url(settings.data_dir)
    if url is None:
        print(
            f"REDIS_URL is not set and no `deepthread up` is running with its data in {settings.data_dir}: point "
            f"REDIS_URL at the Redis the workers use, or start `deepthread up` (set {DATA_DIR_VARIABLE} if it "
            "keeps its data elsewhere)",
            file=sys.stderr,
        )
    else:
        print(f"Using the Redis of `deepthread up` at {url} (data in {settings.data_dir})", file=sys.stderr)
    return url


def cmd_inspect(settings: Settings, args: argparse.Namespace) -> int:
    url = stored_runs_url(settings)
    if url is None:
        return 2
    from jobs.keyspace.connection import connect

    from .inspect import inspect, sections, sources

    redis = connect(url)
    if args.sections:
        return sections(redis, args.run_id, sys.stdout)
    if args.sources:
        return sources(redis, args.run_id, sys.stdout)
    return inspect(redis, args.run_id, args.request, sys.stdout)


def cmd_forget(settings: Settings, args: argparse.Namespace) -> int:
    """Delete a workspace's, a channel's or a thread's stored data now (active runs stopped first)."""
    if args.thread and not args.channel:
        print("--thread needs --channel: a thread is named by its channel and its first message's ts", file=sys.stderr)
        return 2
    url = stored_runs_url(settings)
    if url is None:
        return 2
    from bot.desk.retention import retention
    from jobs.keyspace.connection import connect

    keeper = retention(connect(url))
    if args.thread:
        gone = keeper.forget_thread(args.team, args.channel, args.thread, "forget")
    elif args.channel:
        gone = keeper.forget_channel(args.team, args.channel, "forget")
    else:
        gone = keeper.forget_team(args.team, "forget")
    print(gone.summary())
    if gone.runs:
        print("runs: " + ", ".join(gone.runs))
    return 0


def _export_feedback(settings: Settings, args: argparse.Namespace) -> int:
    """Write the rated-down public questions as a question set (QUESTIONS, or a dated file)."""
    from datetime import UTC, datetime

    from jobs.keyspace.connection import connect

    from .evaluate.from_feedback import feedback_questions, write_questions

    url = stored_runs_url(settings)
    if url is None:
        return 2
    since = None
    if args.since:
        try:
            since = datetime.fromisoformat(args.since)
        except ValueError:
            print(f"--since takes a date like 2026-11-01, not {args.since!r}", file=sys.stderr)
            return 2
        since = since if since.tzinfo else since.replace(tzinfo=UTC)
    path = Path(args.questions or f"deepthread-feedback-{datetime.now(UTC):%Y%m%d}.jsonl")
    questions = list(feedback_questions(connect(url), since))
    write_questions(path, questions)
    print(f"{len(questions)} rated-down question(s) written to {path}; run them with: deepthread eval {path}")
    return 0


def cmd_eval(settings: Settings, args: argparse.Namespace) -> int:
    from datetime import datetime

    from .evaluate import (
        SHIPPED_QUESTIONS,
        THINKING_DIRS,
        BaselineError,
        EvalOptions,
        QuestionFileError,
        compare_thinking,
        load_questions,
        run_eval,
    )
    from .runtime import job_runtime

    if args.from_feedback:
        return _export_feedback(settings, args)
    if args.since:
        print("--since goes with --from-feedback (which 👎 to export).", file=sys.stderr)
        return 2
    if args.concurrency < 1:
        print("--concurrency must be at least 1 (questions researched at the same time).", file=sys.stderr)
        return 2
    questions_file = Path(args.questions) if args.questions else SHIPPED_QUESTIONS
    only = [i.strip() for i in args.only.split(",") if i.strip()] if args.only else None
    try:
        questions = load_questions(questions_file, only)
    except QuestionFileError as exc:
        print(exc, file=sys.stderr)
        return 2
    require(settings, "ask")
    out_dir = Path(args.out) if args.out else Path(f"deepthread-eval-{datetime.now():%Y%m%d-%H%M%S}")
    options = EvalOptions(
        questions_file=questions_file,
        out_dir=out_dir,
        concurrency=args.concurrency,
        judge_model=settings.small_model,
        baseline=Path(args.baseline) if args.baseline else None,
        deepresearch_bench=Path(args.deepresearch_bench) if args.deepresearch_bench else None,
    )
    if args.compare_thinking and args.baseline:
        print("--compare-thinking compares with its own thinking-off run: leave out --baseline.", file=sys.stderr)
        return 2
    gc.freeze()
    try:
        if args.compare_thinking:
            card = asyncio.run(compare_thinking(questions, job_runtime(settings), options))
            on = out_dir / THINKING_DIRS[True] / "scorecard.md"
            print(f"Thinking on against off, question by question: {on}", file=sys.stderr)
        else:
            card = asyncio.run(run_eval(questions, job_runtime(settings), options))
    except BaselineError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 1 if card.totals.errors else 0


def version() -> str:
    """The installed release (pyproject.toml's version; CHANGELOG.md says what each one changed)."""
    try:
        return metadata.version("deepthread")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed: bash scripts/install app)"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="deepthread", description="A Slack research bot.")
    p.add_argument("--version", action="version", version=f"deepthread {version()}")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="run the Slack app (Socket Mode if SLACK_APP_TOKEN is set, else HTTP on PORT)")
    w = sub.add_parser("worker", help="run an RQ worker that executes research runs")
    w.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    sub.add_parser("up", help="serve + worker (+ a local redis-server when REDIS_URL is unset)")
    a = sub.add_parser("ask", help="research one question in the terminal and write a Markdown report")
    a.add_argument("question", nargs="+")
    a.add_argument(
        "--out", help="report file: .md, .pdf or .docx by its suffix (default: deepthread-report-<question>.md)"
    )
    a.add_argument("--profile", choices=["standard", "deep"], default="standard")
    d = sub.add_parser("doctor", help="check the configuration")
    d.add_argument(
        "--live", action="store_true", help="also ask the services: Slack token scopes, both models, one search"
    )
    i = sub.add_parser("inspect", help="list a run's model requests as dispatched, or print one in full")
    i.add_argument("run_id")
    i.add_argument("request", nargs="?", type=int, help="print this request (1-based) in full, as JSON")
    i.add_argument("--sections", action="store_true", help="print every report section with its revision history")
    i.add_argument(
        "--sources",
        action="store_true",
        help="print every source in full: passage, the page text around it, fetch time, page hash",
    )
    f = sub.add_parser(
        "forget",
        help="delete a workspace's, channel's or thread's stored data now (runs, reports, sources, logs, settings)",
    )
    f.add_argument("--team", required=True, help="the workspace's id (T…)")
    f.add_argument("--channel", help="only this channel (C…, G…, D…)")
    f.add_argument("--thread", help="only this thread: its first message's ts (needs --channel)")
    e = sub.add_parser(
        "eval", help="research a question set, grade each report with the small model, write a scorecard"
    )
    e.add_argument(
        "questions", nargs="?", help="JSONL of questions (default: the shipped bot/cli/evaluate/questions.jsonl)"
    )
    e.add_argument("--out", help="output directory (default: deepthread-eval-<date>-<time>)")
    e.add_argument("--concurrency", type=int, default=3, help="questions researched at the same time (default 3)")
    e.add_argument("--only", help="comma-separated question ids to run")
    e.add_argument("--baseline", help="output directory of an earlier eval: add a side-by-side comparison")
    e.add_argument("--deepresearch-bench", help="also write the reports as DeepResearch Bench JSONL to this file")
    e.add_argument(
        "--from-feedback",
        action="store_true",
        help="write the 👎-rated questions of public channels (with notes and sources) to QUESTIONS and stop",
    )
    e.add_argument("--since", help="with --from-feedback: only 👎 given on or after this date (YYYY-MM-DD)")
    e.add_argument(
        "--compare-thinking",
        action="store_true",
        help="research the set twice, thinking off then on, and compare the two scorecards (OUT/thinking-on)",
    )
    return p


COMMANDS = {
    "serve": cmd_serve,
    "worker": cmd_worker,
    "up": cmd_up,
    "ask": cmd_ask,
    "doctor": cmd_doctor,
    "inspect": cmd_inspect,
    "eval": cmd_eval,
    "forget": cmd_forget,
}


# The long-running processes log what they do; the commands a person runs and reads (ask, doctor,
# inspect, forget, eval) print for that person, and log only warnings unless DEEPTHREAD_LOG_LEVEL says.
SERVICES = frozenset({"serve", "worker", "up"})


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = load_settings()
    level = os.environ.get("DEEPTHREAD_LOG_LEVEL", "").strip() or ("INFO" if args.command in SERVICES else "WARNING")
    # Text or JSON lines, each naming its run and workspace; no secret ever written (observability.py).
    setup_logging(settings, level)
    return COMMANDS[args.command](settings, args)


if __name__ == "__main__":
    raise SystemExit(main())
