"""The agent's Markdown as a Slack canvas's Markdown: the same text, with nothing that could notify,
mention, link where it must not, or break the canvas into sections of its own.

A canvas is written in Markdown (`document_content: {"type": "markdown", …}`), and a few of its
spellings do more than format: `![](@U…)` mentions a person, `![](#C…)` a channel, and a heading
line starts a new section (the unit canvases.edit replaces). The conversion walks markdown-it's
token tree, as mrkdwn.py does, and writes Markdown again from it, so nothing is pattern-matched in
the raw source:

- headings inside a body become bold lines (the report's own headings are the only ones);
- only http(s) and mailto targets become links (mrkdwn_escaping.link_target decides, for both surfaces);
  any other link or image is shown as its words and target, as text; with a link policy (the run's
  sources and Slack permalinks, bot/publishing/link_policy.py), a web link or a URL written in the text
  that the policy refuses is shown as its words and its domain only (foreign_links.py);
- text is backslash-escaped where Markdown would read it as markup, `@here`/`@channel`/`@everyone`
  get a zero-width joiner, and `<` before `@`, `#` or `!` is broken the same way, so Slack's
  `<@U…>` or `<!channel>` spellings stay text;
- `[n]` footnote numbers become links to their sources when their URLs are given.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from .conversion_memo import ConversionMemo
from .foreign_links import LinkPolicy, domain_only, foreign_urls_as_domains
from .mrkdwn_escaping import ZERO_WIDTH_JOINER, link_target

__all__ = ["canvas_heading", "canvas_link", "canvas_text", "to_canvas_markdown", "to_file_markdown"]

_PARSER = MarkdownIt("commonmark").enable("table").enable("strikethrough")
_FOOTNOTE = re.compile(r"\[(\d{1,6})\]")
_BROADCAST = re.compile(r"(?<![\w.])@(?=(?:channel|here|everyone)\b)", re.IGNORECASE)
_SLACK_SYNTAX = re.compile(r"<(?=[@#!])")
# Characters Markdown may read as markup anywhere in a line (`&` starts an entity: `&lt;@U1&gt;`).
_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]~<>|!&])")
# What makes a line a block of its own when it starts it: heading, quote, list, rule, fence, table.
# Blanks within the line (a `\s*` from every line start would rescan a run of newlines); the
# marker after blank lines is still found, from its own line's start.
_LINE_START_SPECIAL = re.compile(r"^([^\S\n]*+)([#>+\-=]|\d{1,9}[.)])", re.MULTILINE)
_URL_UNSAFE = re.compile(r"[\s()<>\x00-\x1f\x7f]")
LIST_INDENT = "  "
FENCE = "```"
BACKTICK_LOOKALIKE = "ˋ"


def to_canvas_markdown(
    markdown: str, footnote_urls: Mapping[int, str] | None = None, link_allowed: LinkPolicy | None = None
) -> str:
    """A report body (Markdown) as canvas Markdown: no headings, mentions or non-web links (see module);
    with `link_allowed`, no link (or URL in the text) it refuses."""
    return _MEMO.convert(markdown, footnote_urls, link_allowed)


def _convert(markdown: str, footnote_urls: Mapping[int, str], link_allowed: LinkPolicy | None) -> str:
    tree = SyntaxTreeNode(_PARSER.parse(markdown))
    ctx = _Ctx(footnotes=footnote_urls or {}, allowed=link_allowed)
    return "\n\n".join(block for block in (_block(node, ctx, 0) for node in tree.children) if block).strip("\n")


# A canvas sync converts only the sections that changed (conversion_memo.py).
_MEMO = ConversionMemo(_convert)
# The report's Markdown file is written the same way, numbered as the message is: a memo of its own.
_FILE_MEMO = ConversionMemo(_convert)


def to_file_markdown(
    markdown: str, footnote_urls: Mapping[int, str] | None = None, link_allowed: LinkPolicy | None = None
) -> str:
    """A report body as the report's Markdown file holds it: as a canvas would (see module), each
    footnote number a link to its source (the file lists its sources under the same numbers)."""
    return _FILE_MEMO.convert(markdown, footnote_urls, link_allowed)


def canvas_text(text: str) -> str:
    """Plain words for a canvas line (a heading's title, a source's name): escaped, one line."""
    return _line_start(_inert(" ".join(text.split())))


def canvas_link(url: str, label: str) -> str:
    """A link of our own (a source, a chart): a web target links, any other shows as text."""
    words = _inert(" ".join(label.split()))
    if link_target(url) is None:
        return _as_text(words, url)
    return f"[{words or _inert(_shown(url))}]({_url(url)})"


def canvas_heading(level: int, text: str) -> str:
    """A heading line of our own (the only headings a canvas of ours has); its text shows as given."""
    return f"{'#' * level} {_inert(' '.join(text.split()))}"


# --- text -------------------------------------------------------------------------------


def _inert(text: str) -> str:
    """Escape inline markup, defuse broadcasts and Slack's <@…>, <#…>, <!…> spellings."""
    text = _SLACK_SYNTAX.sub("<" + ZERO_WIDTH_JOINER, text)  # before escaping: "\\<!" would hide the "<!"
    text = _BROADCAST.sub("@" + ZERO_WIDTH_JOINER, text)
    return _INLINE_SPECIAL.sub(r"\\\1", text)


def _line_start(text: str) -> str:
    """A line that starts like a block (`# `, `> `, `- `, `1. `) is escaped at its start."""
    return _LINE_START_SPECIAL.sub(lambda m: f"{m.group(1)}\\{m.group(2)}", text)


def _url(url: str) -> str:
    """A target safe inside `(…)`: whitespace, parentheses and angle brackets percent-encoded."""
    return _URL_UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), url)


def _code(code: str) -> str:
    """Code keeps its characters, except backtick runs (which would end it) and broadcasts."""
    return _BROADCAST.sub("@" + ZERO_WIDTH_JOINER, code.replace("`", BACKTICK_LOOKALIKE))


@dataclass(frozen=True)
class _Ctx:
    footnotes: Mapping[int, str]
    allowed: LinkPolicy | None = None  # which web targets may stay links
    in_link: bool = False


def _inline(nodes: list[SyntaxTreeNode], ctx: _Ctx) -> str:
    out: list[str] = []
    pending: list[str] = []  # adjacent text nodes joined, so "[1]" is never split

    def flush() -> None:
        if pending:
            out.append(_text("".join(pending), ctx))
            pending.clear()

    for node in nodes:
        if node.type == "text":
            pending.append(node.content)
            continue
        flush()
        out.append(_inline_node(node, ctx))
    flush()
    return "".join(out)


def _text(text: str, ctx: _Ctx) -> str:
    if ctx.allowed is not None:
        text = foreign_urls_as_domains(text, ctx.allowed)
    if ctx.in_link or not ctx.footnotes:
        return _inert(text)
    out: list[str] = []
    last = 0
    for match in _FOOTNOTE.finditer(text):
        url = ctx.footnotes.get(int(match.group(1)))
        if url is None or link_target(url) is None:
            continue  # an unknown number, or a source that cannot be a link: the number stays text
        out.append(_inert(text[last : match.start()]))
        out.append(f"[{match.group()}]({_url(url)})")
        last = match.end()
    out.append(_inert(text[last:]))
    return "".join(out)


def _wrap(marker: str, inner: str) -> str:
    return f"{marker}{inner}{marker}" if inner.strip() else inner


def _inline_node(node: SyntaxTreeNode, ctx: _Ctx) -> str:
    kind = node.type
    if kind == "strong":
        return _wrap("**", _inline(node.children, ctx))
    if kind == "em":
        return _wrap("_", _inline(node.children, ctx))
    if kind == "s":
        return _wrap("~~", _inline(node.children, ctx))
    if kind == "code_inline":
        return _wrap("`", _code(node.content))
    if kind == "softbreak":
        return " "
    if kind == "hardbreak":
        return " " if ctx.in_link else "\\\n"
    if kind == "link":
        return _link(node, ctx)
    if kind == "image":
        return _image(node, ctx)
    if kind == "html_inline":
        return _inert(node.content.replace("\n", " "))  # raw HTML is shown, never interpreted
    if node.children:
        return _inline(node.children, ctx)
    return _inert(node.content)


def _shown(url: str) -> str:
    return _PARSER.normalizeLinkText(url)


def _as_text(label: str, url: str) -> str:
    """A link that may not be one: its words, then where it pointed (a same-page #fragment: words only)."""
    shown = _inert(" ".join(_shown(url).split()))
    if not label:
        return shown
    if url.startswith("#") or not shown or shown == label:
        return label
    return f"{label} ({shown})"


def _link(node: SyntaxTreeNode, ctx: _Ctx) -> str:
    href = str(node.attrs.get("href", ""))
    label = _inline(node.children, replace(ctx, in_link=True)).strip()
    if ctx.in_link:
        return label  # a link cannot nest in a link: its words stay
    if link_target(href) is None:
        return _as_text("" if node.info == "auto" else label, href)
    if _refused(href, ctx):
        return _as_text("" if node.info == "auto" else label, domain_only(_shown(href)))
    return f"[{label or _inert(_shown(href))}]({_url(href)})"


def _refused(url: str, ctx: _Ctx) -> bool:
    return ctx.allowed is not None and not ctx.allowed(_shown(url))


def _image(node: SyntaxTreeNode, ctx: _Ctx) -> str:
    """Never an image: `![](@U…)` is how a canvas mentions someone. A web image becomes a link."""
    src = str(node.attrs.get("src", ""))
    alt = _inline(node.children, replace(ctx, in_link=True)).strip()
    if ctx.in_link or link_target(src) is None:
        return alt if ctx.in_link else _as_text(alt, src)
    if _refused(src, ctx):
        return _as_text(alt, domain_only(_shown(src)))
    return f"[{alt or _inert(_shown(src))}]({_url(src)})"


# --- blocks -----------------------------------------------------------------------------


def _block(node: SyntaxTreeNode, ctx: _Ctx, depth: int) -> str:
    kind = node.type
    if kind in ("paragraph", "heading"):
        inline = _inline(node.children[0].children if node.children else [], ctx)
        text = _line_start(inline)
        return _wrap("**", text) if kind == "heading" else text  # a heading in a body is a bold line
    if kind in ("bullet_list", "ordered_list"):
        return _list(node, ctx, depth)
    if kind == "blockquote":
        inner = "\n\n".join(b for b in (_block(child, ctx, depth) for child in node.children) if b)
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))
    if kind in ("fence", "code_block"):
        return f"{FENCE}\n{_code(node.content.rstrip(chr(10)))}\n{FENCE}"
    if kind == "hr":
        return "---"
    if kind == "table":
        return _table(node, ctx)
    if kind == "html_block":
        return _line_start(_inert(" ".join(node.content.split())))
    return "\n\n".join(b for b in (_block(child, ctx, depth) for child in node.children) if b)


def _list(node: SyntaxTreeNode, ctx: _Ctx, depth: int) -> str:
    lines: list[str] = []
    start = int(node.attrs.get("start", 1) or 1) if node.type == "ordered_list" else 1
    for n, item in enumerate(node.children):
        marker = f"{start + n}." if node.type == "ordered_list" else "-"
        body = [b for b in (_block(child, ctx, depth + 1) for child in item.children) if b]
        first, *rest = body or [""]
        indent = LIST_INDENT * depth
        item_lines = first.split("\n")
        lines.append(f"{indent}{marker} {item_lines[0]}".rstrip())
        lines += [f"{indent}{LIST_INDENT}{line}" for line in item_lines[1:]]
        for block in rest:
            for line in block.split("\n"):
                # A nested list carries its own indentation; other blocks are indented under the item.
                lines.append(line if line.startswith(LIST_INDENT * (depth + 1)) else f"{indent}{LIST_INDENT}{line}")
    return "\n".join(lines)


def _table(node: SyntaxTreeNode, ctx: _Ctx) -> str:
    rows: list[list[str]] = []
    for section in node.children:  # thead, tbody
        for row in section.children:
            rows.append([_inline(cell.children[0].children if cell.children else [], ctx) for cell in row.children])
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(cell.replace("\n", " ") for cell in rows[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(cell.replace("\n", " ") for cell in r) + " |" for r in rows[1:]]
    return "\n".join(lines)
