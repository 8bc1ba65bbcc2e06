"""Generated Markdown with hostile link targets and labels: nothing becomes a mention,
a broadcast or an unclosed `<`, and real http(s) links still work, whole.

The generator covers CommonMark's link and image syntax (inline, `<…>` destinations,
titles, backslash escapes and entity references in destinations, full, collapsed and
shortcut references, autolinks, images, images inside links) in paragraphs, lists,
quotes, headings, emphasis and tables.
"""
from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent import Finished, Progress, SectionWritten, Source, SourceAdded
from agent.events import Disagreement
from bot import limits
from bot.publishing.progress_render import render_progress
from bot.publishing.report_render import render_report_parts
from bot.slack.mrkdwn_escaping import MAX_LINK_CHARS, MAX_LINK_URL_CHARS, URL_LABEL_CHARS, link, link_target
from bot.slack.mrkdwn_split import MIN_SPLIT_LIMIT, split_text
from bot.slack.mrkdwn import to_mrkdwn
from jobs import Run, RunState
from jobs.records.state import apply_event
from tests.fakes.hostile_text import ATOM, documents, hostile_text, labels, live_markup, targets

PROFILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- to_mrkdwn ----------------------------------------------------------------------


@PROFILE
@given(documents())
@example("[x](!channel) [x](@U1) [x](#C1) [a](#frag) [x](<!here>) ![i](!everyone) [x](!subteam^S1)")
@example("[x][r]\n\n[r]: <@U024BE7LH>")
@example("[x](&#33;channel) [y](&#64;U1) [z](\\!here) <a+b:!channel>")
@example("<https://x.test/" + "a" * 3_100 + ">")
# Found by this test in CI: a code span opened inside a link target that is shown as text.
@example("[](!" + "a" * 80 + ")\n\n[](!`" + "a" * 80 + ")@here`[](!" + "a" * 80 + ")@here`[](!" + "a" * 80 + ")")
@example("[" + "&<" * 400 + "](https://x.test/" + "&|" * 600 + ")")  # escaping and encoding grow both
def test_no_markdown_can_produce_a_mention_a_broadcast_or_an_unclosed_bracket(markdown: str) -> None:
    out = to_mrkdwn(markdown)
    assert live_markup(out) == []
    assert all(len(m.group()) <= MAX_LINK_CHARS < limits.SECTION_TEXT_CHARS for m in ATOM.finditer(out)), \
        "every link fits one section block"


@PROFILE
@given(documents(), st.dictionaries(st.integers(1, 9), targets(), max_size=4))
def test_footnote_urls_cannot_produce_live_markup(markdown: str, urls: dict[int, str]) -> None:
    text = markdown + " " + " ".join(f"[{n}]" for n in range(1, 10))
    assert live_markup(to_mrkdwn(text, urls)) == []


@PROFILE
@given(targets(), labels())
def test_link_helper_cannot_produce_live_markup(url: str, label: str) -> None:
    assert live_markup(link(url, label)) == []


@PROFILE
@given(st.sampled_from(["!", "@", "#", "!subteam^", "&#33;", "&#64;", "&#35;"]), hostile_text, labels(),
       st.sampled_from(["[{l}]({t})", "[{l}](<{t}>)", "![{l}]({t})", "[{l}][r]\n\n[r]: {t}"]))
def test_mention_broadcast_and_fragment_targets_are_never_links(prefix: str, tail: str, label: str,
                                                                 form: str) -> None:
    markdown = form.format(l=label.replace("\n", " "), t=prefix + tail.replace("\n", " "))
    out = to_mrkdwn(markdown)
    assert live_markup(out) == []
    assert not [m for m in ATOM.finditer(out) if not m.group(1).lower().startswith(("http", "mailto"))]


# Real, ordinary URLs: letters, digits and the path/query characters pages use.
url_paths = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-._~/?=&%+", max_size=60)


@PROFILE
@given(st.sampled_from(["http", "https", "HTTPS"]), st.from_regex(r"[a-z]{1,12}\.(test|org)", fullmatch=True),
       url_paths, st.integers(0, MAX_LINK_URL_CHARS - 200), labels())
def test_http_links_stay_clickable_with_the_whole_target(scheme: str, host: str, path: str, padding: int,
                                                          label: str) -> None:
    url = f"{scheme}://{host}/{path}{'p' * padding}"
    out = to_mrkdwn(f"[{label.replace(chr(10), ' ')}](<{url}>)")
    target = link_target(to_mrkdwn_href(url))
    assert target is not None
    atoms = [m.group(1) for m in ATOM.finditer(out)]
    assert any(a.split("|", 1)[0] == target for a in atoms), out[:300]
    assert all(len(a) + 2 <= MAX_LINK_CHARS for a in atoms)


def to_mrkdwn_href(url: str) -> str:
    """The destination as markdown-it normalises it (percent-encoding), as the renderer sees it."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").normalizeLink(url)


@PROFILE
@given(st.integers(MAX_LINK_URL_CHARS + 1, 6_000))
def test_over_long_url_is_shown_as_text_never_a_link_cut_in_two(length: int) -> None:
    url = "https://x.test/" + "a" * length
    for markdown in (f"[label]({url})", f"<{url}>", f"![alt]({url})"):
        out = to_mrkdwn(markdown)
        assert "<" not in out, "too long for one link: shown as text"
        assert "x.test" in out and len(out) < 200


@PROFILE
@given(st.integers(URL_LABEL_CHARS + 1, MAX_LINK_URL_CHARS - 20))
def test_long_bare_url_gets_a_short_label_and_keeps_its_whole_target(length: int) -> None:
    url = "https://x.test/" + "a" * length
    out = to_mrkdwn(f"see <{url}>")
    assert out.startswith(f"see <{url}|https://x.test/")
    label = out.split("|", 1)[1].rstrip(">")
    assert len(label) <= URL_LABEL_CHARS and label.endswith("…")


# --- splitting into blocks ----------------------------------------------------------


@PROFILE
@given(st.lists(documents(), min_size=1, max_size=6).map("\n\n".join),
       st.sampled_from([MIN_SPLIT_LIMIT, 64, 200, limits.SECTION_TEXT_CHARS]))
@example("x" * 40 + "\u200d[](mailto:@here<!channel>)\u200d" + "y" * 40, MIN_SPLIT_LIMIT)
@example("word\n\nx[" + "a" * 41 + "](https://u1.test)tailtail", 64)  # a link one character into a chunk
def test_split_never_cuts_a_link_open(markdown: str, limit: int) -> None:
    mrkdwn = to_mrkdwn(markdown)
    chunks = split_text(mrkdwn, limit)
    whole = {m.group() for m in ATOM.finditer(mrkdwn)}
    for chunk in chunks:
        assert len(chunk) <= limit
        # (A tiny limit may cut "a@here" mid-word; only `<…>` markup matters here.)
        assert [p for p in live_markup(chunk) if not p.startswith("broadcast")] == [], chunk
        assert {m.group() for m in ATOM.finditer(chunk)} <= whole, "every link in a chunk is one of the originals"


@PROFILE
@given(documents())
def test_at_slack_section_size_every_link_stays_a_link(markdown: str) -> None:
    mrkdwn = to_mrkdwn(markdown)
    chunks = split_text(mrkdwn, limits.SECTION_TEXT_CHARS)
    assert [m.group() for c in chunks for m in ATOM.finditer(c)] == [m.group() for m in ATOM.finditer(mrkdwn)]


# --- what the bot sends: blocks and the top-level notification text ----------------

FETCHED = datetime(2026, 11, 30, 9, 15, tzinfo=UTC)
REQUESTER = "U0ANA"
OUR_MENTION = frozenset({f"<@{REQUESTER}>"})


def _texts(node: object) -> list[str]:
    """Every string under a "text" key of the blocks: each is mrkdwn Slack parses."""
    if isinstance(node, list):
        return [text for item in node for text in _texts(item)]
    if not isinstance(node, dict):
        return []
    found = []
    for key, value in node.items():
        found += [value] if key == "text" and isinstance(value, str) else _texts(value)
    return found


def _state(question: str, body: str, url: str, title: str, activity: str) -> RunState:
    state = RunState(run=Run(channel="C0TEST", thread_ts="1700000000.000001", requester=REQUESTER,
                             question=question, team="T0TEST"))
    source = Source(marker="s1", url=url, title=title, passage=activity, retrieved_at=FETCHED)
    for event in (SourceAdded(source=source), Progress(phase="researching", activity=activity),
                  Disagreement(text=title),
                  SectionWritten(section_id="a", title=title, body=body + " [s1]")):
        state = apply_event(state, event)  # type: ignore[arg-type]
    return state


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text.filter(str.strip), documents(), targets(), hostile_text, hostile_text)
@example("<!here>", "x", "https://[aaaa", "", "")  # a malformed source URL is shown, not raised
@example("Why is <!channel> & <@U1> <#C1|x> <!subteam^S1|team> @here so slow?", "[x](!here)", "@U1", "t", "a")
def test_report_and_progress_send_no_live_mention_for_a_hostile_question(
        question: str, body: str, url: str, title: str, activity: str) -> None:
    state = _state(question, body, url, title, activity)
    report = render_report_parts(state).message
    progress = render_progress(state)
    for message in (report, progress):
        assert live_markup(message.text) == [], "the notification text is escaped like the blocks"
        for text in _texts(message.blocks):
            assert live_markup(text, allowed=OUR_MENTION) == [], text[:300]
        assert message.violations() == []
    finished = apply_event(state, Finished(status="completed", summary=body, reason=""))
    for text in [render_report_parts(finished).message.text, *_texts(render_report_parts(finished).message.blocks)]:
        assert live_markup(text, allowed=OUR_MENTION) == []


@pytest.mark.parametrize("question", ["<!channel> ping", "<@U024BE7LH> look", "<!subteam^S1> hi", "@everyone"])
def test_report_notification_text_repeats_the_question_without_pinging(question: str) -> None:
    state = _state(question, "Body.", "https://x.test/a", "T", "reading")
    text = render_report_parts(state).message.text
    assert text.startswith("Report: ") and live_markup(text) == []
    assert "&lt;" in text or "\u200d" in text, "the question is still readable, just inert"


@PROFILE
@given(st.sampled_from(["completed", "stopped", "failed"]), hostile_text)
@example("failed", "the run stopped early: upstream said <@U999> <!channel> <#C1>")
def test_a_reason_carrying_foreign_text_pings_no_one(status: str, reason: str) -> None:
    state = _state("q", "Body.", "https://x.test/a", "T", "reading")
    state = apply_event(state, Finished(status=status, summary="", reason=reason))  # type: ignore[arg-type]
    for message in (render_progress(state), render_report_parts(state).message):
        for text in [message.text, *_texts(message.blocks)]:
            assert live_markup(text, allowed=OUR_MENTION) == [], text


def test_the_person_who_stopped_the_run_is_still_named_as_a_mention() -> None:
    state = _state("q", "Body.", "https://x.test/a", "T", "reading")
    state = apply_event(state, Finished(status="stopped", summary="", reason="stopped by <@U0BOB> at 10:42 UTC"))
    assert "Stopped by <@U0BOB> at 10:42 UTC" in render_progress(state).text
