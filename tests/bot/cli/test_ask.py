"""`deepthread ask`: the report file fills in as sections land, Ctrl-C keeps it, inspect reads the run."""
from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.fakes.anthropic import Reply
from tests.fakes.policies import SteadyPolicy
from tests.processes import DEEPTHREAD, ROOT, environment, wait_for


def ask_env(fake_model, fake_web, **extra: str) -> dict[str, str]:
    return environment(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=fake_model.url, DEEPTHREAD_SEARCH="searxng",
                       SEARXNG_URL=fake_web.url, DEEPTHREAD_FETCH_ALLOW="127.0.0.1", **extra)


def test_ctrl_c_keeps_the_sections_already_written(tmp_path: Path, fake_model, fake_web) -> None:
    steady = SteadyPolicy(turns=50)  # a section at turn 2

    def section_then_a_slow_model(request: dict[str, Any]) -> Reply:
        reply = steady(request)
        if steady.turn >= 2:  # from the next request on, the model takes a minute: Ctrl-C lands mid-run
            fake_model.delay = 60.0
        return reply

    fake_model.policy = section_then_a_slow_model
    out = tmp_path / "report.md"
    process = subprocess.Popen(DEEPTHREAD + ["ask", "expense ratio VTI SCHB ITOT", "--out", str(out)],
                               env=ask_env(fake_model, fake_web), cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: out.exists() and "## Fees" in out.read_text(), 40, "the first section in the file")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert f"Interrupted: the report so far is in {out}" in stderr and "Traceback" not in stderr
    report = out.read_text()
    assert "## Fees" in report and "VTI charges the lowest fee" in report and "Interrupted (Ctrl-C)" in report
    assert not list(tmp_path.glob("*.partial")), "writes are atomic"


def test_an_ask_run_can_be_inspected_when_redis_is_configured(tmp_path: Path, redis_url: str, fake_model,
                                                              fake_web) -> None:
    out = tmp_path / "report.md"
    done = subprocess.run(DEEPTHREAD + ["ask", "expense ratio VTI SCHB ITOT", "--out", str(out)],
                          env=ask_env(fake_model, fake_web, REDIS_URL=redis_url), cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    run_id = re.search(r"deepthread inspect (\w+)", done.stderr).group(1)
    listing = subprocess.run(DEEPTHREAD + ["inspect", run_id], env=environment(REDIS_URL=redis_url), cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
    assert listing.returncode == 0 and f"{len(fake_model.requests)} requests (" in listing.stdout, listing.stdout
