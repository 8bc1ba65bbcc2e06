"""The scripted model in a process of its own, so a benchmark measures only our process.

    python -m bench.fake_model PORT TURNS
"""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.policies import LongRunPolicy
from tests.fakes.server import free_port

from .common import ROOT, START_TIMEOUT_SECONDS, stop


@contextmanager
def fake_model_process(turns: int) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "bench.fake_model", str(port), str(turns)], cwd=ROOT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the fake model server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m bench.fake_model PORT TURNS")
    web.run_app(FakeAnthropic(LongRunPolicy(int(sys.argv[2]))).app(), host="127.0.0.1", port=int(sys.argv[1]),
                print=None)
