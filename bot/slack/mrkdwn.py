"""Render the research agent's Markdown as Slack ``mrkdwn``.

The conversion walks markdown-it-py's token tree, so Markdown syntax is never
pattern-matched in the raw source; only the text *inside* tokens is escaped, by the rules of
mrkdwn_escaping.py (every `<…>` emitted is a link whose target passed `link_target`). Cutting the
result into messages is mrkdwn_split.py's."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from .conversion_memo import ConversionMemo
from .foreign_links import foreign_urls_as_domains, web_urls_in
from .mrkdwn_escaping import (
    BACKTICK_LOOKALIKE,
    FENCE,
    MAX_LINK_LABEL_CHARS,
    _bare_link,
    _code_text,
    _defuse_broadcasts,
    _escape,
    _label,
    _link_as_text,
    _link_label,
    _plain_text,
    _shorten_words,
    link_target,
)

__all__ = [
    "BULLET",
    "HORIZONTAL_RULE",
    "LIST_INDENT",
    "NESTED_BULLET",
    "PARAGRAPH_MEMO_TEXTS",
    "paragraph_texts",
    "to_mrkdwn",
]


# Spaces per nesting level: Slack has no list markup, so indentation is the nesting.
LIST_INDENT = 4
# Top-level bullet, and the hollow one for deeper levels so nesting reads at a glance.
BULLET = "•"
NESTED_BULLET = "◦"
# Slack has no rule markup; a line of em dashes reads as one.
HORIZONTAL_RULE = "———"

# Texts whose paragraphs are remembered (a report's sections, a few dozen runs' worth).
PARAGRAPH_MEMO_TEXTS = 256

_PARSER = MarkdownIt("commonmark").enable("table").enable("strikethrough")

_FOOTNOTE = re.compile(r"\[(\d{1,6})\]")
_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


def to_mrkdwn(
    markdown: str,
    footnote_urls: Mapping[int, str] | None = None,
    link_allowed: Callable[[str], bool] | None = None,
) -> str:
    """Convert Markdown to Slack mrkdwn.

    With ``footnote_urls``, each ``[n]`` in ordinary text whose ``n`` is a key
    becomes a link to that URL. With ``link_allowed``, a link (or a bare URL in the
    text) whose target it refuses is shown as its label and the target's domain, never
    clickable: a report links only where the run has been.
    """
    return _MEMO.convert(markdown, footnote_urls, link_allowed)


def _convert(markdown: str, footnote_urls: Mapping[int, str], link_allowed: Callable[[str], bool] | None) -> str:
    tree = SyntaxTreeNode(_PARSER.parse(markdown))
    ctx = _Ctx(footnotes=footnote_urls or {}, allowed=link_allowed)
    return "\n".join(_blocks(tree.children, ctx, depth=0, separator=[""])).strip("\n")


# A sync converts only the sections that changed (conversion_memo.py).
_MEMO = ConversionMemo(_convert)


def paragraph_texts(markdown: str) -> list[str]:
    """The words of each paragraph (in lists and quotes too), markup dropped, in order.

    For previews such as a section's first sentence: nothing here is escaped.
    """
    return list(_paragraph_texts(markdown))


@functools.lru_cache(maxsize=PARAGRAPH_MEMO_TEXTS)  # each sync asks again for every section's first sentence
def _paragraph_texts(markdown: str) -> tuple[str, ...]:
    out: list[str] = []
    tokens = _PARSER.parse(markdown)
    for i, token in enumerate(tokens):
        # Paragraphs and headings only: table cells are not sentences.
        if token.type != "inline" or not token.children or i == 0:
            continue
        if tokens[i - 1].type not in ("paragraph_open", "heading_open"):
            continue
        words = []
        for child in token.children:
            if child.type in ("text", "code_inline"):
                words.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                words.append(" ")
        text = " ".join("".join(words).split())
        if text:
            out.append(text)
    return tuple(out)


# --- inline content ---------------------------------------------------------------


@dataclass(frozen=True)
class _Ctx:
    footnotes: Mapping[int, str]
    allowed: Callable[[str], bool] | None = None  # which link targets may stay links
    # Table cells sit in a code block, where Slack shows markup literally.
    plain: bool = False
    in_link: bool = False
    in_strong: bool = False
    in_em: bool = False
    in_strike: bool = False


def _inline(nodes: list[SyntaxTreeNode], ctx: _Ctx) -> str:
    out: list[str] = []
    pending: list[str] = []  # adjacent text nodes, joined so "[1]" is never split

    def flush() -> None:
        if pending:
            out.append(_escaped("".join(pending), ctx))
            pending.clear()

    for node in nodes:
        if node.type == "text":
            pending.append(node.content)
            continue
        flush()
        out.append(_inline_node(node, ctx))
    flush()
    return "".join(out)


def _unlinked(text: str, ctx: _Ctx) -> str:
    """Bare URLs the policy refuses, written so Slack does not make them links ("https://x" → "x")."""
    return text if ctx.allowed is None else foreign_urls_as_domains(text, ctx.allowed)


def _domain_of(url: str) -> str:
    try:
        return urlsplit(url).hostname or url.split("://", 1)[-1].split("/", 1)[0]
    except ValueError:
        return url.split("://", 1)[-1].split("/", 1)[0]


def _escaped(text: str, ctx: _Ctx) -> str:
    if ctx.plain:
        return text  # escaped by the table after padding, so widths stay true
    text = _unlinked(text, ctx)
    if ctx.in_link:
        return _plain_text(_link_label(text))
    # A URL left in the text (one the policy allows) is written as a link of ours: messages go out
    # verbatim (outgoing.py), so Slack makes no link of its own.
    out: list[str] = []
    last = 0
    for start, end in web_urls_in(text):
        target = link_target(text[start:end])
        if target is None:
            continue
        out.append(_footnoted(text[last:start], ctx))
        out.append(_bare_link(target, text[start:end]))
        last = end
    out.append(_footnoted(text[last:], ctx))
    return "".join(out)


def _footnoted(text: str, ctx: _Ctx) -> str:
    """Escaped text with each known footnote number ("[3]") a link to its source."""
    if not ctx.footnotes:
        return _plain_text(text)
    out: list[str] = []
    last = 0
    for match in _FOOTNOTE.finditer(text):
        url = ctx.footnotes.get(int(match.group(1)))
        target = link_target(url) if url is not None else None
        if target is None:
            continue  # unknown number or a URL that cannot be a link: the number stays text
        out.append(_plain_text(text[last : match.start()]))
        out.append(f"<{target}|{match.group()}>")
        last = match.end()
    out.append(_plain_text(text[last:]))
    return "".join(out)


def _wrap(marker: str, inner: str) -> str:
    # Slack shows a lone pair of markers literally, so drop empty spans.
    return f"{marker}{inner}{marker}" if inner else ""


def _inline_node(node: SyntaxTreeNode, ctx: _Ctx) -> str:
    kind = node.type
    if kind == "strong":
        inner = _inline(node.children, replace(ctx, in_strong=True))
        return inner if ctx.plain or ctx.in_strong else _wrap("*", inner)
    if kind == "em":
        inner = _inline(node.children, replace(ctx, in_em=True))
        return inner if ctx.plain or ctx.in_em else _wrap("_", inner)
    if kind == "s":
        inner = _inline(node.children, replace(ctx, in_strike=True))
        return inner if ctx.plain or ctx.in_strike else _wrap("~", inner)
    if kind == "code_inline":
        if ctx.plain:
            return node.content
        # Slack inline code cannot contain a backtick at all.
        code = node.content.replace("`", BACKTICK_LOOKALIKE)
        if ctx.in_link:
            code = _link_label(code)
        return _wrap("`", _defuse_broadcasts(_escape(code)))
    if kind == "softbreak":
        return " "  # a soft break is a space; Slack would show a newline literally
    if kind == "hardbreak":
        return _line_break(ctx)
    if kind == "link":
        return _link(node, ctx)
    if kind == "image":
        return _image(node, ctx)
    if kind == "html_inline":
        if _HTML_BREAK.fullmatch(node.content.strip()):
            return _line_break(ctx)
        # Raw HTML (and Slack syntax such as "<!channel>") is shown, never interpreted.
        return _escaped(node.content.replace("\n", " "), ctx)
    if node.children:
        return _inline(node.children, ctx)
    return _escaped(node.content, ctx)


def _line_break(ctx: _Ctx) -> str:
    # A newline would end a link label or a table row.
    return " " if ctx.plain or ctx.in_link else "\n"


def _shown_url(href: str) -> str:
    """The target as a reader would type it: markdown-it stores it percent-encoded."""
    return _PARSER.normalizeLinkText(href)


def _link(node: SyntaxTreeNode, ctx: _Ctx) -> str:
    href = str(node.attrs.get("href", ""))
    if ctx.plain:
        label = _inline(node.children, ctx).strip()
        if not label or node.info == "auto" or label == href:
            return _shown_url(href)
        return f"{label} ({_shown_url(href)})"
    target = link_target(href)
    if target is not None and ctx.allowed is not None and not ctx.allowed(_shown_url(href)) and not ctx.plain:
        label = _inline(node.children, replace(ctx, in_link=True)).strip()
        shown = _plain_text(_domain_of(_shown_url(href)))
        return f"{label} ({shown})" if label and label != shown else shown
    if ctx.in_link or target is None:
        # Not a link (or a link inside a link label, which Slack cannot nest): its words stay.
        label = _inline(node.children, ctx).strip()
        if ctx.in_link:
            return label
        # An autolink's label is its target: shown once, shortened.
        return _link_as_text("" if node.info == "auto" else label, _shown_url(href))
    if node.info == "auto" and not href.lower().startswith("mailto:"):
        return _bare_link(target, _shown_url(href))
    label = _inline(node.children, replace(ctx, in_link=True)).strip()
    if node.info == "auto":
        label = label.removeprefix("mailto:")  # "<mailto:a@b>" shows the bare address
    if len(label) > MAX_LINK_LABEL_CHARS:
        # Formatting cannot be cut safely; the plain words are shortened instead.
        label = _label(_inline(node.children, replace(ctx, plain=True)).strip())
    return f"<{target}|{label}>" if label else _bare_link(target, _shown_url(href))


def _image(node: SyntaxTreeNode, ctx: _Ctx) -> str:
    src = str(node.attrs.get("src", ""))
    plain_alt = " ".join(_inline(node.children, replace(ctx, plain=True)).split())
    if ctx.plain:
        return plain_alt or _shown_url(src)
    if ctx.in_link:
        return _plain_text(_link_label(plain_alt))  # a link cannot nest in a link
    target = link_target(src)
    if target is not None and ctx.allowed is not None and not ctx.allowed(_shown_url(src)):
        shown = _plain_text(_domain_of(_shown_url(src)))
        return f"{_plain_text(plain_alt)} ({shown})" if plain_alt else shown
    if target is None:
        return _link_as_text(_plain_text(_shorten_words(plain_alt, MAX_LINK_LABEL_CHARS)), _shown_url(src))
    if not plain_alt:
        return _bare_link(target, _shown_url(src))
    return f"<{target}|{_label(plain_alt)}>"


# --- blocks -----------------------------------------------------------------------


@dataclass
class _Block:
    lines: list[str]
    # Code and tables stay at column 0 inside lists, so the code itself is not shifted.
    preformatted: bool = False


def _blocks(nodes: list[SyntaxTreeNode], ctx: _Ctx, depth: int, separator: list[str]) -> list[str]:
    """Render sibling blocks, with ``separator`` lines between them."""
    lines: list[str] = []
    for node in nodes:
        block = _block(node, ctx, depth)
        if not block.lines:
            continue
        if lines:
            lines.extend(separator)
        lines.extend(block.lines)
    return lines


def _block(node: SyntaxTreeNode, ctx: _Ctx, depth: int) -> _Block:
    kind = node.type
    if kind == "paragraph":
        return _Block(_inline(node.children[0].children, ctx).split("\n"))
    if kind == "heading":
        inner = _inline(node.children[0].children, replace(ctx, in_strong=True))
        inner = inner.replace("\n", " ").strip()
        return _Block([f"*{inner}*"] if inner else [])
    if kind in ("fence", "code_block"):
        code = node.content.rstrip("\n")
        if not code.strip():
            return _Block([])
        return _Block([FENCE, *_code_text(code).split("\n"), FENCE], preformatted=True)
    if kind == "blockquote":
        quoted = _blocks(node.children, ctx, depth, separator=[""])
        return _Block([f"> {line}" if line else ">" for line in quoted])
    if kind in ("bullet_list", "ordered_list"):
        return _Block(_list(node, ctx, depth))
    if kind == "hr":
        return _Block([HORIZONTAL_RULE])
    if kind == "table":
        return _Block(_table(node, ctx), preformatted=True)
    if kind == "html_block":
        return _Block(_escaped(node.content.rstrip("\n"), ctx).split("\n"))
    return _Block(_blocks(node.children, ctx, depth, separator=[""]))


def _list(node: SyntaxTreeNode, ctx: _Ctx, depth: int) -> list[str]:
    lines: list[str] = []
    number = int(node.attrs.get("start", 1))
    indent = " " * (LIST_INDENT * depth)
    for item in node.children:
        if node.type == "ordered_list":
            marker = f"{indent}{number}{item.markup or '.'}"
            number += 1
        else:
            marker = indent + (BULLET if depth == 0 else NESTED_BULLET)
        hanging = " " * (len(marker) + 1)  # continuation lines align with the text
        item_lines: list[str] = []
        marked = False
        for child in item.children:
            if child.type in ("bullet_list", "ordered_list"):
                nested = _list(child, ctx, depth + 1)  # indents itself
                if not marked:
                    item_lines.append(marker)
                    marked = True
                item_lines.extend(nested)
                continue
            block = _block(child, ctx, depth)
            if not block.lines:
                continue
            body = block.lines
            if block.preformatted:
                if not marked:
                    item_lines.append(marker)
                    marked = True
                item_lines.extend(body)
                continue
            if not marked:
                item_lines.append(f"{marker} {body[0]}")
                marked = True
                body = body[1:]
            item_lines.extend(hanging + line if line else "" for line in body)
        lines.extend(item_lines if marked else [marker])
    return lines


def _display_width(text: str) -> int:
    """Columns a monospace font gives the text: CJK is double, marks are zero."""
    width = 0
    for char in text:
        if unicodedata.combining(char) or unicodedata.category(char) == "Cf":
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def _pad(text: str, width: int, align: str) -> str:
    gap = width - _display_width(text)
    if align == "right":
        return " " * gap + text
    if align == "center":
        return " " * (gap // 2) + text + " " * (gap - gap // 2)
    return text + " " * gap


def _table(node: SyntaxTreeNode, ctx: _Ctx) -> list[str]:
    plain = replace(ctx, plain=True)
    rows: list[list[str]] = []
    aligns: list[str] = []
    for section in node.children:
        for row in section.children:
            cells: list[str] = []
            for cell in row.children:
                inline = cell.children[0].children if cell.children else []
                cells.append(_inline(inline, plain).strip())
                if len(aligns) < len(cells):
                    style = str(cell.attrs.get("style", ""))
                    aligns.append(style.removeprefix("text-align:") or "left")
            rows.append(cells)
    if not rows:
        return []
    columns = max(len(row) for row in rows)
    aligns += ["left"] * (columns - len(aligns))
    rows = [row + [""] * (columns - len(row)) for row in rows]
    widths = [max(_display_width(row[i]) for row in rows) for i in range(columns)]

    def line(row: list[str]) -> str:
        cells = (_pad(cell, widths[i], aligns[i]) for i, cell in enumerate(row))
        return _plain_text(" | ".join(cells).rstrip())

    rule = "-+-".join("-" * width for width in widths)
    return [FENCE, line(rows[0]), rule, *(line(row) for row in rows[1:]), FENCE]
