"""The soak's figures and the goals they are judged by, from what the fakes saw, what Redis holds and
what the processes measured. Each figure is a row of bench.common.report_checks."""
from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field

from jobs import RunStore
from jobs.records.models import RunState, RunStatus
from tests.e2e.stack import block_text
from tests.fakes.slack_records import TEAM_ID

from .chaos import Fault
from .fakes import SoakModel, SoakSlack
from .sampling import WATCHED, Sample, Samples, lag_buckets, moved, p99_of
from .topology import ROLES, Fleet, Life
from .traffic import Conversation

GOAL_RECOVERY_SECONDS = 120.0
GOAL_MEMORY_GROWTH = 0.05  # over the last half of the shared worker's longest life
GOAL_LAG_P99_SECONDS = 0.25
GOAL_SLACK_CALLS_RATIO = 1.5  # Slack calls per model answer, the whole soak against its calm warm-up
GOAL_REQUESTS_PER_ANSWER = 1.5  # model requests (refused ones included) per answered turn
# A progress message whose run has ended says so; one still showing a working phase was left behind.
WORKING_PHASES = ("Researching", "Compacting notes", "Writing the summary", "Queued")
# A report's or progress message's status line, as the renderers write it (the end said once with its
# reason reads "Stopped by …", "Incomplete after …"): tests/bench/test_soak_verdicts.py renders each.
STATUS_LINE = re.compile(r"^(?:[^\w\s]+ )?(In progress ·|Final ·|Stopped\b|Incomplete\b|Plan awaiting approval)", re.MULTILINE)
BOT_USER = "UBOT"

Check = tuple[str, str, bool, str]


@dataclass
class Threads:
    """Every thread's runs as Redis holds them at the end."""

    states: dict[int, list[RunState]] = field(default_factory=dict)  # tag -> its runs, oldest first


def read_threads(store: RunStore, conversations: list[Conversation]) -> Threads:
    threads = Threads()
    for c in conversations:
        threads.states[c.tag] = [store.get(r) for r in store.thread_run_ids(TEAM_ID, c.channel, c.thread)]
    return threads


def _text(slack: SoakSlack, channel: str, ts: str | None) -> str:
    message = slack.message(channel, ts) if ts else None
    return block_text(message) if message is not None else ""


# The report's status line opens with its end: "Final · …", "Stopped by <@U…> at …" (the end said once
# with its reason, bot.catalogue.said_once) or "Stopped: <reason>", "Incomplete: …".
END_WORDS = {"completed": "Final ·", "stopped": "Stopped", "failed": "Incomplete"}


def _report_shows_end(slack: SoakSlack, c: Conversation, last: RunState) -> bool:
    report = _text(slack, c.channel, last.run.report_message)
    return END_WORDS[last.status.value] in report and f"run {last.run.id}" in report


def _progress_working(slack: SoakSlack, c: Conversation, s: RunState) -> str | None:
    """The first line of an ended run's progress message when it still shows a working phase."""
    if not s.run.progress_message:
        return None
    first = _text(slack, c.channel, s.run.progress_message).split("\n", 1)[0]
    return first if any(phase in first for phase in WORKING_PHASES) else None


def ends_not_shown(conversations: list[Conversation], threads: Threads, slack: SoakSlack) -> list[int]:
    """Threads whose every run has ended in Redis while Slack does not show it yet (the report's status
    line, or a progress message still working): what the publishers still owe once the runs are done."""
    owed = []
    for c in conversations:
        states = threads.states[c.tag]
        if not states or not all(s.status.finished for s in states):
            continue
        if not _report_shows_end(slack, c, states[-1]) or any(_progress_working(slack, c, s) for s in states):
            owed.append(c.tag)
    return owed


def end_shown_lags(conversations: list[Conversation], threads: Threads, slack: SoakSlack,
                   clock_offset: float) -> list[float]:
    """Seconds from each thread's last run ending (its finished_at) to its report's last edit, for the
    threads whose report shows that end: how long a person waited for "Final" after the work was done."""
    lags = []
    for c in conversations:
        states = threads.states[c.tag]
        if not states or not all(s.status.finished for s in states) or states[-1].finished_at is None:
            continue
        last = states[-1]
        edits = slack.updates.get((c.channel, last.run.report_message or ""), [])
        if edits and _report_shows_end(slack, c, last):
            ended = last.finished_at.timestamp() - clock_offset  # on the monotonic clock the fake records
            lags.append(max(0.0, max(edits) - ended))
    return lags


def end_shown_checks(lags: list[float]) -> list[Check]:
    if not lags:
        return [("end shown in Slack after the run ended", "no run ended shown", False, f"≤ {GOAL_RECOVERY_SECONDS:.0f} s")]
    ordered = sorted(lags)
    p90 = ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]
    return [("end shown in Slack after the run ended",
             f"p50 {statistics.median(ordered):.0f} s, p90 {p90:.0f} s, max {ordered[-1]:.0f} s over {len(ordered)} threads",
             ordered[-1] <= GOAL_RECOVERY_SECONDS, f"max ≤ {GOAL_RECOVERY_SECONDS:.0f} s")]


def runs_checks(conversations: list[Conversation], threads: Threads, slack: SoakSlack,
                undelivered: list[str]) -> tuple[list[Check], list[str]]:
    # A note that arrives just after its run ended starts a continuation, as a reply then should: a
    # thread may hold more runs than the traffic asked for, and each of them must end shown too.
    asked = sum(max(c.runs_asked, len(threads.states[c.tag])) for c in conversations)
    ended = shown = 0
    statuses: Counter[str] = Counter()
    problems: list[str] = []
    for c in conversations:
        states = threads.states[c.tag]
        finished = [s for s in states if s.status.finished]
        ended += len(finished)
        statuses.update(s.status.value for s in states)
        if len(states) < c.runs_asked:
            problems.append(f"soak-q{c.tag:03d} in {c.channel}: {c.runs_asked} run(s) asked, {len(states)} recorded")
        for s in states:
            if not s.status.finished:
                problems.append(f"soak-q{c.tag:03d} run {s.run.id} still {s.status.value}")
            elif s.status == RunStatus.failed:
                problems.append(f"soak-q{c.tag:03d} run {s.run.id} ended incomplete: {s.reason}")
        if states and all(s.status.finished for s in states):
            last = states[-1]
            if _report_shows_end(slack, c, last):
                shown += len(finished)
            else:
                word = END_WORDS[last.status.value]
                problems.append(f"soak-q{c.tag:03d}: its report does not show run {last.run.id}'s end ({word!r})")
    answered = sum(1 for c in conversations if c.answered_at is not None)
    lost = asked - shown
    incomplete = statuses.get("failed", 0)
    return [
        ("mentions answered (progress and report posted)", f"{answered}/{len(conversations)}",
         answered == len(conversations), "every one"),
        ("runs asked / ended with their final report shown / lost",
         f"{asked} / {shown} / {lost} (completed {statuses.get('completed', 0)}, stopped {statuses.get('stopped', 0)}, "
         f"incomplete {incomplete})", lost == 0, "0 lost"),
        ("runs ended incomplete", str(incomplete), incomplete == 0, "0: faults cost time, not answers"),
        ("events no replica took (after Slack's retries)", str(len(undelivered)), not undelivered, "0"),
    ], problems


def messages_checks(conversations: list[Conversation], threads: Threads, slack: SoakSlack) -> tuple[list[Check],
                                                                                                    list[str]]:
    doubles = double_pins = left_working = 0
    problems: list[str] = []
    reports: dict[str, set[str]] = {}
    for c in conversations:
        states = threads.states[c.tag]
        own = {s.run.progress_message for s in states} | {s.run.report_message for s in states}
        seen: Counter[str] = Counter()
        for m in slack.thread(c.channel, c.thread):
            if m.user != BOT_USER or m.ts == c.thread:
                continue
            text = block_text(m) or m.text
            if m.ts in own:
                continue  # each run's own progress message, and the report they share
            lookalike = STATUS_LINE.search(text) or "react to stop" in text
            seen[text] += 1  # an acknowledgement or notice said twice
            if lookalike:
                doubles += 1
                problems.append(f"soak-q{c.tag:03d}: a second progress or report message {m.ts}: {text[:80]!r}")
        repeated = [t for t, n in seen.items() if n > 1 and t]
        doubles += len(repeated)
        problems += [f"soak-q{c.tag:03d}: posted twice: {t[:80]!r}" for t in repeated]
        for s in states:
            if s.run.report_message:
                reports.setdefault(c.channel, set()).add(s.run.report_message)
            working = _progress_working(slack, c, s) if s.status.finished else None
            if working:
                left_working += 1
                problems.append(f"soak-q{c.tag:03d} run {s.run.id} ended, its progress still says {working[:60]!r}")
    for channel, expected in reports.items():
        pinned = Counter(p.ts for p in slack.pins(channel))
        double_pins += sum(n - 1 for n in pinned.values() if n > 1)
        stray = set(pinned) - expected
        double_pins += len(stray)
        problems += [f"{channel}: {ts} pinned but is no run's report" for ts in stray]
    return [
        ("double posts", str(doubles), doubles == 0, "0"),
        ("double or stray pins", str(double_pins), double_pins == 0, "0"),
        ("progress messages left working after their run ended", str(left_working), left_working == 0, "0"),
    ], problems


def _first_after(times: list[float], after: float) -> float | None:
    later = [t for t in times if t >= after]
    return min(later) if later else None


def recovery(fault: Fault, conversations: list[Conversation], threads: Threads, model: SoakModel,
             slack: SoakSlack, clock_offset: float) -> tuple[int, float, float]:
    """(runs affected, seconds until the last of them made progress again, seconds until Slack took
    edits again). A run at work when the fault began (researching: not waiting on a plan's approval)
    has recovered at its first model answer after the fault's end, or at its end. Slack's side is the
    first edit of any run's message after the fault's end: with 30 runs in one workspace a run's
    routine edits are minutes apart by design (the finals' reserve), so per run it says little."""
    assert fault.began is not None and fault.ended is not None
    worst, affected = 0.0, 0
    for c in conversations:
        states = threads.states[c.tag]
        at_work = [s for s in states if s.run.created_at.timestamp() - clock_offset <= fault.began
                   and (s.finished_at is None or s.finished_at.timestamp() - clock_offset > fault.began)
                   and s.status != RunStatus.planned]
        if not at_work or (at_work[-1].run.plan_first and not at_work[-1].approved_by):
            continue
        state = at_work[-1]
        if state.run.plan_first and state.approved_by:
            answers_before = [t for t, status in model.answers.get(c.tag, []) if status == 200 and t <= fault.began]
            if len(answers_before) <= 1:  # its plan was drafted; its research had not begun
                continue
        affected += 1
        end = state.finished_at.timestamp() - clock_offset if state.finished_at else math.inf
        answers = [t for t, status in model.answers.get(c.tag, []) if status == 200]
        moved = min(_first_after(answers, fault.ended) or math.inf, end)
        worst = max(worst, moved - fault.ended)
    edits = [t for times in list(slack.updates.values()) for t in times]
    slack_again = (_first_after(edits, fault.ended) or math.inf) - fault.ended
    return affected, max(0.0, worst), max(0.0, slack_again)


def recovery_checks(faults: list[Fault], conversations: list[Conversation], threads: Threads, model: SoakModel,
                    slack: SoakSlack, clock_offset: float) -> list[Check]:
    checks = []
    for n, fault in enumerate(faults, 1):
        if fault.began is None or fault.ended is None:
            checks.append((f"fault {n}: {fault.describe()}", "not injected (the load ended first)", False, "injected"))
            continue
        affected, seconds, slack_again = recovery(fault, conversations, threads, model, slack, clock_offset)
        value = (f"{affected} run(s) at work, all moving again {seconds:.0f} s after; Slack edits again "
                 f"{slack_again:.0f} s after")
        met = seconds <= GOAL_RECOVERY_SECONDS and slack_again <= GOAL_RECOVERY_SECONDS
        checks.append((f"fault {n}: {fault.describe()}", value, met, f"≤ {GOAL_RECOVERY_SECONDS:.0f} s both"))
    return checks


# --- memory ---------------------------------------------------------------------------------

def _at(samples: list[Sample], t: float) -> int | None:
    near = [s for s in samples if abs(s.at - t) <= 15]
    return min(near, key=lambda s: abs(s.at - t)).kb if near else None


def memory_table(fleet: Fleet, samples: Samples, load_began: float, load_ended: float, window: float) -> list[str]:
    """Each role's memory (its process tree's PSS, MB) at the start and end of every window."""
    lines = []
    edges = [load_began + k * window for k in range(int((load_ended - load_began) // window) + 1)]
    if edges[-1] < load_ended - 1:
        edges.append(load_ended)
    header = "  " + f"{'':<14}" + "".join(f"{f'{(a - load_began) / 60:.0f}-{(b - load_began) / 60:.0f} min':>17}"
                                          for a, b in zip(edges, edges[1:], strict=False))
    lines.append(header)
    for role in ROLES:
        cells = []
        for a, b in zip(edges, edges[1:], strict=False):
            def figure(t: float, role: str = role) -> str:
                for life in fleet.lives:
                    if life.role == role and life.started <= t and (life.ended is None or life.ended >= t):
                        kb = _at(samples.memory.get(id(life), []), t)
                        if kb:
                            return f"{kb / 1024:.0f}"
                return "–"
            restarted = any(life.role == role and a < life.started <= b for life in fleet.lives)
            cells.append(f"{figure(a + 5)}→{figure(b - 5)}{'*' if restarted else ' '}")
        lines.append(f"  {role:<14}" + "".join(f"{c:>17}" for c in cells))
    lines.append("  (MB, PSS of each process and those under it; * a new process started in the window)")
    return lines


def longest_life(fleet: Fleet, role: str, load_began: float, load_ended: float) -> Life | None:
    def span(life: Life) -> float:
        return min(life.ended or load_ended, load_ended) - max(life.started, load_began)

    lives = [life for life in fleet.lives if life.role == role]
    return max(lives, key=span) if lives else None


def memory_checks(fleet: Fleet, samples: Samples, load_began: float, load_ended: float) -> list[Check]:
    life = longest_life(fleet, "worker-shared", load_began, load_ended)
    if life is None:
        return [("shared worker memory", "no samples", False, "sampled")]
    within = [s for s in samples.memory.get(id(life), []) if load_began <= s.at <= load_ended]
    if len(within) < 8:
        return [("shared worker memory, growth over the last half", f"{len(within)} samples", False, "≥ 8 samples")]
    half = within[len(within) // 2:]
    tenth = max(2, len(half) // 10)
    first = statistics.median(s.kb for s in half[:tenth])
    last = statistics.median(s.kb for s in half[-tenth:])
    growth = (last - first) / first
    per_run = [s.kb / s.active_runs for s in half if s.active_runs]
    span = (within[-1].at - within[0].at) / 60
    value = (f"{first / 1024:.0f} → {last / 1024:.0f} MB ({growth:+.1%}) over {span / 2:.1f} min of a {span:.1f}-min "
             f"life; {statistics.median(per_run) / 1024:.1f} MB per run at work" if per_run else "")
    return [("shared worker memory, growth over the last half", value, growth <= GOAL_MEMORY_GROWTH,
             f"≤ {GOAL_MEMORY_GROWTH:.0%}")]


# --- loop lag and calls -------------------------------------------------------------------------

def lag_checks(fleet: Fleet, samples: Samples) -> list[Check]:
    checks = []
    for role in ROLES:
        total: Counter[float] = Counter()
        for life in fleet.lives:
            if life.role == role and id(life) in samples.metrics:
                total.update(lag_buckets(samples.metrics[id(life)]))
        p99 = p99_of(dict(total))
        value = f"≤ {p99 * 1000:.0f} ms" if math.isfinite(p99) else "no samples"
        checks.append((f"event-loop lag p99, {role}", value, math.isfinite(p99) and p99 <= GOAL_LAG_P99_SECONDS,
                       f"≤ {GOAL_LAG_P99_SECONDS * 1000:.0f} ms"))
    return checks


@dataclass
class Calls:
    """Slack calls and model requests, counted at the end of the calm warm-up and at the end."""

    slack: int
    model_requests: int
    model_answered: int


def calls_checks(warm: Calls, end: Calls, runs: int) -> list[Check]:
    calm = warm.slack / max(1, warm.model_answered)
    whole = end.slack / max(1, end.model_answered)
    per_answer = end.model_requests / max(1, end.model_answered)
    return [
        ("Slack calls per run", f"{end.slack / max(1, runs):.0f} ({whole:.2f} per model answer; calm warm-up "
         f"{calm:.2f})", whole <= GOAL_SLACK_CALLS_RATIO * calm, f"≤ {GOAL_SLACK_CALLS_RATIO}× the warm-up's per answer"),
        ("model requests per run", f"{end.model_requests / max(1, runs):.0f} ({per_answer:.2f} per answered turn)",
         per_answer <= GOAL_REQUESTS_PER_ANSWER, f"≤ {GOAL_REQUESTS_PER_ANSWER} per answered turn"),
    ]


def redis_checks(doctor: list[str]) -> list[Check]:
    """What `deepthread doctor --live` found in Redis at the end: keys left over (no lifetime, no owner)."""
    leftover = [line for line in doctor if "left over" in line or "no module owns" in line or "never expire" in line]
    facts = next((line for line in doctor if line.startswith("Redis keys")), "no key count from doctor")
    return [("Redis keys left over (doctor --live)", f"{len(leftover)}; {facts}", not leftover, "none")]


def dump_threads(path: str, conversations: list[Conversation], threads: Threads, slack: SoakSlack,
                 store: RunStore) -> None:
    """Every thread as the fakes and Redis hold it, for reading a problem after the soak."""
    lines = []
    for c in conversations:
        states = threads.states[c.tag]
        lines.append(f"soak-q{c.tag:03d} {c.channel} {c.thread} features={sorted(c.features)} done={sorted(c.done)} "
                     f"asked={c.runs_asked}")
        for s in states:
            lines.append(f"  run {s.run.id} {s.status.value} progress={s.run.progress_message} "
                         f"report={s.run.report_message} reason={s.reason!r} finished={s.finished_at}")
            for name, ts in (("progress", s.run.progress_message), ("report", s.run.report_message)):
                times = slack.updates.get((c.channel, ts or ""), [])
                if times:
                    lines.append(f"    {name} updated {len(times)}×, last at monotonic {max(times):.0f}")
        for m in slack.thread(c.channel, c.thread):
            text = (block_text(m) or m.text).replace("\n", " | ")
            shown = re.findall(r"run ([0-9a-f]{12})", text)
            known = [f"{r}:{'kept' if _exists(store, r) else 'GONE'}" for r in shown]
            lines.append(f"    {m.ts} {m.user} {text[:150]} {' '.join(known)}")
        lines.append(f"    pins: {[p.ts for p in slack.pins(c.channel)]}")
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")


def _exists(store: RunStore, run_id: str) -> bool:
    try:
        store.get(run_id)
        return True
    except Exception:  # RunNotFound: the run's record is gone
        return False


def watch_table(faults: list[Fault], samples: Samples) -> list[str]:
    """Per watched figure and fault: how fast it grew (a minute's worth) over the same span just
    before the fault → from the fault's start to a minute past its end: what moved before a fault
    was felt."""
    done = [(n, f) for n, f in enumerate(faults, 1) if f.began is not None and f.ended is not None]
    lines = [f"  {'':<34}" + "".join(f"{f'fault {n}':>13}" for n, _ in done)]
    for metric in WATCHED:
        cells = []
        for _, fault in done:
            assert fault.began is not None and fault.ended is not None
            span = fault.ended + 60 - fault.began
            during = moved(samples, fault.began, fault.ended + 60)[metric] * 60 / span
            before = moved(samples, fault.began - span, fault.began)[metric] * 60 / span
            cells.append(f"{before:.0f}→{during:.0f}")
        lines.append(f"  {_short(metric):<34}" + "".join(f"{c:>13}" for c in cells))
    lines.append("  (growth a minute: just before → during the fault and the minute after, all processes summed)")
    return lines


def _short(name: str) -> str:
    return name.removeprefix("deepthread_").removesuffix("_total")
