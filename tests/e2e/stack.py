"""Helpers for end-to-end tests through real serve and worker processes and the fake Slack
(imported from here, never from another test module)."""
from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.fakes.policies import is_extraction
from tests.fakes.slack import FakeSlack, app_mention_event, sign
from tests.processes import (
    SIGNING_SECRET,
    STARTUP_SECONDS,
    Stack,
    environment,
    free_port,
    running,
    wait_for,
    wait_listening,
)

APP_TOKEN = "xapp-test"  # Socket Mode's app-level token
BOT_TOKEN = "xoxb-test"

CHANNEL = "C0TEST"


def post_event(stack: Stack, envelope: dict, *, headers: dict | None = None, secret: str = SIGNING_SECRET,
               timestamp: int | None = None) -> httpx.Response:
    body = json.dumps(envelope)
    signed = sign(secret, body, timestamp)
    return httpx.post(stack.events_url, content=body, headers={**signed, **(headers or {})}, timeout=10)


def block_text(message) -> str:
    parts = []
    for block in message.blocks or []:
        if block.get("type") == "section":
            parts.append(block["text"]["text"])
        elif block.get("type") == "context":
            parts += [e.get("text", "") for e in block["elements"]]
    return "\n".join(parts)


def bot_replies(slack: FakeSlack, thread_ts: str, channel: str = CHANNEL):
    return [m for m in slack.thread(channel, thread_ts) if m.ts != thread_ts]


def assert_cited_report_pinned(slack: FakeSlack, mention_ts: str, web_url: str, timeout: float = 30,  # noqa: ANN201
                               channel: str = CHANNEL):
    """One progress reply and one pinned report in the thread (the only pin of `channel`); the report
    ends final and cited."""
    replies = wait_for(lambda: len(bot_replies(slack, mention_ts, channel)) >= 2 and bot_replies(slack, mention_ts,
                                                                                                  channel),
                       10, "progress and report replies")
    progress, report = replies[0], replies[1]
    # The pin is a call of its own, just after the report is posted.
    wait_for(lambda: [p.ts for p in slack.pins(channel)] == [report.ts], 5, "exactly the report pinned")
    wait_for(lambda: "Final" in block_text(slack.message(channel, report.ts)), timeout, "the final report")
    final = block_text(slack.message(channel, report.ts))
    assert not re.search(r"\[s\d+\]", final), final
    assert "*Sources*" in final and f"{web_url}/pages/" in final
    assert re.search(r"<http://127\.0\.0\.1:\d+/pages/[\w.-]+\|\[1\]>", final), "footnotes link to their source"
    assert "Done" in block_text(slack.message(channel, progress.ts))
    assert len(bot_replies(slack, mention_ts, channel)) == 2, "progress is edited in place, not re-posted"
    return progress, report


def start(stack: Stack, slack: FakeSlack, text: str = "expense ratio VTI SCHB ITOT", *,
          channel: str = CHANNEL, timeout: float = 10) -> tuple[str, str, str]:
    """Mention the bot; returns (thread ts, progress ts, report ts)."""
    envelope = app_mention_event(text, channel=channel)
    ts = slack.seed_event(envelope)
    assert post_event(stack, envelope).status_code == 200
    replies = wait_for(lambda: len(bot_replies(slack, ts, channel)) >= 2 and bot_replies(slack, ts, channel), timeout,
                       "run messages")
    return ts, replies[0].ts, replies[1].ts


def report_text(slack: FakeSlack, ts: str, channel: str = CHANNEL) -> str:
    return block_text(slack.message(channel, ts))


@contextmanager
def serve_only(env: dict[str, str], log: Path) -> Iterator[tuple[subprocess.Popen[bytes], Stack]]:
    port = free_port()
    env = {**env, "PORT": str(port)}
    with running(["serve"], env, log) as serve:
        base = wait_listening(port, serve, log)
        yield serve, Stack(events_url=f"{base}/slack/events", env=env, logs=log.parent)


def stack_environment(redis_url: str, fake_slack, fake_model, fake_web, *, hard_stop_seconds: float = 3) -> dict[str, str]:
    return environment(
        SLACK_BOT_TOKEN="xoxb-test", SLACK_SIGNING_SECRET="test-signing-secret", SLACK_API_URL=f"{fake_slack.url}/api/",
        ANTHROPIC_API_KEY="k", ANTHROPIC_BASE_URL=fake_model.url, REDIS_URL=redis_url, DEEPTHREAD_SEARCH="searxng",
        SEARXNG_URL=fake_web.url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1",
        DEEPTHREAD_HARD_STOP_SECONDS=str(hard_stop_seconds),
    )


def main_requests(fake_model) -> list[dict]:
    """The lead's Messages API requests (the small model's extraction passes left out)."""
    return [r for r in fake_model.requests if not is_extraction(r)]


@contextmanager
def socket_mode_stack(tmp: Path, fake_slack: FakeSlack, *, redis_url: str, model_url: str,
                      web_url: str, **extra: str) -> Iterator[Stack]:
    """`deepthread serve` in Socket Mode (no signing secret, nothing listening) and one worker;
    `extra` adds settings (DEEPTHREAD_…=…)."""
    env = environment(
        **extra,
        SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_APP_TOKEN=APP_TOKEN, SLACK_API_URL=f"{fake_slack.url}/api/",
        ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=model_url, REDIS_URL=redis_url,
        DEEPTHREAD_SEARCH="searxng", SEARXNG_URL=web_url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1",
        PORT=str(free_port()),
    )
    with running(["serve"], env, tmp / "serve.log") as serve, running(["worker"], env, tmp / "worker.log"):

        def connected() -> bool:
            if serve.poll() is not None:
                raise AssertionError("deepthread serve exited:\n" + (tmp / "serve.log").read_text())
            return fake_slack.socket_connections == 1

        try:
            wait_for(connected, STARTUP_SECONDS, "deepthread serve to open a Socket Mode connection")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nserve.log:\n{(tmp / 'serve.log').read_text()}") from None
        yield Stack(events_url="", env=env, logs=tmp)


# Runs a command and prints the peak resident memory (kB) of all its descendants, as the kernel
# accounts it for waited-for children (RUSAGE_CHILDREN: the largest process of the whole tree).
_PEAK_OF_TREE = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:]); "
                 "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def burst_worker_peak_kb(env: dict[str, str], log: Path, timeout: float = 300) -> int:
    """Run `deepthread worker --burst` until the queue is empty; the peak RSS of the worker and
    every process under it (work-horse, converter children), in kB."""
    from tests.processes import DEEPTHREAD, ROOT

    with log.open("wb") as out:
        done = subprocess.run([DEEPTHREAD[0], "-c", _PEAK_OF_TREE, *DEEPTHREAD, "worker", "--burst"], env=env,
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=out, timeout=timeout)
    return int(done.stdout.decode().strip().splitlines()[-1])


class Fleet:
    """Several `deepthread serve` replicas (HTTP mode, each on its own port) and workers against one
    Redis, as a team runs them past one machine: start, stop (SIGTERM) and kill (SIGKILL) each one.
    Logs are `serve-N.log` and `worker-N.log` under `logs`."""

    def __init__(self, logs: Path, env: dict[str, str]) -> None:
        self.logs = logs
        self.env = env
        self.serves: list[tuple[subprocess.Popen[bytes], Stack]] = []
        self.workers: list[subprocess.Popen[bytes]] = []
        self._opened: list[tuple[subprocess.Popen[bytes], object]] = []
        self._count = {"serve": 0, "worker": 0}

    def _start(self, command: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
        from tests.processes import DEEPTHREAD, ROOT

        self._count[command] += 1
        log = self.logs / f"{command}-{self._count[command]}.log"
        out = log.open("wb")
        process = subprocess.Popen(DEEPTHREAD + [command], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                   start_new_session=True)
        self._opened.append((process, out))
        return process, log

    def add_serve(self) -> Stack:
        port = free_port()
        env = {**self.env, "PORT": str(port)}
        process, log = self._start("serve", env)
        base = wait_listening(port, process, log)
        stack = Stack(events_url=f"{base}/slack/events", env=env, logs=self.logs)
        self.serves.append((process, stack))
        return stack

    def add_worker(self) -> subprocess.Popen[bytes]:
        process, _ = self._start("worker", self.env)
        self.workers.append(process)
        return process

    def terminate(self, process: subprocess.Popen[bytes], grace: float = 30.0) -> tuple[int, float]:
        """SIGTERM one process, as a deploy does; returns its exit code and how long it took to exit.
        One still running after `grace` (a platform's usual grace) is killed and reported as -9."""
        import signal
        import time

        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = -9
        for group in (self.workers, self.serves):
            for entry in list(group):
                if entry is process or (isinstance(entry, tuple) and entry[0] is process):
                    group.remove(entry)  # type: ignore[arg-type]
        return code, time.monotonic() - started

    def log(self, command: str, n: int) -> str:
        return (self.logs / f"{command}-{n}.log").read_text()

    def logs_of(self, command: str) -> str:
        return "\n".join(p.read_text() for p in sorted(self.logs.glob(f"{command}-*.log")))

    def close(self) -> None:
        from tests.processes import stop_process

        for process, out in self._opened:
            stop_process(process, grace=30)
            out.close()  # type: ignore[attr-defined]


@contextmanager
def fleet(logs: Path, env: dict[str, str], *, serves: int = 1, workers: int = 1) -> Iterator[Fleet]:
    """A Fleet with `serves` serve replicas and `workers` workers running."""
    running_fleet = Fleet(logs, env)
    try:
        for _ in range(serves):
            running_fleet.add_serve()
        for _ in range(workers):
            running_fleet.add_worker()
        yield running_fleet
    finally:
        running_fleet.close()


# --- many workspaces: Slack's install flow through a real serve ---------------------------------

CLIENT_ID = "1234567890.0987654321"
CLIENT_SECRET = "test-client-secret"
STATE_SECRET = "test-state-secret"


def workspaces_environment(redis_url: str, fake_slack: FakeSlack, model_url: str, web_url: str, port: int,
                           **extra: str) -> dict[str, str]:
    """serve and worker in multi-workspace mode (no SLACK_BOT_TOKEN), HTTP mode on `port`; the fake
    Slack learns the app's credentials and Redirect URL as an app's settings page would hold them."""
    from cryptography.fernet import Fernet

    fake_slack.configure_oauth(CLIENT_ID, CLIENT_SECRET, f"http://127.0.0.1:{port}/slack/oauth_redirect")
    return environment(
        **extra,
        SLACK_CLIENT_ID=CLIENT_ID, SLACK_CLIENT_SECRET=CLIENT_SECRET, SLACK_STATE_SECRET=STATE_SECRET,
        DEEPTHREAD_TOKEN_KEY=Fernet.generate_key().decode(), SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=f"{fake_slack.url}/api/", ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=model_url,
        REDIS_URL=redis_url, DEEPTHREAD_SEARCH="searxng", SEARXNG_URL=web_url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1",
        PORT=str(port),
    )


@contextmanager
def workspaces_stack(tmp: Path, fake_slack: FakeSlack, *, redis_url: str, model_url: str, web_url: str,
                     **extra: str) -> Iterator[tuple[str, Stack]]:
    """`deepthread serve` (HTTP, multi-workspace) and one worker; yields (serve's base URL, stack)."""
    port = free_port()
    env = workspaces_environment(redis_url, fake_slack, model_url, web_url, port, **extra)
    with running(["serve"], env, tmp / "serve.log") as serve, running(["worker"], env, tmp / "worker.log"):
        base = wait_listening(port, serve, tmp / "serve.log")
        yield base, Stack(events_url=f"{base}/slack/events", env=env, logs=tmp)


def begin_install(base: str, team: str | None = None) -> tuple[str, str]:
    """A person starts an install as a browser would: /slack/install, then Slack's authorize page
    (the fake approves at once). Returns the state cookie /slack/install set and the URL Slack sends
    the browser back to (/slack/oauth_redirect with the code and state)."""
    import html

    with httpx.Client(follow_redirects=False, timeout=10) as browser:
        page = browser.get(f"{base}/slack/install", params={"team": team} if team else None)
        assert page.status_code == 200, page.text
        cookie = page.headers["set-cookie"].split(";", 1)[0]
        link = html.unescape(re.search(r'<a href="([^"]+)"', page.text).group(1))
        consent = browser.get(link)
        assert consent.status_code == 302, consent.text
        return cookie, consent.headers["location"]


def install(base: str, team: str | None = None) -> httpx.Response:
    """A whole install: begin it and come back to /slack/oauth_redirect with the state cookie.
    Returns the last page. The cookie is sent by hand: it is `Secure`, and browsers send those to
    localhost over plain HTTP where httpx's cookie jar would not."""
    cookie, back = begin_install(base, team)
    return httpx.get(back, headers={"Cookie": cookie}, timeout=10)


# --- Socket Mode: what Slack delivers and what the app answered --------------------------------------


def deliver(slack: FakeSlack, envelope: dict) -> str:
    """An Events API envelope over Socket Mode, its message seeded as Slack holds it (when it has one);
    waits for the ack; returns the event's ts (or "")."""
    ts = slack.seed_event(envelope) if "ts" in envelope.get("event", {}) else ""
    envelope_id = slack.send_socket_event(envelope)
    wait_for(lambda: envelope_id in slack.socket_acks, 5, "the ack")
    return ts


def interact(slack: FakeSlack, payload: dict) -> None:
    """An interaction (a button, Enter in a dispatching input) over Socket Mode; waits for the ack."""
    import uuid

    envelope_id = str(uuid.uuid4())
    slack.send_socket_frame({"envelope_id": envelope_id, "payload": payload, "type": "interactive",
                             "accepts_response_payload": False})
    wait_for(lambda: envelope_id in slack.socket_acks, 5, "the ack")
