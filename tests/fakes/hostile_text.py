"""Hostile text for everything the bot sends to Slack: Slack syntax, Markdown syntax and unicode a
model, a page or a person might write, links in every CommonMark spelling with hostile targets and
labels, and `live_markup`, which says what in a Slack text would notify, point somewhere unsafe or
leave a `<` open. Generated with hypothesis; shared by the mrkdwn, outgoing and senders tests."""
from __future__ import annotations

import re

from hypothesis import strategies as st

from bot.slack.mrkdwn_escaping import MAX_LINK_LABEL_CHARS, MAX_LINK_URL_CHARS, URL_LABEL_CHARS

# `<target|label>` or `<target>`: what Slack turns into a link, a mention or a broadcast.
ATOM = re.compile(r"<([^<>]*)>")
# The only targets a reader may click; anything else in `<…>` is live Slack markup.
SAFE_TARGET = re.compile(r"(?:https?://[^\s|<>]+|mailto:[^\s|<>]+)", re.IGNORECASE)
BROADCAST = re.compile(r"(?<![\w.])@(?:channel|here|everyone)\b", re.IGNORECASE)
# Code keeps its characters, and Slack does not look for mentions in it.
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)



def live_markup(mrkdwn: str, allowed: frozenset[str] = frozenset()) -> list[str]:
    """Everything in Slack text that would notify, point somewhere unsafe, or swallow the text after it."""
    problems = []
    for match in ATOM.finditer(mrkdwn):
        target = match.group(1).split("|", 1)[0]
        if not SAFE_TARGET.fullmatch(target) and match.group() not in allowed:
            problems.append(f"live markup {match.group()!r}")
    rest = ATOM.sub(" ", mrkdwn)
    if "<" in rest:
        problems.append(f"unclosed '<' in {rest[max(0, rest.index('<') - 20):rest.index('<') + 20]!r}")
    problems += [f"broadcast {m.group()!r}" for m in BROADCAST.finditer(CODE.sub(" ", rest))]
    return problems


# --- generators ---------------------------------------------------------------------

# Text a model, a page or a user might put anywhere: Slack syntax, Markdown syntax, unicode.
HOSTILE_WORDS = [
    "<!channel>", "<!here>", "<!everyone>", "<@U024BE7LH>", "<#C024BE7LH|general>", "<!subteam^S012>",
    "<!date^1392734382^{date}|x>", "@here", "@channel", "@everyone", "!channel", "&lt;", "&amp;", "&#60;",
    "|", ">", "<", "*", "_", "~", "`", "```", "[", "]", "(", ")", "\\", "\n", " ", "東京", "שלום", "é", "\u200d",
]
# Starts of targets: mentions, broadcasts, fragments, other schemes, spellings of each.
HOSTILE_PREFIXES = [
    "!", "!channel", "!here", "!everyone", "!subteam^S1", "@", "@U024BE7LH", "@W1", "#", "#C024BE7LH", "#frag",
    "<!channel>", "&#33;channel", "&#x21;here", "&excl;everyone", "&commat;U1", "&#64;U1", "&num;C1", "\\!channel",
    "%21channel", "javascript:", "JaVaScRiPt:", "vbscript:", "data:text/html,", "file:///", "ftp://", "tel:",
    "slack://", "//host.test", "/relative", "relative", "https:", "https:!channel", "http:@U1", " https://x.test",
    "mailto:", "mailto:@here", "https://", "http://", "HTTPS://", "https://@U1", "https://x.test/", "mailto:a@b.test",
]
SAFE_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-._~/?=&%+"

hostile_text = st.lists(
    st.one_of(st.sampled_from(HOSTILE_WORDS), st.text(alphabet=SAFE_CHARS + "!@#^ |<>\"'()", max_size=12)),
    max_size=6,
).map("".join)


@st.composite
def targets(draw: st.DrawFn) -> str:
    """A link destination: a hostile prefix, a tail, and sometimes a very long path."""
    target = draw(st.sampled_from(HOSTILE_PREFIXES)) + draw(hostile_text)
    if draw(st.integers(0, 19)) == 0:
        target += "a" * draw(st.sampled_from([URL_LABEL_CHARS, MAX_LINK_URL_CHARS, 3_100, 5_000]))
    return target


@st.composite
def labels(draw: st.DrawFn) -> str:
    """Hostile words; now and then empty, or long enough to be shortened."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return ""
    if kind == 1:
        return "word " * (draw(st.integers(MAX_LINK_LABEL_CHARS - 5, MAX_LINK_LABEL_CHARS * 3)) // 5)
    return draw(hostile_text)


def _angle(target: str) -> str:
    # A `<…>` destination may hold spaces but no line break or unescaped angle bracket.
    return "<" + re.sub(r"([<>])", r"\\\1", target.replace("\n", " ")) + ">"


@st.composite
def links(draw: st.DrawFn) -> tuple[str, list[str]]:
    """One link or image in any of CommonMark's spellings, with the reference definitions it needs."""
    label, target, ref = draw(labels()), draw(targets()), draw(st.sampled_from(["ref", "Ref 1", "r&amp;"]))
    destination = draw(st.sampled_from([target, _angle(target)]))
    title = draw(st.sampled_from(["", ' "a title"', " 'x'", " (<!here>)"]))
    form = draw(st.sampled_from(["inline", "image", "full", "collapsed", "shortcut", "autolink", "nested", "bare"]))
    if form == "inline":
        return f"[{label}]({destination}{title})", []
    if form == "image":
        return f"![{label}]({destination}{title})", []
    if form == "full":
        return f"[{label}][{ref}]", [f"[{ref}]: {destination}{title}"]
    if form == "collapsed":
        return f"[{label}][]", [f"[{label}]: {destination}"]
    if form == "shortcut":
        return f"[{label}]", [f"[{label}]: {destination}"]
    if form == "autolink":
        return f"<{target}>", []
    if form == "nested":
        return f"[![{label}]({destination})]({draw(targets())})", []
    return target, []


@st.composite
def documents(draw: st.DrawFn) -> str:
    """Markdown where links sit in every kind of block and inline context."""
    blocks: list[str] = []
    definitions: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        items = []
        for _ in range(draw(st.integers(1, 3))):
            text, defs = draw(links())
            definitions += defs
            items.append(text)
        inline = draw(hostile_text).join(items)
        wrap = draw(st.sampled_from(["{}", "**{}**", "_{}_", "~~{}~~", "# {}", "- {}", "1. {}", "> {}",
                                     "- a\n  - {}", "| a | b |\n|---|---|\n| {} | x |"]))
        blocks.append(wrap.format(inline.replace("\n", " ") if "|" in wrap else inline))
    return "\n\n".join(blocks + definitions)


# --- what the wire may carry (bot/slack/outgoing.py's rule) --------------------------------

WIRE_SAFE = re.compile(r"(?:https?://[^\s|<>]+|mailto:[^\s|<>]+|@[UW][A-Z0-9]{2,}|#[CG][A-Z0-9]{2,})", re.IGNORECASE)
SAFE_MARKDOWN_LINK = re.compile(r"\[[^\[\]\\\n]*\]\((?:https?://|mailto:)[^()\s]*\)", re.IGNORECASE)


def live(text: str, kind: str) -> list[str]:
    """Markup in `text` Slack would make live (a person's mention and http(s)/mailto links are allowed).
    Slack shows a plain_text object as it is: only a broadcast word could matter there."""
    problems = [m.group() for m in ATOM.finditer(text)
                if kind != "plain" and not WIRE_SAFE.fullmatch(m.group(1).split("|", 1)[0])]
    rest = ATOM.sub(" ", text)
    if kind != "plain" and "<" in rest:
        problems.append("unclosed <")
    problems += [m.group() for m in BROADCAST.finditer(CODE.sub(" ", rest))]
    if kind == "markdown":
        problems += _live_brackets(text)
    return problems


def _live_brackets(text: str) -> list[str]:
    """Unescaped `[` in Markdown that does not start `[words](http(s) or mailto target)`."""
    found, backslashes = [], 0
    for i, char in enumerate(text):
        if char == "[" and backslashes % 2 == 0 and not SAFE_MARKDOWN_LINK.match(text, i):
            found.append(text[i:i + 40])
        backslashes = backslashes + 1 if char == "\\" else 0
    return found
