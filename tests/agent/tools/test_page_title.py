"""A page's title is found in one pass: a hostile page of 20,000 unclosed <title> tags took 12 s
under the old lazy pattern (issue 35, item 2)."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from agent.tools.extract import _title_of


@given(st.text(alphabet="ab <>/", max_size=30))
def test_the_title_is_the_text_between_the_first_title_tags(inner: str) -> None:
    inner = inner.replace("</title>", "")
    page = f'<html><head><title lang="en">{inner}</title></head><title>second</title>'.encode()
    assert _title_of(page) == " ".join(inner.split())


def test_a_page_of_unclosed_title_tags_is_read_in_linear_time() -> None:
    timings = []
    for count in (2_000, 20_000):
        start = time.perf_counter()
        assert _title_of(b"<title>" * count) == ""
        timings.append(time.perf_counter() - start)
    assert timings[1] < max(timings[0], 1e-4) * 30
