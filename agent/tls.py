"""One TLS context per process for every HTTP client a run opens (the model SDK's, the web fetcher's).

Building one loads the CA bundle, ~50 ms of CPU; each run opens two clients, so on a loop that many
runs share (jobs/workers/concurrent_worker.py) fifty runs starting together would stall it for seconds. A
context is safe to share between clients and connections; it is what httpx would build itself.
"""

from __future__ import annotations

import ssl
from functools import cache

import certifi

__all__ = ["verified"]


@cache
def verified() -> ssl.SSLContext:
    return ssl.create_default_context(cafile=certifi.where())
