"""Render the research agent's Markdown as Slack ``mrkdwn`` and split it into messages.

The conversion walks markdown-it-py's token tree, so Markdown syntax is never
pattern-matched in the raw source; only the text *inside* tokens is escaped.

Every `<…>` this module emits is a link whose target passed `link_target` (http, https
or mailto), so nothing the model, a page or a user wrote can become a mention
(`<@U…>`, `<#C…>`), a broadcast (`<!channel>`, `<!subteam^…>`) or an unclosed `<`.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from .conversion_memo import ConversionMemo

__all__ = [
    "MAX_LINK_CHARS",
    "escape_markdown",
    "escape_text",
    "link",
    "link_target",
    "paragraph_texts",
    "shorten_mrkdwn",
    "split_text",
    "to_mrkdwn",
]

# Spaces per nesting level: Slack has no list markup, so indentation is the nesting.
LIST_INDENT = 4
# Top-level bullet, and the hollow one for deeper levels so nesting reads at a glance.
BULLET = "•"
NESTED_BULLET = "◦"
# Slack has no rule markup; a line of em dashes reads as one.
HORIZONTAL_RULE = "———"
# Slack's code-block delimiter; it must never occur inside code or text we emit.
FENCE = "```"
# Modifier-letter grave accent looks like a backtick but Slack does not treat it as one.
BACKTICK_LOOKALIKE = "ˋ"
# Replace `|` and `>` in link text: Slack ends the link label at either.
LINK_TEXT_PIPE = "∣"
LINK_TEXT_GT = "›"
# The only link targets Slack gets: anything else ("!channel", "@U1", "#C1", "#fragment",
# a relative path, javascript:) would be a mention, a broadcast or a dead link, so it is text.
LINK_SCHEMES = frozenset({"http", "https", "mailto"})
# A longer URL (as sent, encoded) is shown as text: no browser handles much more, and with
# the label limit every link `<url|label>` fits one 3,000-char section block whole.
MAX_LINK_URL_CHARS = 2_000
# A longer link label (as sent, escaped) is shortened, as plain words, for the same reason.
MAX_LINK_LABEL_CHARS = 300
# The longest `<url|label>` this module emits: "<", "|", ">" around the two.
MAX_LINK_CHARS = MAX_LINK_URL_CHARS + MAX_LINK_LABEL_CHARS + 3
# A bare URL shown as its own label is shortened past this; the target stays whole.
URL_LABEL_CHARS = 80
ELLIPSIS = "…"
# Placed after "@" so "@channel" stays readable but no longer notifies anyone.
ZERO_WIDTH_JOINER = "\u200d"
# Smallest chunk split_text accepts: a re-opened fence, its closing line and some text.
MIN_SPLIT_LIMIT = 32
# A preferred break leaving a chunk under half full wastes a message; look further.
SPLIT_MIN_FILL = 0.5

# Texts whose paragraphs are remembered (a report's sections, a few dozen runs' worth).
PARAGRAPH_MEMO_TEXTS = 256

_PARSER = MarkdownIt("commonmark").enable("table").enable("strikethrough")

_FOOTNOTE = re.compile(r"\[(\d{1,6})\]")
# Not after a word character, so e-mail addresses like "ops@here.com" stay intact.
_BROADCAST = re.compile(r"(?<![\w.])@(?=(?:channel|here|everyone)\b)", re.IGNORECASE)
_BACKTICK_RUN = re.compile(r"`{3,}")
_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
# Characters that end or corrupt a Slack `<url|label>`; whitespace would end the URL.
_URL_UNSAFE = re.compile(r"[|<>\s\x00-\x1f\x7f]")
# A scheme right at the start: urlsplit would forgive leading spaces that Slack would not.
_SCHEME = re.compile(r"\A([A-Za-z][A-Za-z0-9+.-]*+):")  # \A: a search does not rescan from every letter
# Markdown's punctuation that could format, link or start a block (escaped with a backslash).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_~\[\]#|!>])")
# A bare URL in text, as Slack would make it a link.
_BARE_URL = re.compile(r"https?://[^\s<>|\"'`]+", re.IGNORECASE)
# Unbreakable spans of emitted mrkdwn: `<...>` links and mentions, `&...;` entities.
_ATOM = re.compile(r"<[^<>]*>|&#?[A-Za-z0-9]+;")


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


# --- public helpers ----------------------------------------------------------------


def escape_text(text: str) -> str:
    """Plain text made safe for mrkdwn: `&<>` escaped, fences defused, broadcasts made inert."""
    return _plain_text(text)


def escape_markdown(text: str) -> str:
    """Plain text made safe for a Markdown field (the stream's `markdown_text`, task cards): `&<>`
    as entities, Markdown's punctuation backslash-escaped, broadcasts made inert. Shown as written."""
    return _defuse_broadcasts(_MARKDOWN_SPECIAL.sub(r"\\\1", _escape(text)))


def link(url: str, label: str) -> str:
    """A Slack link whose URL and label cannot end it early or inject markup.

    A target that is not http(s)/mailto, or is too long, comes out as text instead.
    """
    label = " ".join(label.split())
    target = link_target(url)
    if target is None:
        return _link_as_text(_plain_text(_shorten_words(label, MAX_LINK_LABEL_CHARS)), url)
    if not label:
        return _bare_link(target, url)
    return f"<{target}|{_label(label)}>"


def link_target(url: str) -> str | None:
    """The URL encoded for `<url|label>`, or None when it must not become a Slack link.

    Only http(s) with a host and mailto with an address qualify, up to
    MAX_LINK_URL_CHARS; everything else is shown as text by the callers.
    """
    scheme = _SCHEME.match(url)
    if scheme is None or scheme.group(1).lower() not in LINK_SCHEMES or len(url) > MAX_LINK_URL_CHARS:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced "[" in the host
        return None
    if parts.scheme.lower() == "mailto" and not parts.path.strip():
        return None
    if parts.scheme.lower() != "mailto" and not parts.netloc.strip():
        return None  # "https:!channel" has no host: nothing to open
    target = _url(url)
    return target if len(target) <= MAX_LINK_URL_CHARS else None


def shorten_mrkdwn(mrkdwn: str, limit: int) -> str:
    """Mrkdwn cut to at most ``limit`` characters at a break, never inside a link or entity."""
    if len(mrkdwn) <= limit:
        return mrkdwn
    chunks = split_text(mrkdwn, limit - len(ELLIPSIS))
    return (chunks[0] + ELLIPSIS) if chunks else ""


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


# --- escaping ---------------------------------------------------------------------


def _escape(text: str) -> str:
    """Escape Slack's three control characters; everything else is shown as is."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _lookalike_backticks(match: re.Match[str]) -> str:
    return BACKTICK_LOOKALIKE * len(match.group())


def _code_text(code: str) -> str:
    """Code keeps its characters, except fences (which would end the block), &<>, and broadcasts:
    inert inside code, but a code span that splitting or shortening opens would let one live."""
    return _defuse_broadcasts(_escape(_BACKTICK_RUN.sub(_lookalike_backticks, code)))


def _defuse_broadcasts(text: str) -> str:
    return _BROADCAST.sub("@" + ZERO_WIDTH_JOINER, text)


def _plain_text(text: str) -> str:
    """Ordinary text: escaped, fences defused, broadcast mentions made inert."""
    text = _BACKTICK_RUN.sub(_lookalike_backticks, text)
    return _defuse_broadcasts(_escape(text))


def _link_label(text: str) -> str:
    return text.replace("|", LINK_TEXT_PIPE).replace(">", LINK_TEXT_GT)


def _label(plain: str) -> str:
    """Plain words as a link label, made safe inside `<url|…>`, at most MAX_LINK_LABEL_CHARS.

    The words are cut, never the escaped text, so no `&amp;` is cut in half; escaping
    can grow the text, hence the search for the longest prefix that fits.
    """
    label = _plain_text(_link_label(plain))
    if len(label) <= MAX_LINK_LABEL_CHARS:
        return label
    low, high = 0, min(len(plain), MAX_LINK_LABEL_CHARS)
    while low < high:  # the longest prefix whose escaped form, with "…", fits
        mid = (low + high + 1) // 2
        if len(_plain_text(_link_label(plain[:mid].rstrip()))) + len(ELLIPSIS) <= MAX_LINK_LABEL_CHARS:
            low = mid
        else:
            high = mid - 1
    return _plain_text(_link_label(plain[:low].rstrip())) + ELLIPSIS


def _shorten_words(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(ELLIPSIS)].rstrip() + ELLIPSIS


def _bare_link(target: str, url: str) -> str:
    """A link that shows its own URL; a long one shows a shortened URL, the target stays whole."""
    if len(url) <= URL_LABEL_CHARS:
        return f"<{target}>"
    return f"<{target}|{_label(_shorten_words(url, URL_LABEL_CHARS))}>"


def _link_as_text(label: str, url: str) -> str:
    """A link that cannot be a Slack link, as text: its label, then where it pointed.

    ``label`` is mrkdwn already. A same-page "#fragment" means nothing in Slack, so only
    the label is kept; otherwise the target follows, shortened and escaped.
    """
    shown = _plain_text(_shorten_words(" ".join(url.split()), URL_LABEL_CHARS))
    if not label:
        return shown
    if url.startswith("#") or not shown or shown == label:
        return label
    return f"{label} ({shown})"


def _url(url: str) -> str:
    """Make a URL safe inside `<url|label>`: percent-encode delimiters, escape `&`."""
    encoded = _URL_UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), url)
    return encoded.replace("&", "&amp;")


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
    allowed = ctx.allowed
    if allowed is None:
        return text
    return _BARE_URL.sub(lambda m: m.group() if allowed(m.group()) else _domain_of(m.group()), text)


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


# --- splitting --------------------------------------------------------------------

# Break kinds, most preferred first: paragraph, line, word.
_BREAKS = ("\n\n", "\n", " ")


def split_text(text: str, limit: int) -> list[str]:
    """Split mrkdwn into chunks of at most ``limit`` characters.

    Breaks fall on paragraph breaks, then line breaks, then spaces (the break
    itself is dropped), never inside a `<...>` link or an `&...;` entity: a link
    too long for one chunk is shown as text (label, then URL) rather than cut.
    A code block cut by a break is closed at the end of one chunk and re-opened
    at the start of the next. Returns no chunks for empty text.
    """
    if limit < MIN_SPLIT_LIMIT:
        raise ValueError(f"limit must be at least {MIN_SPLIT_LIMIT}, got {limit}")
    reserve = len(FENCE) + 1  # room for a closing "\n```" on every chunk
    # The room a link has: links never sit in code, so only the closing reserve is taken.
    text = _unlink_longer_than(text, limit - reserve)
    layout = _Layout(text)
    chunks: list[str] = []
    start = _skip_newlines(text, 0)
    while start < len(text):
        prefix = FENCE + "\n" if layout.in_code(start) else ""
        if len(prefix) + len(text) - start <= limit:
            chunks.append(prefix + text[start:])
            break
        cut, resume = layout.find_cut(start, limit - len(prefix) - reserve)
        suffix = "\n" + FENCE if layout.in_code(cut) else ""
        body = text[start:cut]
        if body.strip():
            chunks.append(prefix + body + suffix)
        start = _skip_newlines(text, resume)
    return chunks


def _unlink_longer_than(text: str, longest: int) -> str:
    """Links longer than ``longest`` as text, so no cut can leave an unclosed `<`."""

    def as_text(match: re.Match[str]) -> str:
        atom = match.group()
        if len(atom) <= longest or not atom.startswith("<"):
            return atom
        url, _, label = atom[1:-1].partition("|")
        return f"{label} ({url})" if label else url

    return _ATOM.sub(as_text, text)


class _Layout:
    """Where a mrkdwn text may be cut, and whether a position is inside code."""

    def __init__(self, text: str) -> None:
        self.text = text
        # Fences are the only backtick runs we emit; alternate runs open and close.
        self._fence_ends = [m.end() for m in _BACKTICK_RUN.finditer(text)]
        spans = sorted([m.span() for m in _ATOM.finditer(text)] + [m.span() for m in _BACKTICK_RUN.finditer(text)])
        merged: list[tuple[int, int]] = []
        for span_start, span_end in spans:
            if merged and span_start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], span_end))
            else:
                merged.append((span_start, span_end))
        self._atom_starts = [span[0] for span in merged]
        self._atom_ends = [span[1] for span in merged]

    def in_code(self, pos: int) -> bool:
        return bisect.bisect_right(self._fence_ends, pos) % 2 == 1

    def splits_atom(self, pos: int) -> bool:
        i = bisect.bisect_left(self._atom_starts, pos) - 1
        return i >= 0 and pos < self._atom_ends[i]

    def empties_code(self, cut: int, resume: int) -> bool:
        """Whether the cut leaves a code block with no code on one side."""
        resume = _skip_newlines(self.text, resume)
        opened_just_before = self.in_code(cut) and self.text.endswith(FENCE, 0, cut)
        closes_just_after = self.in_code(resume) and self.text.startswith(FENCE, resume)
        return opened_just_before or closes_just_after

    def find_cut(self, start: int, budget: int) -> tuple[int, int]:
        """Where the chunk starting at ``start`` ends, and where the next one starts."""
        text = self.text
        window_end = start + budget
        for min_fill in (SPLIT_MIN_FILL, 0.0):
            floor = start + max(1, int(budget * min_fill))
            for brk in _BREAKS:
                pos = text.rfind(brk, start, window_end + len(brk))
                while pos >= floor:
                    resume = pos + len(brk)
                    if not (self.splits_atom(pos) or self.splits_atom(resume) or self.empties_code(pos, resume)):
                        return pos, resume
                    pos = text.rfind(brk, start, pos + len(brk) - 1)
        # No break fits: cut mid-word, not through an atom nor (if avoidable) a character
        # cluster. Atoms come first: a cut link would leave an unclosed "<".
        for splits in (lambda pos: self.splits_atom(pos) or _splits_cluster(text, pos), self.splits_atom):
            cut = window_end
            while cut > start and splits(cut):
                cut -= 1
            if cut > start:  # even one character: a link right after it then fits whole
                return cut, cut
        return window_end, window_end  # only an atom longer than the budget gets here


def _splits_cluster(text: str, pos: int) -> bool:
    """Whether cutting at pos would separate a mark or joiner from its character."""
    after, before = text[pos], text[pos - 1]
    if unicodedata.combining(after) or ZERO_WIDTH_JOINER in (after, before):
        return True
    return "\ufe00" <= after <= "\ufe0f"  # variation selectors


def _skip_newlines(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] == "\n":
        pos += 1
    return pos
