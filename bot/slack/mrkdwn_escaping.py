"""Plain text, code and links made safe for Slack ``mrkdwn``: `&<>` escaped, code fences
defused, broadcasts (`@channel`, `@here`) made inert, and links whose target is http(s) or mailto.

Every `<…>` this module emits is a link whose target passed `link_target`, so nothing the model, a
page or a person wrote can become a mention (`<@U…>`, `<#C…>`), a broadcast (`<!channel>`,
`<!subteam^…>`) or an unclosed `<`."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = [
    "BACKTICK_LOOKALIKE",
    "ELLIPSIS",
    "FENCE",
    "LINK_SCHEMES",
    "LINK_TEXT_GT",
    "LINK_TEXT_PIPE",
    "MAX_LINK_CHARS",
    "MAX_LINK_LABEL_CHARS",
    "MAX_LINK_URL_CHARS",
    "URL_LABEL_CHARS",
    "ZERO_WIDTH_JOINER",
    "escape_markdown",
    "escape_text",
    "link",
    "link_target",
]


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
# Not after a word character, so e-mail addresses like "ops@here.com" stay intact.
_BROADCAST = re.compile(r"(?<![\w.])@(?=(?:channel|here|everyone)\b)", re.IGNORECASE)
_BACKTICK_RUN = re.compile(r"`{3,}")
# Characters that end or corrupt a Slack `<url|label>`; whitespace would end the URL.
_URL_UNSAFE = re.compile(r"[|<>\s\x00-\x1f\x7f]")
# A scheme right at the start: urlsplit would forgive leading spaces that Slack would not.
_SCHEME = re.compile(r"\A([A-Za-z][A-Za-z0-9+.-]*+):")  # \A: a search does not rescan from every letter
# Markdown's punctuation that could format, link or start a block (escaped with a backslash).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_~\[\]#|!>])")


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
