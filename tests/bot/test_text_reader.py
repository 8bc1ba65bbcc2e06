"""What people write is read off serve's event loop (issue 35, item 2: "CPU work over untrusted input
in serve leaves the event loop"). A long text is read in the reader's child process under a deadline:
a reading that overruns, whatever makes it slow, is killed with its child and the text is refused in
the thread, while the loop every workspace shares keeps its timers; the next text gets a fresh child.
Short texts (commands) are read inline, and both paths read every command the same way."""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from redis import Redis

from agent import MAX_QUESTION_CHARS
from bot.surface.reading import ThreadReply, read_question, read_thread_reply
from bot.text_reader import INLINE_CHARS, TextReader, UnreadableText
from jobs import RunStatus, RunStore
from tests.jobs.test_races import ended_run

T = TypeVar("T")
# Catastrophic backtracking: `(a|aa)+$` tries every split of the run of a's before failing at the "b".
SLOW_PATTERN = re.compile(r"^(?:a|aa)+$")
SLOW_TEXT = "a" * (INLINE_CHARS + 100) + "b"
DEADLINE = 1.0
# A loop held by the reading would be late by the whole deadline; a free one by a scheduler's hiccup.
LOOP_LATE_SECONDS = DEADLINE / 2


def pid_of(text: str) -> int:
    return os.getpid()


def slow_reading(text: str, *_: object) -> ThreadReply:
    SLOW_PATTERN.match(text)  # never ends on SLOW_TEXT
    return ThreadReply()


def dying_reading(text: str) -> int:
    os._exit(3)  # the child dies mid-read (killed from outside, out of memory)


async def _with_ticker(work: Awaitable[T]) -> tuple[T | BaseException, float]:
    """`work`'s result (or error) and the worst lateness of a 20 ms timer on the same loop meanwhile."""
    worst = 0.0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal worst
        while not done.is_set():
            started = time.perf_counter()
            await asyncio.sleep(0.02)
            worst = max(worst, time.perf_counter() - started - 0.02)

    ticker = asyncio.create_task(tick())
    try:
        result: T | BaseException = await work
    except BaseException as exc:  # noqa: BLE001 - returned for the test to judge
        result = exc
    done.set()
    await ticker
    return result, worst


def _run(make: Callable[[TextReader], Awaitable[T]], reader: TextReader) -> T:
    async def go() -> T:
        try:
            return await make(reader)
        finally:
            reader.close()

    return asyncio.run(go())


def test_a_short_text_is_read_on_the_loop_and_a_long_one_in_the_child() -> None:
    async def go(reader: TextReader) -> tuple[int, int, int]:
        short = await reader.read(pid_of, "x" * INLINE_CHARS)
        first = await reader.read(pid_of, "x" * (INLINE_CHARS + 1))
        second = await reader.read(pid_of, "y" * MAX_QUESTION_CHARS)
        return short, first, second

    reader = TextReader()
    short, first, second = _run(go, reader)
    assert short == os.getpid()
    assert first != os.getpid() and second == first, "one child reads every long text"
    assert reader.children_started == 1


def test_a_reading_that_overruns_is_refused_at_its_deadline_while_the_loop_keeps_time() -> None:
    async def go(reader: TextReader) -> tuple[object, float, int]:
        await reader.read(pid_of, "x" * (INLINE_CHARS + 1))  # the child is up: its start is not the test
        outcome, late = await _with_ticker(reader.read(slow_reading, SLOW_TEXT))
        after = await reader.read(pid_of, "z" * (INLINE_CHARS + 1))
        return outcome, late, after

    reader = TextReader(deadline=DEADLINE)
    outcome, late, after = _run(go, reader)
    assert isinstance(outcome, UnreadableText), outcome
    assert "could not read that message in time" in str(outcome) and "plain words" in str(outcome)
    assert late < LOOP_LATE_SECONDS, f"the loop was held {late:.2f} s"
    assert reader.children_started == 2, "the overrun child was killed and a fresh one reads the next text"
    assert after != os.getpid()


def test_a_child_that_dies_mid_read_refuses_only_that_text() -> None:
    async def go(reader: TextReader) -> tuple[object, int]:
        try:
            await reader.read(dying_reading, "x" * (INLINE_CHARS + 1))
        except UnreadableText as exc:
            died: object = exc
        else:
            died = None
        return died, await reader.read(pid_of, "x" * (INLINE_CHARS + 1))

    reader = TextReader()
    died, after = _run(go, reader)
    assert isinstance(died, UnreadableText)
    assert after != os.getpid() and reader.children_started == 2


def test_closing_the_reader_ends_its_child() -> None:
    async def go(reader: TextReader) -> int:
        return await reader.read(pid_of, "x" * (INLINE_CHARS + 1))

    reader = TextReader()
    child = _run(go, reader)  # _run closes the reader
    assert _gone(child), f"the reader's child {child} outlived close()"


def _gone(pid: int, seconds: float = 5.0) -> bool:
    for _ in range(int(seconds / 0.05)):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_an_idle_child_is_stopped_and_the_next_long_text_starts_another() -> None:
    async def go(reader: TextReader) -> tuple[int, int]:
        first = await reader.read(pid_of, "x" * (INLINE_CHARS + 1))
        await asyncio.sleep(0.6)  # past idle_seconds with no long text
        assert await asyncio.to_thread(_gone, first), "the idle child was stopped"
        return first, await reader.read(pid_of, "y" * (INLINE_CHARS + 1))

    reader = TextReader(idle_seconds=0.3)
    first, second = _run(go, reader)
    assert second not in (first, os.getpid()) and reader.children_started == 2


# Every command as people write it, and questions and notes that only look like one.
COMMANDS = (
    "forget this thread", "Please forget this thread.", "recheck", "recheck daily", "recheck in 6 hours",
    "recheck off", "recheck every 10 seconds", "usage", "spend?", "budget", "budgets", "budget #C0DATA123 $50/month",
    "budget workspace $200/month", "budget here off", "budget workspace $abc", "go deeper", "please go deeper!",
    "history", "history sec2", "source 3", "footnote [12]", "sources", "plan first on", "plan first off",
    "plan first: what do index funds cost?", "budget airlines in Europe?", "what about ITOT?", "recheckable?",
)
WRAPPERS = ("{}", "<@UBOT> {}", "  {}  ", "{}\n", "{}" + " " * (INLINE_CHARS + 10))


@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_every_command_reads_the_same_in_the_child_as_on_the_loop(wrapper: str) -> None:
    async def go(reader: TextReader) -> list[tuple[object, object, object, object]]:
        readings = []
        for command in COMMANDS:
            text = wrapper.format(command)
            readings.append((
                read_thread_reply(text, "C0HERE"), await reader.read(read_thread_reply, text, "C0HERE"),
                read_question(text, "C0HERE"), await reader.read(read_question, text, "C0HERE"),
            ))
        return readings

    reader = TextReader(inline_chars=0)  # everything through the child
    for (thread_inline, thread_child, question_inline, question_child), command in zip(
            _run(go, reader), COMMANDS, strict=True):
        assert thread_child == thread_inline, command
        assert question_child == question_inline, command
    assert reader.children_started == 1


def test_the_readings_find_what_each_command_asks() -> None:
    assert read_thread_reply("please forget this thread", None).forget
    assert read_thread_reply("recheck daily", None).recheck is not None
    spend = read_thread_reply("budget workspace $200/month", None).spend
    assert spend is not None and spend.kind == "change" and spend.change and spend.change.usd == 200
    assert read_thread_reply("<@UBOT> go deeper", None).go_deeper
    assert read_thread_reply("history sec2", None).history_section == "sec2"
    assert read_thread_reply("source [3]", None).footnote == 3
    assert read_thread_reply("sources", None).sources
    assert read_thread_reply("what about ITOT?", None) == ThreadReply()
    assert read_question("plan first off", "C1").plan_first_switch is False
    assert read_question("plan first: fees of VTI?", "C1").planned == "fees of VTI?"
    assert read_question("fees of VTI?", "C1").planned is None


# Through the listener: a thread reply in serve's own handler, on one loop with a ticker beside it.


async def _reply(redis: Redis, slack_url: str, text: str, reader: TextReader) -> tuple[str, float]:
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.services import Services
    from bot.slack.tenancy import Tenant
    from bot.surface.steering import thread_message

    services = Services(redis=redis, store=RunStore(redis), reader=reader)
    client = AsyncWebClient(token="xoxb-test-token", base_url=f"{slack_url}/api/")
    parent = ended_run(services.runs.sync)
    channel, thread = parent.run.channel or "", parent.run.thread_ts or ""
    try:
        outcome, late = await _with_ticker(thread_message(
            services, client, tenant=Tenant(team=None), channel=channel, thread_ts=thread, ts=f"{thread}9",
            user="U0ANA", text=text, event_id=f"Ev{thread}"))
    finally:
        reader.close()
    assert outcome is None, outcome
    return thread, late


def _thread_texts(fake_slack, thread: str) -> list[str]:
    return [m.text for m in fake_slack.thread("C1", thread)]


def test_a_reply_whose_reading_overruns_is_told_so_and_continues_nothing(
        redis: Redis, fake_slack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bot.surface.steering.read_thread_reply", slow_reading)
    thread, late = asyncio.run(_reply(redis, fake_slack.url, SLOW_TEXT, TextReader(deadline=DEADLINE)))
    texts = _thread_texts(fake_slack, thread)
    assert any("could not read that message in time" in t for t in texts), texts
    assert late < LOOP_LATE_SECONDS, f"the loop was held {late:.2f} s"
    assert len(RunStore(redis).thread_run_ids(None, "C1", thread)) == 1, "no continuation started"


def test_a_long_follow_up_is_read_in_the_child_and_continues_the_thread(redis: Redis, fake_slack) -> None:
    reader = TextReader()
    follow_up = "Now compare ITOT and SCHB on fees, tracking difference and tax efficiency. " * 12
    assert INLINE_CHARS < len(follow_up.strip()) <= MAX_QUESTION_CHARS
    thread, _ = asyncio.run(_reply(redis, fake_slack.url, follow_up, reader))
    assert reader.children_started == 1
    runs = RunStore(redis).thread_run_ids(None, "C1", thread)
    assert len(runs) == 2 and RunStore(redis).get(runs[-1]).run.follow_up == follow_up.strip()
    assert RunStore(redis).get(runs[-1]).status == RunStatus.queued


def test_a_reply_over_the_length_limit_is_refused_before_anything_reads_it(redis: Redis, fake_slack) -> None:
    reader = TextReader()
    thread, _ = asyncio.run(_reply(redis, fake_slack.url, "budget a" + "\n" * 39_990 + "x", reader))
    texts = _thread_texts(fake_slack, thread)
    assert any("39,999 characters; I take up to 4,000" in t and "as a file" in t for t in texts), texts
    assert reader.children_started == 0, "refused before any reading"
    assert len(RunStore(redis).thread_run_ids(None, "C1", thread)) == 1
