from __future__ import annotations

import random
import re

import pytest

from bot.slack.mrkdwn_escaping import BACKTICK_LOOKALIKE, FENCE, MAX_LINK_LABEL_CHARS, MAX_LINK_URL_CHARS, URL_LABEL_CHARS, ZERO_WIDTH_JOINER, link
from bot.slack.mrkdwn import HORIZONTAL_RULE, to_mrkdwn
from bot.slack.mrkdwn_split import MIN_SPLIT_LIMIT, split_text

ZWJ = ZERO_WIDTH_JOINER


def code_block_bodies(mrkdwn: str) -> list[str]:
    return re.findall(r"```\n(.*?)\n```", mrkdwn, flags=re.DOTALL)


# --- headings, emphasis, paragraphs -----------------------------------------------


def test_heading_becomes_a_bold_line() -> None:
    assert to_mrkdwn("# Findings\n\nBody.") == "*Findings*\n\nBody."


def test_strong_inside_a_heading_does_not_nest_bold_markers() -> None:
    assert to_mrkdwn("## The **key** result") == "*The key result*"


def test_heading_keeps_italic_and_code_inside_the_bold() -> None:
    assert to_mrkdwn("### Using `uv` *fast*") == "*Using `uv` _fast_*"


def test_empty_heading_produces_nothing() -> None:
    assert to_mrkdwn("#\n\ntext") == "text"


def test_strong_becomes_single_asterisks() -> None:
    assert to_mrkdwn("a **strong** b and __also__") == "a *strong* b and *also*"


def test_both_emphasis_styles_become_underscores() -> None:
    assert to_mrkdwn("*one* and _two_") == "_one_ and _two_"


def test_strong_and_emphasis_combined_keep_both_markers() -> None:
    assert to_mrkdwn("***both***") == "_*both*_"


def test_strikethrough_becomes_single_tildes() -> None:
    assert to_mrkdwn("~~gone~~ here") == "~gone~ here"


def test_paragraphs_are_separated_by_exactly_one_blank_line() -> None:
    assert to_mrkdwn("one\n\n\n\ntwo\n\nthree") == "one\n\ntwo\n\nthree"


def test_soft_line_break_becomes_a_space() -> None:
    assert to_mrkdwn("first line\nsecond line") == "first line second line"


def test_hard_line_break_becomes_a_newline() -> None:
    assert to_mrkdwn("first  \nsecond\\\nthird") == "first\nsecond\nthird"


def test_html_br_becomes_a_newline() -> None:
    assert to_mrkdwn("first<br>second<br />third") == "first\nsecond\nthird"


def test_horizontal_rule_becomes_a_line_of_dashes() -> None:
    assert to_mrkdwn("above\n\n---\n\nbelow") == f"above\n\n{HORIZONTAL_RULE}\n\nbelow"


def test_empty_input_gives_empty_output() -> None:
    assert to_mrkdwn("") == ""
    assert to_mrkdwn("   \n\n  \n") == ""


# --- escaping and mentions --------------------------------------------------------


def test_control_characters_in_text_are_escaped() -> None:
    assert to_mrkdwn("a < b & c > d") == "a &lt; b &amp; c &gt; d"


def test_entities_in_the_source_are_escaped_once_not_twice() -> None:
    assert to_mrkdwn("AT&amp;T &lt;tag&gt; &copy;") == "AT&amp;T &lt;tag&gt; ©"


def test_line_starting_with_escaped_gt_is_not_a_quote() -> None:
    assert to_mrkdwn("\\> not a quote") == "&gt; not a quote"


@pytest.mark.parametrize(
    "mention",
    ["<!channel>", "<!here>", "<!everyone>", "<@U123>", "<#C123>", "<!subteam^S1>"],
)
def test_slack_mention_syntax_in_text_comes_out_inert(mention: str) -> None:
    escaped = mention.replace("<", "&lt;").replace(">", "&gt;")
    for source in (f"hey {mention} look", mention):
        out = to_mrkdwn(source)
        assert "<" not in out and ">" not in out
        assert escaped in out


@pytest.mark.parametrize("mention", ["<!channel>", "<@U123>", "<#C123|general>"])
def test_slack_mention_syntax_in_link_text_and_code_comes_out_inert(
    mention: str,
) -> None:
    out = to_mrkdwn(f"[{mention}](https://x.test) `{mention}`\n\n```\n{mention}\n```")
    assert "<!" not in out and "<@" not in out and "<#" not in out


@pytest.mark.parametrize("word", ["channel", "here", "everyone", "Channel", "HERE"])
def test_bare_broadcast_mentions_get_a_zero_width_joiner(word: str) -> None:
    assert to_mrkdwn(f"ping @{word} now") == f"ping @{ZWJ}{word} now"


def test_email_addresses_and_ordinary_handles_are_left_alone() -> None:
    assert to_mrkdwn("mail ops@here.com or @channels_team or @bob") == (
        "mail ops@here.com or @channels_team or @bob"
    )


def test_raw_html_is_shown_escaped_not_interpreted() -> None:
    assert to_mrkdwn("<div>\nhi\n</div>") == "&lt;div&gt;\nhi\n&lt;/div&gt;"
    assert to_mrkdwn("a <span>b</span>") == "a &lt;span&gt;b&lt;/span&gt;"


def test_backtick_fence_in_ordinary_text_cannot_open_a_code_block() -> None:
    out = to_mrkdwn("literal \\`\\`\\` here")
    assert "```" not in out
    assert BACKTICK_LOOKALIKE * 3 in out


def test_cjk_and_rtl_text_pass_through_unchanged() -> None:
    text = "研究结果表明，東京の天気は晴れ。한국어 문장. مرحبا بالعالم. שלום עולם."
    assert to_mrkdwn(text) == text


# --- code -------------------------------------------------------------------------


def test_inline_code_keeps_markup_characters_and_escapes_only_control_characters() -> (
    None
):
    assert to_mrkdwn("run `a*b_c ~d <x> & y`") == "run `a*b_c ~d &lt;x&gt; &amp; y`"


def test_code_span_containing_backticks_cannot_end_early() -> None:
    out = to_mrkdwn("use `` a`b `` and ``` x``y ```")
    assert out == f"use `a{BACKTICK_LOOKALIKE}b` and `x{BACKTICK_LOOKALIKE * 2}y`"


def test_fenced_code_becomes_a_block_on_its_own_lines() -> None:
    out = to_mrkdwn("before\n\n```python\nx = 1\n  y = *2*\n```\n\nafter")
    assert out == "before\n\n```\nx = 1\n  y = *2*\n```\n\nafter"


def test_fence_inside_code_cannot_close_the_block() -> None:
    out = to_mrkdwn("````md\n```js\nlet a;\n```\n````")
    assert code_block_bodies(out) == [
        f"{BACKTICK_LOOKALIKE * 3}js\nlet a;\n{BACKTICK_LOOKALIKE * 3}"
    ]
    assert out.count(FENCE) == 2


def test_code_block_escapes_control_characters() -> None:
    out = to_mrkdwn("```\nif a < b && c > d: <!channel>\n```")
    assert code_block_bodies(out) == [
        "if a &lt; b &amp;&amp; c &gt; d: &lt;!channel&gt;"
    ]


def test_indented_code_becomes_a_block() -> None:
    assert to_mrkdwn("text\n\n    indented()\n      more()") == (
        "text\n\n```\nindented()\n  more()\n```"
    )


def test_empty_code_block_is_dropped() -> None:
    assert to_mrkdwn("a\n\n```\n```\n\nb") == "a\n\nb"


# --- links and images -------------------------------------------------------------


def test_link_becomes_slack_link() -> None:
    assert to_mrkdwn("see [the docs](https://docs.test/a)") == (
        "see <https://docs.test/a|the docs>"
    )


def test_link_text_with_pipe_cannot_break_the_link() -> None:
    assert to_mrkdwn("[a|b](https://x.test)") == "<https://x.test|a∣b>"


def test_link_text_with_gt_cannot_end_the_link() -> None:
    assert to_mrkdwn("[a > b](https://x.test)") == "<https://x.test|a › b>"


def test_link_text_escapes_lt_and_amp() -> None:
    assert (
        to_mrkdwn("[a < b & c](https://x.test)") == "<https://x.test|a &lt; b &amp; c>"
    )


def test_link_url_pipe_and_gt_are_percent_encoded_and_amp_escaped() -> None:
    out = to_mrkdwn("[q](<https://x.test/s?q=a|b\\>c&d=1>)")
    assert out == "<https://x.test/s?q=a%7Cb%3Ec&amp;d=1|q>"


def test_link_text_keeps_inline_formatting() -> None:
    assert (
        to_mrkdwn("[**bold** `c|d`](https://x.test)") == "<https://x.test|*bold* `c∣d`>"
    )


def test_link_with_empty_text_shows_the_url() -> None:
    assert to_mrkdwn("[](https://x.test)") == "<https://x.test>"


def test_autolink_becomes_bare_slack_link() -> None:
    assert to_mrkdwn("go to <https://x.test/a?b=1&c=2>") == (
        "go to <https://x.test/a?b=1&amp;c=2>"
    )


def test_email_autolink_shows_the_address() -> None:
    assert to_mrkdwn("<me@x.test>") == "<mailto:me@x.test|me@x.test>"


def test_image_becomes_link_with_alt_text() -> None:
    assert to_mrkdwn("![a *chart* | 2024](https://x.test/c.png)") == (
        "<https://x.test/c.png|a chart ∣ 2024>"
    )


def test_image_without_alt_becomes_bare_link() -> None:
    assert to_mrkdwn("![](https://x.test/c.png)") == "<https://x.test/c.png>"


def test_image_inside_link_does_not_nest_links() -> None:
    assert to_mrkdwn("[![logo](https://x.test/l.png)](https://x.test)") == (
        "<https://x.test|logo>"
    )


def test_unsafe_link_scheme_is_left_as_text() -> None:
    assert to_mrkdwn("[x](javascript:alert(1))") == "[x](javascript:alert(1))"


@pytest.mark.parametrize(
    ("markdown", "shown"),
    [
        ("[x](!channel)", "x (!channel)"),
        ("[x](<!here>)", "x (!here)"),
        ("[x](@U024BE7LH)", "x (@U024BE7LH)"),
        ("[x](!subteam^S1)", "x (!subteam^S1)"),
        ("[x](&#33;everyone)", "x (!everyone)"),
        ("![chart](@U1)", "chart (@U1)"),
        ("[x][r]\n\n[r]: <#C024BE7LH>", "x"),  # a "#…" target is a same-page fragment: label only
        ("[x](ftp://files.test/a)", "x (ftp://files.test/a)"),
    ],
)
def test_link_to_a_mention_broadcast_or_other_scheme_is_shown_as_text(markdown: str, shown: str) -> None:
    assert to_mrkdwn(markdown) == shown


def test_fragment_link_keeps_only_its_label() -> None:
    assert to_mrkdwn("see [the method](#method) and [C](#C024BE7LH)") == "see the method and C"


def test_mailto_and_http_in_any_case_stay_links() -> None:
    assert to_mrkdwn("[a](mailto:ops@x.test) [b](HTTPS://X.TEST/p)") == (
        "<mailto:ops@x.test|a> <HTTPS://X.TEST/p|b>"
    )


def test_long_bare_url_keeps_its_whole_target_behind_a_short_label() -> None:
    url = "https://x.test/" + "a" * 200
    assert to_mrkdwn(f"<{url}>") == f"<{url}|{url[:URL_LABEL_CHARS - 1]}…>"


def test_url_too_long_for_a_link_is_shown_as_shortened_text() -> None:
    url = "https://x.test/" + "a" * MAX_LINK_URL_CHARS
    assert to_mrkdwn(f"[the data]({url})") == f"the data ({url[:URL_LABEL_CHARS - 1]}…)"


def test_very_long_link_label_is_shortened_so_the_link_fits_one_block() -> None:
    out = to_mrkdwn("[" + "word " * 1000 + "](https://x.test)")
    assert out.startswith("<https://x.test|word word") and out.endswith("…>")
    assert len(out) < MAX_LINK_LABEL_CHARS + 40


def test_link_helper_shows_an_unsafe_url_as_text() -> None:
    assert link("!channel", "Title") == "Title (!channel)"
    assert link("https://ok.test/a b", "T|t") == "<https://ok.test/a%20b|T∣t>"


def test_footnote_whose_url_is_not_http_stays_a_plain_number() -> None:
    assert to_mrkdwn("claim [1] and [2]", {1: "!channel", 2: "https://x.test"}) == (
        "claim [1] and <https://x.test|[2]>"
    )


# --- citation footnotes -----------------------------------------------------------

URLS = {
    1: "https://one.test/a",
    2: "https://two.test/?q=a|b&c=d",
    3: "https://three.test",
}


def test_footnote_number_becomes_link_to_its_source() -> None:
    assert to_mrkdwn("Water boils at 100 °C [1].", URLS) == (
        "Water boils at 100 °C <https://one.test/a|[1]>."
    )


def test_adjacent_footnotes_both_convert() -> None:
    assert to_mrkdwn("claim[1][3]", URLS) == (
        "claim<https://one.test/a|[1]><https://three.test|[3]>"
    )


def test_footnote_url_is_made_safe_for_slack() -> None:
    assert to_mrkdwn("x [2]", URLS) == "x <https://two.test/?q=a%7Cb&amp;c=d|[2]>"


def test_footnote_url_with_angle_brackets_and_spaces_cannot_break_the_link() -> None:
    assert to_mrkdwn("x [4]", {4: "https://t.test/?a=<b>|c d"}) == (
        "x <https://t.test/?a=%3Cb%3E%7Cc%20d|[4]>"
    )


def test_footnote_number_not_in_mapping_stays_text() -> None:
    assert to_mrkdwn("see [9] and [1]", URLS) == "see [9] and <https://one.test/a|[1]>"


def test_footnote_in_code_is_not_converted() -> None:
    out = to_mrkdwn("`arr[1]`\n\n```\nx[1]\n```", URLS)
    assert "<" not in out


def test_footnote_in_link_text_is_not_converted() -> None:
    assert to_mrkdwn("[see [1]](https://x.test)", URLS) == "<https://x.test|see [1]>"


def test_footnotes_in_headings_and_lists_convert() -> None:
    out = to_mrkdwn("# Title [1]\n\n- item [3]", URLS)
    assert out == "*Title <https://one.test/a|[1]>*\n\n• item <https://three.test|[3]>"


def test_without_mapping_footnote_numbers_stay_text() -> None:
    assert to_mrkdwn("claim [1]") == "claim [1]"


# --- lists and quotes -------------------------------------------------------------


def test_bullet_list_uses_bullets() -> None:
    assert to_mrkdwn("- one\n- two\n* three") == "• one\n• two\n\n• three"


def test_ordered_list_keeps_its_start_number() -> None:
    assert to_mrkdwn("3. three\n4. four\n5. five") == "3. three\n4. four\n5. five"


def test_ordered_list_keeps_paren_delimiter() -> None:
    assert to_mrkdwn("1) a\n2) b") == "1) a\n2) b"


def test_nested_lists_indent_four_spaces_per_level_mixing_kinds() -> None:
    source = (
        "1. first\n"
        "   - alpha\n"
        "     1. deep one\n"
        "     2. deep **two**\n"
        "   - beta\n"
        "2. second\n"
    )
    assert to_mrkdwn(source) == (
        "1. first\n"
        "    ◦ alpha\n"
        "        1. deep one\n"
        "        2. deep *two*\n"
        "    ◦ beta\n"
        "2. second"
    )


def test_three_level_bullets_use_hollow_bullets_below_the_top() -> None:
    assert to_mrkdwn("- a\n  - b\n    - c") == "• a\n    ◦ b\n        ◦ c"


def test_list_item_continuation_lines_align_with_item_text() -> None:
    assert to_mrkdwn("- first  \n  second\n\n  para") == "• first\n  second\n  para"


def test_code_block_in_list_item_starts_at_column_zero() -> None:
    out = to_mrkdwn("- run:\n\n  ```\n  make\n  ```\n- done")
    assert out == "• run:\n```\nmake\n```\n• done"


def test_list_after_paragraph_is_separated_by_blank_line() -> None:
    assert to_mrkdwn("Intro:\n\n- a\n- b") == "Intro:\n\n• a\n• b"


def test_blockquote_lines_are_prefixed() -> None:
    assert to_mrkdwn("> quoted *text*  \n> line two\n>\n> para") == (
        "> quoted _text_\n> line two\n>\n> para"
    )


def test_nested_blockquote_keeps_both_prefixes() -> None:
    assert to_mrkdwn("> a\n>\n> > b") == "> a\n>\n> > b"


# --- tables -----------------------------------------------------------------------


def test_table_becomes_padded_monospace_block() -> None:
    source = "| Name | Score |\n|---|---|\n| Alice | 10 |\n| Bob | 7 |"
    assert to_mrkdwn(source) == (
        "```\nName  | Score\n------+------\nAlice | 10\nBob   | 7\n```"
    )


def test_table_cells_drop_inline_markup_and_keep_escaped_pipe() -> None:
    source = (
        "| Tool | Note |\n"
        "|:--|--:|\n"
        "| **uv** | `a \\| b` |\n"
        "| [pip](https://pip.test) | _slow_ & old |\n"
    )
    assert to_mrkdwn(source) == (
        "```\n"
        "Tool                   |       Note\n"
        "-----------------------+-----------\n"
        "uv                     |      a | b\n"
        "pip (https://pip.test) | slow &amp; old\n"
        "```"
    )


def test_table_columns_align_by_display_width_for_cjk() -> None:
    out = to_mrkdwn("| 名前 | x |\n|--|--|\n| ab | y |")
    assert code_block_bodies(out) == ["名前 | x\n-----+--\nab   | y"]


def test_table_escapes_control_characters_and_mentions() -> None:
    out = to_mrkdwn("| a |\n|---|\n| <!here> @here |")
    body = code_block_bodies(out)[0]
    assert "&lt;!here&gt;" in body and f"@{ZWJ}here" in body


# --- split_text -------------------------------------------------------------------


def test_short_text_is_one_chunk() -> None:
    assert split_text("hello world", 100) == ["hello world"]


def test_empty_text_gives_no_chunks() -> None:
    assert split_text("", 100) == []


def test_limit_below_minimum_is_refused() -> None:
    with pytest.raises(ValueError):
        split_text("x" * 100, MIN_SPLIT_LIMIT - 1)


def test_split_prefers_paragraph_break() -> None:
    text = "a" * 40 + "\n" + "b" * 10 + "\n\n" + "c c c c c"
    assert split_text(text, 55) == ["a" * 40 + "\n" + "b" * 10, "c c c c c"]


def test_split_prefers_line_break_over_space() -> None:
    text = "word " * 5 + "end\n" + "tail " * 10
    chunks = split_text(text, 60)
    assert chunks[0] == "word " * 5 + "end"
    assert all(len(chunk) <= 60 for chunk in chunks)


def test_split_falls_back_to_spaces() -> None:
    text = " ".join(f"w{i}" for i in range(40))
    chunks = split_text(text, 40)
    assert all(len(chunk) <= 40 for chunk in chunks)
    assert " ".join(chunks).split() == text.split()


def test_split_never_cuts_inside_a_link() -> None:
    link = "<https://example.test/a/very/long/path|a label with several words>"
    text = "lead in words " + link + " and trailing words after it"
    for limit in range(MIN_SPLIT_LIMIT, len(text)):
        chunks = split_text(text, limit)
        if len(link) + len(FENCE) + 1 <= limit:
            assert any(link in chunk for chunk in chunks), limit
        else:  # too long for any chunk: shown as text, never cut open
            shown = "a label with several words (https://example.test/a/very/long/path)"
            assert shown.replace(" ", "") in "".join(chunks).replace(" ", ""), limit
        assert all(len(chunk) <= limit for chunk in chunks)
        assert all("<" not in re.sub(r"<[^<>]*>", "", chunk) for chunk in chunks), limit


def test_split_never_cuts_inside_an_entity() -> None:
    text = ("a&amp;b" * 20) + " " + ("&lt;&gt;" * 20)
    for limit in range(MIN_SPLIT_LIMIT, 80):
        for chunk in split_text(text, limit):
            assert len(chunk) <= limit
            assert re.sub(r"&(amp|lt|gt);", "", chunk).count("&") == 0, (limit, chunk)


def test_split_of_unbroken_word_keeps_every_character() -> None:
    text = "x" * 250
    chunks = split_text(text, 40)
    assert all(len(chunk) <= 40 for chunk in chunks)
    assert "".join(chunks) == text


def test_split_reopens_a_cut_code_block() -> None:
    code = "\n".join(f"line {i}" for i in range(30))
    text = f"intro\n\n```\n{code}\n```\n\noutro"
    chunks = split_text(text, 80)
    assert len(chunks) > 2
    for chunk in chunks:
        assert len(chunk) <= 80
        assert chunk.count(FENCE) % 2 == 0, chunk
    inner = [
        line
        for chunk in chunks
        for line in chunk.split("\n")
        if line.startswith("line")
    ]
    assert inner == code.split("\n")


def test_split_does_not_leave_an_empty_code_block_behind() -> None:
    text = "p" * 30 + "\n```\n" + "code here\n" * 5 + "```"
    for limit in range(MIN_SPLIT_LIMIT, len(text)):
        for chunk in split_text(text, limit):
            assert "```\n```" not in chunk, (limit, chunk)


def _long_markdown(rng: random.Random) -> str:
    words = ["alpha", "beta", "gamma", "délta", "東京", "שלום", "A&B", "x<y", "@here"]
    parts: list[str] = []
    while sum(len(p) for p in parts) < 20_000:
        kind = rng.choice(["para", "para", "code", "list", "link"])
        if kind == "para":
            parts.append(
                " ".join(rng.choice(words) for _ in range(rng.randint(5, 120)))
            )
        elif kind == "code":
            lines = [
                f"def f{i}(x):  # {rng.choice(words)} ```"
                for i in range(rng.randint(3, 60))
            ]
            parts.append("```python\n" + "\n".join(lines) + "\n```")
        elif kind == "list":
            parts.append(
                "\n".join(f"- item {i} **{rng.choice(words)}**" for i in range(8))
            )
        else:
            parts.append(
                " ".join(
                    f"[{rng.choice(words)} {i} | label](https://site.test/{i}?a=1&b=2)"
                    for i in range(rng.randint(3, 15))
                )
                + " [1][2]"
            )
    return "\n\n".join(parts)


@pytest.mark.parametrize("limit", [MIN_SPLIT_LIMIT, 200, 3_000])
def test_split_of_long_report_keeps_limits_words_links_and_fences(limit: int) -> None:
    mrkdwn = to_mrkdwn(
        _long_markdown(random.Random(7)), {1: "https://one.test", 2: "https://two.test"}
    )
    assert len(mrkdwn) > 20_000
    chunks = split_text(mrkdwn, limit)

    assert all(len(chunk) <= limit for chunk in chunks)
    words_in = [w for w in mrkdwn.split() if w != FENCE]
    words_out = [w for w in " ".join(chunks).split() if w != FENCE]
    if limit >= 200:  # a tiny limit may cut inside a long link or word
        assert words_out == words_in
        links = re.findall(r"<[^<>]*>", mrkdwn)
        assert [
            link for chunk in chunks for link in re.findall(r"<[^<>]*>", chunk)
        ] == links
    else:
        # Links too long for a chunk are shown as "label (url)"; nothing else changes.
        def as_text(match: re.Match[str]) -> str:
            if len(match.group()) <= limit - len(FENCE) - 1:
                return match.group()
            url, _, label = match.group()[1:-1].partition("|")
            return f"{label} ({url})" if label else url

        words_in = [w for w in re.sub(r"<[^<>]*>", as_text, mrkdwn).split() if w != FENCE]
        assert "".join(words_out) == "".join(words_in)
    for chunk in chunks:
        assert chunk.count(FENCE) % 2 == 0, chunk
        assert "<" not in re.sub(r"<[^<>]*>", "", chunk), chunk
        if limit >= 200:
            assert "&" not in re.sub(r"&(amp|lt|gt);", "", chunk), chunk
