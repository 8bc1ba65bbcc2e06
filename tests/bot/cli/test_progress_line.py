"""`deepthread ask`'s progress line: redrawn in place on a terminal; plain lines elsewhere, printed when
what they say changes and again every PLAIN_EVERY_SECONDS, naming the model request the run waits on."""
from __future__ import annotations

import io

from agent import ModelWatch, Progress
from bot.cli.progress_line import PLAIN_EVERY_SECONDS, ProgressLine
from jobs import Run, RunState
from jobs.records.state import apply_event


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def researching(activity: str) -> RunState:
    return apply_event(RunState(run=Run(question="q")), Progress(phase="researching", activity=activity))


def test_plain_lines_come_on_a_change_and_again_while_waiting() -> None:
    clock, out = Clock(), io.StringIO()
    watch = ModelWatch(clock=clock)
    line = ProgressLine(out, watch, live=False, clock=clock)
    line.tick()
    assert out.getvalue().splitlines() == ["[starting] · 0:00"]
    watch.begin("https://api.example.com/v1/messages")
    clock.now += 3
    line.tick()
    clock.now += 1
    line.tick()  # only the wait's seconds moved: not news
    assert out.getvalue().splitlines()[1:] == [
        "[starting] · waiting for the model at https://api.example.com/v1/messages: nothing received for 3 s · 0:03"]
    clock.now += PLAIN_EVERY_SECONDS
    line.tick()  # still waiting: said again, so a log shows the run is alive
    assert out.getvalue().splitlines()[-1].endswith("nothing received for 14 s · 0:14")
    line.update(researching("Reading vanguard.com"))
    assert out.getvalue().splitlines()[-1].startswith(
        "[researching] Reading vanguard.com · 0 requests · 0 sources · 0 sections · waiting for the model")


def test_a_terminal_gets_one_line_redrawn_in_place_and_cleared_for_other_output() -> None:
    clock, out = Clock(), io.StringIO()
    line = ProgressLine(out, None, live=True, clock=clock)
    line.update(researching("Reading vanguard.com"))
    clock.now += 65
    line.tick()
    drawn = out.getvalue()
    assert "\n" not in drawn and drawn.count("\r") == 2 and drawn.endswith("· 1:05\x1b[K")
    line.above().write("a warning\n")
    assert out.getvalue().endswith("\r\x1b[Ka warning\n"), "a log line starts on a clean line"
