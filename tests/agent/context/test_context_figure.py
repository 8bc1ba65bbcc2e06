"""The context figure the model is shown ("Context: N of B tokens" in the budget block) is the size of
the request it is shown in, from the first turn on: tools, system prompt, history and the block itself
(it said "138 of 200,000" on a first turn of ~7,400 tokens, counting the history alone). Generated over
runs of different lengths and questions, against what the fake Messages API counts for each request
(its count is the API's rule of thumb, four characters a token, over the request as sent)."""
from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.anthropic import _pieces, _tokens
from tests.fakes.policies import LongRunPolicy, is_extraction, is_summary_request
from tests.helpers import research_events

FIGURE = re.compile(r"Context: ([\d,]+) of [\d,]+ tokens")
# The figure between responses adds an estimate of what was added since the last response's count.
TOLERANCE_SHARE, TOLERANCE_TOKENS = 0.01, 50


def counted(request: dict[str, Any]) -> int:
    """The request's input tokens as the fake API counts them (input + cache writes + cache reads)."""
    pieces, _ = _pieces(request)
    return _tokens(sum(len(p) for p in pieces))


def shown(request: dict[str, Any]) -> int | None:
    found = FIGURE.findall(str(request["messages"][-1]["content"]))
    return int(found[-1].replace(",", "")) if found else None


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.integers(1, 24), words=st.integers(1, 400))
async def test_the_context_figure_is_the_size_of_the_request_it_is_sent_in(
        fake_model: Any, fake_web: Any, turns: int, words: int) -> None:
    fake_model.policy = LongRunPolicy(turns)
    before = len(fake_model.requests)
    await research_events(fake_model, fake_web, "Compare the expense ratios of VTI, SCHB and ITOT " + "fee " * words)
    requests = [r for r in fake_model.requests[before:] if not is_extraction(r) and not is_summary_request(r)]
    figures = [(shown(r), counted(r)) for r in requests]
    assert figures and all(figure is not None for figure, _ in figures), "every turn shows the figure"
    first_figure, first_count = figures[0]
    assert first_figure is not None and first_count > 1000, "a first request is mostly tools and system prompt"
    for n, (figure, count) in enumerate(figures, 1):
        assert figure is not None
        assert abs(figure - count) <= max(TOLERANCE_TOKENS, TOLERANCE_SHARE * count), \
            f"turn {n}: the model was shown {figure:,} tokens for a request of {count:,}"
