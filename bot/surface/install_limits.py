"""How often one client may open the install page: a few times a minute, in this process.

`GET /slack/install` needs no authentication, and each visit begins an install flow (a state in
Redis, bot/slack/oauth_state.py). A person installs once, perhaps after a retry or two; a script
opened it 4,571 times in ten seconds. So each client (the connection's address) gets
VISITS_PER_CLIENT visits a WINDOW_SECONDS, and a visit past that is answered 429 with when to come
back. The deployment-wide cap on flows in progress (MAX_PENDING_STATES) holds across replicas and
addresses; this keeps one client from taking it all.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

__all__ = ["CLIENTS_TRACKED", "VISITS_PER_CLIENT", "WINDOW_SECONDS", "InstallLimiter"]

# Install pages one client may open in a window: a person's install and its retries.
VISITS_PER_CLIENT = 10
WINDOW_SECONDS = 60.0
# Clients remembered at once (the least recently seen forgotten first): a bound on this memory.
CLIENTS_TRACKED = 10_000


class InstallLimiter:
    def __init__(
        self,
        visits: int = VISITS_PER_CLIENT,
        window: float = WINDOW_SECONDS,
        tracked: int = CLIENTS_TRACKED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.visits, self.window, self.tracked, self.clock = visits, window, tracked, clock
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()

    def wait(self, client: str) -> float:
        """0 when `client` may open the page now (the visit is counted), else the seconds to wait."""
        now = self.clock()
        times = self._seen.pop(client, None) or deque()
        while times and times[0] <= now - self.window:
            times.popleft()
        self._seen[client] = times
        while len(self._seen) > self.tracked:
            self._seen.popitem(last=False)
        if len(times) >= self.visits:
            return max(times[0] + self.window - now, 0.001)
        times.append(now)
        return 0.0
