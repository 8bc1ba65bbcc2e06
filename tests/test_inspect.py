"""`deepthread inspect`: every request of a real run, as dispatched, with totals."""
from __future__ import annotations

import json
import re
import subprocess

from redis import Redis
from rq import Queue, SimpleWorker

import jobs
from agent import AgentConfig, FetchConfig, SearchConfig
from jobs import JobRuntime, Run, RunStore, enqueue
from jobs.keys import QUEUE
from tests.processes import DEEPTHREAD, ROOT, environment


def test_inspect_lists_requests_and_prints_one_in_full(redis: Redis, redis_url: str, fake_model, fake_web) -> None:
    jobs.configure(JobRuntime(
        agent=AgentConfig(search=SearchConfig(provider="searxng", searxng_url=fake_web.url),
                          fetch=FetchConfig(allow=["127.0.0.1"])),
        anthropic_api_key="k", anthropic_base_url=fake_model.url, redis_url=redis_url))
    state = RunStore(redis).create(Run(question="expense ratio VTI SCHB ITOT"))
    enqueue(redis, state.run)
    SimpleWorker([Queue(QUEUE, connection=redis)], connection=redis).work(burst=True)

    def inspect(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(DEEPTHREAD + ["inspect", *args], env=environment(REDIS_URL=redis_url), cwd=ROOT,
                              capture_output=True, text=True, timeout=30)

    listing = inspect(state.run.id)
    assert listing.returncode == 0, listing.stderr
    rows = [line for line in listing.stdout.splitlines() if re.match(r"^\s*\d+\s+(turn|extract|summary)\s", line)]
    assert len(rows) == len(fake_model.requests), "one row per model request, extraction calls included"
    assert {"turn", "extract"} <= {row.split()[1] for row in rows}
    assert "Model requests:" in listing.stdout, "each turn shows its budget block"
    assert "from cache" in listing.stdout and "est. $" in listing.stdout
    assert f"{len(rows)} requests (" in listing.stdout

    full = json.loads(inspect(state.run.id, "1").stdout)
    assert full["request"]["messages"] == fake_model.requests[0]["messages"], "byte-for-byte what was sent"
    assert full["request"]["tools"] == fake_model.requests[0]["tools"]

    assert "does not exist" in inspect(state.run.id, "999").stdout
    missing = inspect("nope")
    assert missing.returncode == 1 and "No model requests are logged" in missing.stdout
