"""serve listens with a backlog that holds a burst of Slack's events (DEEPTHREAD_LISTEN_BACKLOG, default
1024): with aiohttp's 128, 200 connections at once overflowed it (SYNs dropped, each retried by its
client a second later). Read from the kernel with `ss` (iproute2), which shows a listening socket's
backlog as its Send-Q."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bot.settings import DEFAULT_LISTEN_BACKLOG
from tests.e2e.stack import serve_only, stack_environment

pytestmark = pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) is not installed")


def backlog_of(port: int) -> int:
    """The listening socket's backlog on `port`, as the kernel holds it (capped by net.core.somaxconn)."""
    out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    [line] = [line for line in out.splitlines() if line.strip()]
    return int(line.split()[2])


def somaxconn() -> int:
    return int(Path("/proc/sys/net/core/somaxconn").read_text())


@pytest.mark.parametrize("setting", [None, "2000"], ids=["default", "set"])
def test_serve_listens_with_the_backlog_it_is_given(setting: str | None, tmp_path: Path, redis_url: str, fake_slack,
                                                    fake_model, fake_web) -> None:
    env = stack_environment(redis_url, fake_slack, fake_model, fake_web)
    if setting is not None:
        env["DEEPTHREAD_LISTEN_BACKLOG"] = setting
    wanted = int(setting) if setting is not None else DEFAULT_LISTEN_BACKLOG
    with serve_only(env, tmp_path / "serve.log") as (_, stack):
        port = int(stack.env["PORT"])
        assert backlog_of(port) == min(wanted, somaxconn())
