"""Generated Markdown with hostile text, link targets and headings, as a canvas's Markdown: nothing
mentions anyone (`![](@U…)`, `<@U…>`, `<!channel>`, `@here`), nothing links anywhere but the web
or mail, and no line starts a section of its own (the canvas's sections are ours). Checked by
parsing the output as Markdown again, as a canvas would."""
from __future__ import annotations

import re

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from agent import Section, Source
from bot.publishing.canvas_render import render_canvas
from bot.slack.canvas_markdown import canvas_heading, to_canvas_markdown
from bot.slack.mrkdwn_escaping import link_target
from jobs import Run, RunState

PARSER = MarkdownIt("commonmark").enable("table").enable("strikethrough")
PROFILE = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BROADCAST = re.compile(r"(?<![\w.])@(?:channel|here|everyone)\b", re.IGNORECASE)
SLACK_SPELLING = re.compile(r"<[@#!]")

WORDS = ["<!channel>", "<!here>", "<@U024BE7LH>", "<#C024BE7LH|general>", "@here", "@channel", "@everyone",
         "![](@U024BE7LH)", "![](#C024BE7LH)", "![x](https://img.test/a.png)", "[x](javascript:alert(1))",
         "[ok](https://example.org/a(b))", "<https://auto.test>", "[ref]", "*", "_", "~~", "`", "```", "#",
         "## ", "# ", "> ", "- ", "1. ", "|", "[", "]", "(", ")", "\\", "\n", "\n\n", " ", "東京", "[1]", "[2]",
         "<b>html</b>", "&lt;@U1&gt;", "&#64;here"]
markdown = st.lists(st.one_of(st.sampled_from(WORDS), st.text(alphabet="abcXYZ019 .,:;!?@#", max_size=10)),
                    max_size=40).map("".join)


def problems(output: str) -> list[str]:
    """What a canvas would act on in `output`: headings, mention images, non-web links, live spellings."""
    found = []
    tree = SyntaxTreeNode(PARSER.parse(output))

    def walk(node: SyntaxTreeNode) -> None:
        if node.type == "heading":
            found.append(f"a heading: {node.markup} …")
        if node.type == "image":
            found.append(f"an image (a canvas mention spelling): {node.attrs.get('src')}")
        if node.type == "link" and link_target(str(node.attrs.get("href", ""))) is None:
            found.append(f"a link to {node.attrs.get('href')!r}")
        if node.type in ("text", "html_inline", "html_block"):
            if SLACK_SPELLING.search(node.content):
                found.append(f"Slack mention syntax in {node.content!r}")
            if BROADCAST.search(node.content):
                found.append(f"a broadcast in {node.content!r}")
        for child in node.children:
            walk(child)

    walk(tree)
    return found


@PROFILE
@given(markdown)
@example("# Title\n\n![](@U024BE7LH) <!channel> @here [x](javascript:alert(1))")
@example("text  \n## not a section")
@example("\\![](@U1)")
@example("&amp;lt;@U1&amp;gt; and &amp;lt;!channel&amp;gt;")
def test_a_body_never_mentions_links_off_the_web_or_starts_a_section(body: str) -> None:
    output = to_canvas_markdown(body, {1: "https://example.org/1", 2: "javascript:bad"})
    assert not problems(output), (body, output)


@PROFILE
@given(markdown)
@example("&lt;@U1&gt;")  # found by this test: an entity in a title decoded to a mention
def test_a_heading_of_ours_is_one_heading_whatever_its_title(title: str) -> None:
    line = canvas_heading(2, title)
    tree = SyntaxTreeNode(PARSER.parse(line))
    headings = [n for n in tree.children if n.type == "heading"]
    assert len(headings) == 1 and len(tree.children) == 1, (title, line)
    assert not [p for p in problems(line) if not p.startswith("a heading")], (title, line)


def test_footnotes_link_to_their_sources_and_web_links_survive() -> None:
    output = to_canvas_markdown("VTI costs 0.03% [1], see [the fact sheet](https://vanguard.test/vti).",
                                {1: "https://vanguard.test/vti"})
    assert output == ("VTI costs 0.03% [[1]](https://vanguard.test/vti), see "
                      "[the fact sheet](https://vanguard.test/vti).")


@PROFILE
@given(title=markdown, body=markdown)
def test_each_report_section_is_exactly_one_canvas_section(title: str, body: str) -> None:
    state = RunState(run=Run(question="q?"), sections=[
        Section(section_id="sec1", title=title or "t", body=body + " [s1]"),
        Section(section_id="sec2", title="Second", body=body)],
        sources={"s1": Source(marker="s1", url="https://example.org/1", title=title, passage=body)})
    document = render_canvas(state)
    for part in document.parts:
        tree = SyntaxTreeNode(PARSER.parse(part.markdown))
        assert [n.type for n in tree.children].count("heading") == 1, part.markdown
        assert tree.children[0].type == "heading"
    assert [p.key for p in document.parts] == ["sec1", "sec2", "sources"]
