"""The chaos schedule: seeded, printed before the soak starts, and carried out in turn. Each fault
records when it began and when its injection was over (the process replaced or restarted, the new
primary answering, the outage or the burst ended): the soak measures recovery from that end."""
from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from tests.processes import SentinelTopology, wait_for

from .fakes import SoakModel, SoakSlack
from .topology import ROLES, Fleet

KINDS = ("rolling restart", "SIGKILL", "Redis failover", "model outage", "Slack 429 burst")


@dataclass
class Fault:
    kind: str
    at: float  # seconds after the load began
    target: str = ""  # the role killed, when one is
    seconds: float = 0.0  # how long an outage or burst lasts
    began: float | None = None  # monotonic
    ended: float | None = None
    note: str = ""

    def describe(self) -> str:
        what = self.kind + (f" of {self.target}" if self.target else "")
        return what + (f" for {self.seconds:.0f} s" if self.seconds else "")


def schedule(seed: int, load_seconds: float, *, outage_seconds: float, burst_seconds: float) -> list[Fault]:
    """Every kind in turn (a second round when there is time), the first after a warm-up, the last
    leaving time to recover before the load ends."""
    rng = random.Random(seed)
    warm_up = min(120.0, load_seconds * 0.1)
    last = load_seconds - min(180.0, load_seconds * 0.25)
    count = max(len(KINDS), int((last - warm_up) // 150) + 1) if load_seconds >= 600 else len(KINDS)
    gap = (last - warm_up) / max(1, count - 1)
    faults = []
    victims = rng.sample(ROLES, len(ROLES))  # each SIGKILL a different process, in a seeded order
    for n in range(count):
        kind = KINDS[n % len(KINDS)]
        fault = Fault(kind, round(warm_up + n * gap + rng.uniform(-0.1, 0.1) * gap, 1))
        if kind == "SIGKILL":
            fault.target = victims[sum(f.kind == "SIGKILL" for f in faults) % len(victims)]
        elif kind == "model outage":
            fault.seconds = outage_seconds
        elif kind == "Slack 429 burst":
            fault.seconds = burst_seconds
        faults.append(fault)
    return faults


def _linked(port: int) -> bool:
    from redis import Redis
    from redis.exceptions import RedisError

    try:
        return Redis(port=port, socket_timeout=1).info("replication").get("master_link_status") == "up"
    except RedisError:
        return False


class Chaos:
    def __init__(self, fleet: Fleet, redis: SentinelTopology, model: SoakModel, slack: SoakSlack,
                 log: Callable[[str], None]) -> None:
        self.fleet = fleet
        self.redis = redis
        self.model = model
        self.slack = slack
        self.log = log

    def inject(self, fault: Fault) -> None:
        fault.began = time.monotonic()
        self.log(f"fault: {fault.describe()}")
        if fault.kind == "rolling restart":
            for role in ROLES:  # one at a time, each successor up before its predecessor is stopped
                self.fleet.replace(role)
            fault.note = "; ".join(f"{life.role}-{life.generation} {life.how}" for life in self.fleet.lives
                                   if life.how.startswith("SIGTERM") and life.ended and life.ended >= fault.began)
        elif fault.kind == "SIGKILL":
            self.fleet.kill(fault.target)
        elif fault.kind == "Redis failover":
            old = self.redis.failover()  # the sentinels move the primary, as before a planned restart
            wait_for(lambda: _linked(old), 30, "the old primary to sync as a replica")
            killed = self.redis.kill_primary()  # then the new primary's machine is lost
            new = self.redis.wait_for_failover(killed)
            self.redis.revive(killed)  # and comes back, as a replica
            fault.note = f"primary {old} → {killed} (SENTINEL FAILOVER) → {new} (SIGKILL of {killed})"
        elif fault.kind == "model outage":
            self.model.fail_for(fault.seconds, 529)
            time.sleep(fault.seconds)
        elif fault.kind == "Slack 429 burst":
            self.slack.rate_limit_everything(fault.seconds, retry_after=2)
            time.sleep(fault.seconds)
        fault.ended = time.monotonic()
        self.log(f"fault over: {fault.describe()} after {fault.ended - fault.began:.0f} s"
                 + (f" ({fault.note})" if fault.note else ""))
