"""How a limit no one names is learned from the answers alone (Bedrock, Vertex, a gateway that
sends no `anthropic-ratelimit-*` headers): the rule, in one place. The in-memory limiter
(capacity.py) calls `learned_step`; jobs/budgets/capacity.py's Lua is the same rule, held to it by
the same tests (tests/jobs/test_capacity.py) and by bench.model_capacity's header-less case.

The requests limit moves; the learned token limits follow it in the same proportion.

- A throttled answer cuts it, unless the cut already counted it (the request was granted before
  the last cut), or it is the same request throttled again after others were answered in between,
  or for the LEARN_CUTS_PER_REQUEST-th time (the throttling is then the request's own, too big or
  its key's, and must not drag the other runs' share down). After answers the cut is gentle (LEARN_DECREASE: the quota is
  near); a cut that follows a cut with no answer in between is deeper (LEARN_DESCENT: still far
  above, as at the start). The limit before the cut is remembered as the ceiling.
- After a cut, one request at a time goes until one is answered (the probe): a descent costs one
  throttled answer per cut, not one per waiting run.
- An answer raises it, while it holds requests back (a deployment asking less than its limit
  learns nothing about the quota): below LEARN_NEAR of the ceiling by LEARN_GAP_SHARE of the gap
  (back near the quota within a few answers, at any quota), above it by LEARN_PROBE_PER_ANSWER
  requests a minute (the quota may have grown), and with no ceiling yet by LEARN_RAISE_PER_ANSWER.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "LEARN_BINDING_SHARE",
    "LEARN_DECREASE",
    "LEARN_DESCENT",
    "LEARN_CUTS_PER_REQUEST",
    "LEARN_FLOOR_REQUESTS_PER_MINUTE",
    "LEARN_GAP_SHARE",
    "LEARN_NEAR",
    "LEARN_PROBE_PER_ANSWER",
    "LEARN_RAISE_PER_ANSWER",
    "Step",
    "learned_step",
]

# A throttled answer after answers went through keeps this share of the limit (the quota is near);
# one that follows a cut with no answer in between keeps LEARN_DESCENT (still far above: the descent
# from the start, 1,000 a minute, to a quota of 40 takes three throttled answers). Chosen with
# bench.model_capacity's header-less case (0.9 / 0.5 drew 14-18 throttles per hundred answers).
LEARN_DECREASE = 0.7
LEARN_DESCENT = 0.3
# One request throttled again and again cuts a learned limit this many times at most (from the
# start, 1,000 a minute, to 27): alone, it cannot drag the limit to the floor and wait a minute a retry.
LEARN_CUTS_PER_REQUEST = 3
# Below this share of the ceiling an answer closes LEARN_GAP_SHARE of the gap to it.
LEARN_NEAR = 0.97
LEARN_GAP_SHARE = 0.03
# Requests a minute an answer adds above the ceiling, and with no ceiling yet (never throttled).
LEARN_PROBE_PER_ANSWER = 0.05
LEARN_RAISE_PER_ANSWER = 0.25
# A learned limit rises only while a learned bucket is under this share of its limit (it holds
# requests back).
LEARN_BINDING_SHARE = 0.5
# A learned limit never falls below this: one request a minute still makes progress.
LEARN_FLOOR_REQUESTS_PER_MINUTE = 1.0


@dataclass(frozen=True)
class Step:
    """The learned requests limit and ceiling after one answer; `cut`: it was a cut."""

    limit: float
    ceiling: float
    cut: bool = False


def learned_step(
    limit: float, ceiling: float, *, throttled: bool, answered: bool, cut_due: bool, descending: bool, binding: bool
) -> Step:
    """One answer's move of the learned requests limit (see the module's docstring)."""
    if throttled:
        if not cut_due:
            return Step(limit, ceiling)
        factor = LEARN_DESCENT if descending else LEARN_DECREASE
        return Step(max(LEARN_FLOOR_REQUESTS_PER_MINUTE, limit * factor), limit, cut=True)
    if not (answered and binding):
        return Step(limit, ceiling)
    target = ceiling * LEARN_NEAR
    if limit < target:
        return Step(limit + max(LEARN_PROBE_PER_ANSWER, (target - limit) * LEARN_GAP_SHARE), ceiling)
    return Step(limit + (LEARN_PROBE_PER_ANSWER if ceiling > 0 else LEARN_RAISE_PER_ANSWER), ceiling)
