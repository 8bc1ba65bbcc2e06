"""A report's sync converts only what changed (bot/slack/conversion_memo.py), and a remembered
conversion is exactly what converting again would give: generated texts, footnotes and link
policies, changed between calls, never get an output built on answers that no longer hold. Before
the memo, every sync re-parsed every section several times (seconds of serve's CPU for a report
dense with brackets, in the threads every run's syncs share)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from agent import SectionWritten, Source, SourceAdded
from bot.publishing.canvas_render import render_canvas
from bot.publishing.report_render import render_report
from bot.slack import canvas_markdown, mrkdwn
from bot.slack.conversion_memo import MIN_MEMO_CHARS, ConversionMemo
from jobs import Run, RunState
from jobs.records.state import apply_event

URLS = [f"https://site{i}.example/page" for i in range(4)] + ["https://evil.example/?d=secret"]
PIECES = (
    *(f"[{n}]" for n in range(1, 5)),
    *(f"[label]({url})" for url in URLS),
    *(f" {url} " for url in URLS),
    *(f"<{url}>" for url in URLS),
    "**bold** ", "_em_ ", "`code` ", "- item\n", "\n\n", "| a | b |\n|---|---|\n| 1 | 2 |\n", "[", "]", "plain words. ",
)
texts = st.lists(st.sampled_from(PIECES), min_size=1, max_size=80).map(lambda parts: "".join(parts) * 4)
footnotes = st.dictionaries(st.integers(1, 4), st.sampled_from(URLS), max_size=4)
policies = st.one_of(st.none(), st.frozensets(st.sampled_from(URLS)))


def _policy(allowed: frozenset[str] | None):
    return None if allowed is None else (lambda url: url in allowed)


@settings(max_examples=150, deadline=None)
@given(text=texts, calls=st.lists(st.tuples(footnotes, policies), min_size=2, max_size=6))
def test_a_remembered_conversion_is_what_converting_again_gives(text: str, calls) -> None:
    memo = ConversionMemo(mrkdwn._convert)
    canvas = ConversionMemo(canvas_markdown._convert)
    for notes, allowed in calls:
        assert memo.convert(text, notes, _policy(allowed)) == mrkdwn._convert(text, notes, _policy(allowed))
        assert canvas.convert(text, notes, None) == canvas_markdown._convert(text, notes, None)


def test_the_same_words_in_two_runs_link_only_what_each_run_may() -> None:
    body = "The figure is on [the page](https://evil.example/?d=secret) and [the other](https://site0.example/page). " * 4
    memo = ConversionMemo(mrkdwn._convert)
    first = memo.convert(body, {}, lambda url: True)  # a run that read both pages
    second = memo.convert(body, {}, lambda url: "site0" in url)  # one that read only the first
    assert "<https://evil.example/?d=secret|" in first
    assert "https://evil.example" not in second.replace("(evil.example)", "")
    assert memo.conversions == 2, "the second run's policy answered one question otherwise: converted again"


def test_an_answer_that_still_holds_reuses_the_conversion_and_one_that_changed_does_not() -> None:
    body = "Fees fell [1] and rose [2]. " * 20
    memo = ConversionMemo(mrkdwn._convert)
    memo.convert(body, {1: URLS[0], 2: URLS[1]}, None)
    memo.convert(body, {1: URLS[0], 2: URLS[1], 3: URLS[2]}, None)  # a new source this body does not cite
    assert memo.conversions == 1
    changed = memo.convert(body, {1: URLS[0], 2: URLS[3]}, None)  # footnote 2 renumbered to another source
    assert memo.conversions == 2 and URLS[3] in changed


def test_the_memo_keeps_no_more_than_its_bound_and_skips_short_texts() -> None:
    memo = ConversionMemo(mrkdwn._convert, max_chars=5_000)
    for n in range(20):
        memo.convert(f"Section {n}. " + "words " * 200, {}, None)
    assert memo._chars <= 5_000
    short = "a" * (MIN_MEMO_CHARS - 1)
    memo.convert(short, {}, None)
    memo.convert(short, {}, None)
    assert len(memo._entries) <= 5_000 // 1_000 + 1


def _dense_report(sections: int) -> RunState:
    rnd = random.Random(7)
    state = RunState(run=Run(channel="C1", thread_ts="1.0", requester="U1", question="fees?"))
    for i in range(1, 6):
        state = apply_event(state, SourceAdded(source=Source(marker=f"s{i}", url=URLS[i % 4], title="t", passage="p")))
    for k in range(1, sections + 1):
        body = "".join(rnd.choice(["Fees fell [s1]. ", "[" * 10 + "]" * 10, "- [\n", "**0.03%** [s2] "]) for _ in range(400))
        state = apply_event(state, SectionWritten(section_id=f"sec{k}", title=f"Part {k}", body=body))
    return state


def test_a_sync_of_an_unchanged_report_converts_nothing_and_a_new_section_converts_only_itself() -> None:
    state = _dense_report(6)
    first = render_report(state), render_canvas(state)
    before = mrkdwn._MEMO.conversions, canvas_markdown._MEMO.conversions
    assert (render_report(state), render_canvas(state)) == first
    assert (mrkdwn._MEMO.conversions, canvas_markdown._MEMO.conversions) == before, "nothing converted again"
    grown = apply_event(state, SectionWritten(section_id="sec7", title="Part 7", body="New findings [s3]. " * 30))
    render_report(grown)
    render_canvas(grown)
    message, canvas = mrkdwn._MEMO.conversions - before[0], canvas_markdown._MEMO.conversions - before[1]
    assert (message, canvas) == (1, 1), "only the new section is converted, once for each"
