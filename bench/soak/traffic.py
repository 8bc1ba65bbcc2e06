"""The soak's traffic: about `target` research threads going at once, as a team asks them. Every
thread is a mention; some carry a file, ask for a plan first, get a note mid-run, "go deeper", a
stop reaction, or a follow-up once the run has ended (a second run in the thread). Events reach a
live serve replica as Slack sends them: signed, retried on another replica (with X-Slack-Retry-Num)
when one does not answer 200 within Slack's 3 s."""
from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from redis.exceptions import RedisError

from jobs import RunStore
from jobs.records.models import RunState
from tests.e2e.stack import block_text
from tests.fakes.slack import app_mention_event, message_event, reaction_added_event, sign
from tests.fakes.slack_events import block_action_form
from tests.fakes.slack_files import share_file
from tests.fakes.slack_records import TEAM_ID
from tests.processes import SIGNING_SECRET

from .fakes import SoakModel, SoakSlack

CHANNELS = [f"C0SOAK{i}" for i in range(1, 7)]
USERS = ["U0ANA", "U0BEN", "U0CAT", "U0DAN"]
FEATURES = {  # the chance a thread has each
    "file": 0.08, "plan": 0.10, "note": 0.20, "deeper": 0.10, "stop": 0.10, "follow_up": 0.15,
}
# A feature's action waits for this many model answers of the thread's current run.
ACT_AFTER_ANSWERS = {"note": 3, "deeper": 4, "stop": 6}
SLACK_TIMEOUT_SECONDS = 3.0  # Slack counts an event undelivered after 3 s without a 200
DELIVERY_ATTEMPTS = 4  # the first delivery and Slack's retries
CSV = b"Fund,Expense ratio,As of\nVTI,0.03%,2024-06-30\nSCHB,0.03%,2024-03-31\nITOT,0.03%,2024-05-31\n"


@dataclass
class Conversation:
    """One thread: its mention, the features it was given and what was done of them."""

    tag: int
    channel: str
    thread: str
    user: str
    features: set[str]
    asked_at: float
    runs_asked: int = 1  # the mention, and a follow-up if one was posted
    done: set[str] = field(default_factory=set)  # actions taken ("note", "approve", "follow_up", …)
    answered_at: float | None = None  # when the progress and report replies were first both seen
    ended_at: float | None = None  # when every run asked had finished

    @property
    def question(self) -> str:
        prefix = "plan first: " if "plan" in self.features else ""
        return f"{prefix}soak-q{self.tag:03d} expense ratio VTI SCHB ITOT"


class Traffic:
    def __init__(self, slack: SoakSlack, model: SoakModel, store: RunStore, events_urls: Callable[[], list[str]],
                 *, target: int, seed: int, log: Callable[[str], None]) -> None:
        self.slack = slack
        self.model = model
        self.store = store
        self.events_urls = events_urls
        self.target = target
        self.random = random.Random(seed + 2)
        self.log = log
        self.conversations: list[Conversation] = []
        self.undelivered: list[str] = []  # events no replica took after every retry
        self.accepting = True  # False while draining: no new threads or follow-ups
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-traffic", daemon=True)
        self._http = httpx.Client(timeout=SLACK_TIMEOUT_SECONDS)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._http.close()

    # --- delivery ------------------------------------------------------------------------------

    def _deliver(self, body: str, what: str, *, form: bool = False) -> bool:
        for attempt in range(DELIVERY_ATTEMPTS):
            urls = self.events_urls()
            if urls:
                headers = sign(SIGNING_SECRET, body)
                if form:
                    headers["Content-Type"] = "application/x-www-form-urlencoded"
                if attempt:
                    headers |= {"X-Slack-Retry-Num": str(attempt), "X-Slack-Retry-Reason": "http_timeout"}
                try:
                    if self._http.post(self.random.choice(urls), content=body, headers=headers).status_code == 200:
                        return True
                except httpx.HTTPError:
                    pass
            time.sleep(1.0 + attempt)
        self.undelivered.append(what)
        self.log(f"undelivered after {DELIVERY_ATTEMPTS} attempts: {what}")
        return False

    def _event(self, envelope: dict[str, Any], what: str) -> bool:
        return self._deliver(json.dumps(envelope), what)

    # --- the threads ------------------------------------------------------------------------

    def active(self) -> list[Conversation]:
        return [c for c in self.conversations if c.ended_at is None]

    def _ask(self) -> None:
        tag = len(self.conversations) + 1
        features = {name for name, chance in FEATURES.items() if self.random.random() < chance}
        if "stop" in features:
            features.discard("follow_up")  # a stopped run is not followed up here: one end each
        c = Conversation(tag, self.random.choice(CHANNELS), "", self.random.choice(USERS), features, time.monotonic())
        envelope = app_mention_event(c.question, channel=c.channel, user=c.user)
        c.thread = self.slack.seed_event(envelope)
        if "file" in features:
            share_file(self.slack, c.channel, c.thread, "fees.csv", CSV, user=c.user, text="our fee sheet")
        self.conversations.append(c)
        self._event(envelope, f"mention soak-q{tag:03d}")

    def _states(self, c: Conversation) -> list[RunState]:
        return [self.store.get(run_id) for run_id in self.store.thread_run_ids(TEAM_ID, c.channel, c.thread)]

    def _answers_since(self, c: Conversation, since: float) -> int:
        return sum(1 for at, status in self.model.answers.get(c.tag, []) if at >= since and status == 200)

    def _step(self, c: Conversation) -> None:
        states = self._states(c)
        if not states:
            return
        current = states[-1]
        if c.answered_at is None and current.run.progress_message and current.run.report_message:
            c.answered_at = time.monotonic()
        finished = len(states) >= c.runs_asked and all(s.status.finished for s in states)
        if finished:
            if "follow_up" in c.features and "follow_up" not in c.done and self.accepting:
                c.done.add("follow_up")
                c.runs_asked += 1
                c.asked_at = time.monotonic()
                reply = message_event("Now compare their tracking error too", channel=c.channel,
                                      thread_ts=c.thread, user=c.user)
                self.slack.seed_event(reply)
                self._event(reply, f"follow-up soak-q{c.tag:03d}")
                return
            c.ended_at = time.monotonic()
            return
        if current.status.finished:
            return
        if "plan" in c.features and "approve" not in c.done and current.run.progress_message:
            shown = self.slack.message(c.channel, current.run.progress_message)
            if shown is not None and "Plan for approval" in block_text(shown):
                c.done.add("approve")
                self._deliver(block_action_form("approve_plan", user=c.user, channel=c.channel,
                                                message_ts=current.run.progress_message),
                              f"approval soak-q{c.tag:03d}", form=True)
            return
        answers = self._answers_since(c, c.asked_at)
        for action, wanted in ACT_AFTER_ANSWERS.items():
            if action in c.features and action not in c.done and answers >= wanted and c.runs_asked == 1:
                c.done.add(action)
                self._act(c, action, current)

    def _act(self, c: Conversation, action: str, state: RunState) -> None:
        what = f"{action} soak-q{c.tag:03d}"
        if action == "note":
            reply = message_event("Only sources after 2020, please", channel=c.channel, thread_ts=c.thread, user=c.user)
            self.slack.seed_event(reply)
            self._event(reply, what)
        elif action == "deeper":
            reply = message_event("go deeper", channel=c.channel, thread_ts=c.thread, user=c.user)
            self.slack.seed_event(reply)
            self._event(reply, what)
        elif action == "stop" and state.run.report_message:
            self._event(reaction_added_event("octagonal_sign", user=c.user, item_channel=c.channel,
                                             item_ts=state.run.report_message), what)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            for c in self.active():
                try:
                    self._step(c)
                except (RedisError, OSError) as exc:  # a failover under way: the next tick reads again
                    self.log(f"traffic: Redis unavailable for a tick ({type(exc).__name__})")
                    time.sleep(1)
                    break
                except Exception as exc:  # the soak's own bug must not stop the traffic silently
                    self.log(f"traffic: soak-q{c.tag:03d}: {type(exc).__name__}: {exc}")
            if self.accepting and len(self.active()) < self.target:
                try:
                    self._ask()
                except Exception as exc:
                    self.log(f"traffic: asking failed: {type(exc).__name__}: {exc}")
