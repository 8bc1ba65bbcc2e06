"""Text as the claim check reads it: a source's sentences (in its own language), a report's cited
sentences with their place in the body, and the terms a sentence asserts (content words, names, figures).

No model and no dictionary: sentence ends are punctuation not preceded by an abbreviation of the
source's language, words are compared by their first letters (a stem any European language shares
across its inflections), and CJK text, written without spaces, is compared by pairs of characters.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal
from functools import cache

from ..figures import Figure, figures_in
from ..language import Language, detect
from ..markers import MARKER_RE

__all__ = [
    "COMPOUNDING",
    "Span",
    "Terms",
    "claim_spans",
    "plain_claim",
    "language_of",
    "script_of",
    "sentence_spans",
    "terms_of",
]

# Words are compared by this many first letters: "charges"/"charged", "Kosten"/"Kostenquote".
STEM_CHARS = 6
# Shorter words are compared whole (after a plural "s" is dropped): "fee"/"fees", "VTI".
WHOLE_WORD_CHARS = 4
# Languages that write nouns as compounds and capitalise every noun: there a capitalised word is a
# name or a noun, found in a source also as a part of a compound.
COMPOUNDING = frozenset({"de"})
# A language is told by its common words only when they are this many and this share of the text's
# (Polish shares a few short words with Dutch; Dutch itself is a third or more of them).
LANGUAGE_MIN_WORDS = 2
LANGUAGE_MIN_SHARE = 0.1
# A source sentence longer than this is cut at its clauses: a table flattened into one line, a
# page without punctuation.
SENTENCE_MAX_CHARS = 600

# Abbreviations after which a full stop does not end a sentence, by language (lower case, no dot).
_ABBREVIATIONS: dict[str, frozenset[str]] = {
    "en": frozenset(
        "mr mrs ms dr prof st no nos vs etc eg ie approx inc ltd co corp jan feb mar apr jun jul aug sep "
        "sept oct nov dec fig figs vol pp p ca est dept gen gov sen rep jr sr".split()
    ),
    "de": frozenset("z.b bzw usw ca nr dr prof vgl ggf inkl evtl str abs jh mio mrd tsd u.a d.h s bspw".split()),
    "fr": frozenset("m mm mme mlle dr pr etc env cf nº no p av apr j.-c hab vol".split()),
    "es": frozenset("sr sra srta dr dra ud uds etc pág núm aprox ej p.ej av".split()),
    "it": frozenset("sig sigg dott prof ecc pag n ca es art".split()),
    "pt": frozenset("sr sra dr dra prof etc pág n nº aprox ex art".split()),
    "nl": frozenset("dhr mevr dr prof bijv enz nr ca blz o.a".split()),
}
# Candidate sentence ends: . ! ? … (with closing quotes or brackets) before a space; CJK full stops;
# line breaks (trafilatura writes one paragraph, list item or table row per line). Every pattern here
# starts a match only at the start of a run (a lookbehind) and takes the run whole (possessive), so a
# page's long run of dots or spaces is read once, not once from every position in it.
_END = re.compile(r"(?<![.!?…])[.!?…]++[\"'”’»)\]]*+(?=\s)|[。！？]+|\n")
_CLAUSE = re.compile(r"[;:]\s|\s[–—|]\s")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_LEADING_MARKERS = re.compile(r"^((?:\s*\[s\d+\])+)")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")  # agent/figures.py's rule for a report's sentences
# A bullet's indent is the spaces of its own line: from the start of a run of blank lines it would be
# tried again at each line of the run (the blank lines only become a space either way).
_MARKDOWN = re.compile(r"\*\*|__|`|^[^\S\n]*+(?:[-*+]|\d+[.)])\s+|^#+\s*|\|", re.MULTILINE)
_SPACE_BEFORE_STOP = re.compile(r"(?<!\s)\s++([.,;:!?])(?=\s|$)")
# Day numbers beside a month name are figures, however small ("on 3 March", "am 3. März").
_MONTHS = (
    "january february march april may june july august september october november december "
    "januar februar märz mai juni juli oktober dezember janvier février mars avril juin juillet août septembre "
    "octobre novembre décembre enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre "
    "diciembre gennaio febbraio aprile maggio giugno luglio settembre ottobre dicembre janeiro fevereiro março "
    "maio junho julho setembro outubro novembro dezembro"
).split()
_DAY = re.compile(
    rf"\b([1-9]|10)(?:st|nd|rd|th|er|º|\.)?\s+(?:de\s+)?(?:{'|'.join(_MONTHS)})\b"
    rf"|\b(?:{'|'.join(_MONTHS)})\s+([1-9]|10)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    text: str


def _is_abbreviation(text: str, at: int, lang: str) -> bool:
    """Whether the full stop ending at `at` closes an abbreviation or an initial, not a sentence."""
    if text[at - 1] != ".":
        return False
    word = _word_before(text, at - 1).lower().rstrip(".")
    if not word:
        return False
    if len(word) == 1 and word.isalpha():
        return True  # an initial: "J. R. R. Tolkien", "S. 12"
    known = _ABBREVIATIONS.get(lang, frozenset()) | _ABBREVIATIONS["en"]
    return word in known or word.replace(".", "") in known


def _word_before(text: str, end: int) -> str:
    """The run of word characters, dots and hyphens that ends at `end` (past one line break just
    before it), read back from `end`: a pattern searched for it would scan from every position before."""
    if end > 0 and text[end - 1] == "\n":
        end -= 1
    start = end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
        start -= 1
    return text[start:end]


def sentence_spans(text: str, language: Language | None = None) -> list[Span]:
    """The sentences of a source's text with their offsets, split by the rules of its language."""
    lang = (language or detect(text)).code
    spans: list[Span] = []
    start = 0
    for found in _END.finditer(text):
        end = found.end()
        if found.group(0) != "\n":
            after = text[end : end + 3].lstrip()
            if _is_abbreviation(text, found.end(), lang) or (after[:1].islower() and found.group(0) == "."):
                continue  # "e.g. the", "3 p.m. on": a sentence goes on in lower case
        _add(spans, text, start, end)
        start = end
    _add(spans, text, start, len(text))
    return spans


def _add(spans: list[Span], text: str, start: int, end: int) -> None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end - start < 2:
        return
    if end - start <= SENTENCE_MAX_CHARS:
        spans.append(Span(start, end, text[start:end]))
        return
    cut = start  # an over-long "sentence" (a flattened table) is read by its clauses
    for clause in _CLAUSE.finditer(text, start, end):
        if clause.start() - cut >= 20:
            _add(spans, text, cut, clause.start() + 1)
            cut = clause.end()
    if cut == start:  # no clause breaks at all: fixed-size pieces
        for piece in range(start, end, SENTENCE_MAX_CHARS):
            spans.append(
                Span(piece, min(end, piece + SENTENCE_MAX_CHARS), text[piece : min(end, piece + SENTENCE_MAX_CHARS)])
            )
        return
    _add(spans, text, cut, end)


def claim_spans(body: str) -> list[Span]:
    """A report section's sentences and list/table lines with their offsets, split as agent/figures.py
    splits them (its sentences are these texts): markers written after a full stop stay with it."""
    out: list[Span] = []
    offset = 0
    for line in body.splitlines(keepends=True):
        stripped = line.strip()
        line_start = offset + (len(line) - len(line.lstrip()))
        offset += len(line)
        if not stripped or set(stripped) <= set("|-: "):
            continue
        cursor = 0
        pieces = []
        for found in _SENTENCE_END.finditer(stripped):
            pieces.append((cursor, found.start()))
            cursor = found.end()
        pieces.append((cursor, len(stripped)))
        for a, b in pieces:
            piece = stripped[a:b]
            lead = _LEADING_MARKERS.match(piece)
            if lead and out:
                last = out[-1]
                end = line_start + a + lead.end()
                out[-1] = Span(last.start, end, body[last.start : end])
                a += lead.end()
                while a < b and stripped[a].isspace():
                    a += 1
            if a < b and stripped[a:b].strip():
                out.append(Span(line_start + a, line_start + b, stripped[a:b]))
    return out


def plain_claim(sentence: str) -> str:
    """The sentence as a reader takes it: markers, Markdown emphasis, bullets and link targets gone."""
    text = MARKER_RE.sub(" ", sentence)
    text = _unlink(text)
    text = _MARKDOWN.sub(" ", text)
    return _SPACE_BEFORE_STOP.sub(r"\1", " ".join(text.split()))


def _unlink(text: str) -> str:
    """Markdown links `[words](target)` as their words. Read with str.find, not a pattern: from each
    "[" of a long run without a "]" a pattern scans to the end again; here a failed "[" passes the
    scan on past every "[" that would fail the same way."""
    out: list[str] = []
    done = 0  # text before this is in `out`
    opening = text.find("[")
    while opening != -1:
        closing = text.find("]", opening + 1)
        if closing == -1:
            break  # no "]" after this "[", so after none that follows
        if text.startswith("(", closing + 1):
            end = text.find(")", closing + 2)
            if end == -1:
                break  # no ")" after this "(", so after none that follows
            out += [text[done:opening], text[opening + 1 : closing]]
            done = end + 1
            opening = text.find("[", done)
        else:  # every "[" before this "]" finds the same "]"
            opening = text.find("[", closing + 1)
    out.append(text[done:])
    return "".join(out)


# --- terms ------------------------------------------------------------------------------------


@cache
def _stopwords(code: str) -> frozenset[str]:
    """bm25s's stopword lists (loaded on the first check, not at start-up), and the detector's own words."""
    from bm25s import stopwords

    lists = {
        "en": stopwords.STOPWORDS_EN_PLUS,
        "de": stopwords.STOPWORDS_GERMAN,
        "fr": stopwords.STOPWORDS_FRENCH,
        "es": stopwords.STOPWORDS_SPANISH,
        "it": stopwords.STOPWORDS_ITALIAN,
        "pt": stopwords.STOPWORDS_PORTUGUESE,
        "nl": stopwords.STOPWORDS_DUTCH,
    }
    from ..language import LANGUAGES

    words = set(lists.get(code, ())) | set(lists["en"])
    if code in LANGUAGES:
        words |= LANGUAGES[code].words
    return frozenset(w.lower() for w in words)


def language_of(text: str, fallback: Language) -> Language:
    """The language whose common words `text` uses most, by bm25s's stopword lists (hundreds of words
    each: a short claim still shows its language, where agent/language.py's few dozen may miss it);
    `fallback` when no language stands out (a list of names, another language than these)."""
    from ..language import LANGUAGES

    tokens = [_fold(t) for t in _WORD.findall(text[:3000])]
    if not tokens:
        return fallback
    scores = sorted(((sum(t in _own_stopwords(code) for t in tokens), code) for code in LANGUAGES), reverse=True)
    (best, code), (second, _) = scores[0], scores[1]
    clear = best > second and best >= max(LANGUAGE_MIN_WORDS, LANGUAGE_MIN_SHARE * len(tokens))
    return LANGUAGES[code] if clear else fallback


@cache
def _own_stopwords(code: str) -> frozenset[str]:
    """One language's stopwords alone (without English's), for telling languages apart."""
    from bm25s import stopwords

    lists = {
        "en": stopwords.STOPWORDS_EN,
        "de": stopwords.STOPWORDS_GERMAN,
        "fr": stopwords.STOPWORDS_FRENCH,
        "es": stopwords.STOPWORDS_SPANISH,
        "it": stopwords.STOPWORDS_ITALIAN,
        "pt": stopwords.STOPWORDS_PORTUGUESE,
        "nl": stopwords.STOPWORDS_DUTCH,
    }
    return frozenset(w.lower() for w in lists.get(code, ()))


def script_of(text: str) -> str:
    """The writing system most of the text's letters are in: latin, cyrillic, greek, arabic, hebrew, cjk, other."""
    counts: dict[str, int] = {}
    for char in text[:2000]:
        if char.isalpha():
            kind = _script(char)
            counts[kind] = counts.get(kind, 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else "latin"


def _script(char: str) -> str:
    point = ord(char)
    if point < 0x250:
        return "latin"
    if 0x370 <= point < 0x400:
        return "greek"
    if 0x400 <= point < 0x530:
        return "cyrillic"
    if 0x590 <= point < 0x600:
        return "hebrew"
    if 0x600 <= point < 0x700:
        return "arabic"
    if 0x3040 <= point < 0xA000 or 0xAC00 <= point < 0xD7B0 or 0xF900 <= point < 0xFB00:
        return "cjk"
    if 0x1E00 <= point < 0x1F00:
        return "latin"
    return "other"


def _fold(word: str) -> str:
    return unicodedata.normalize("NFKC", word).lower()


def stem(word: str) -> str:
    word = _fold(word)
    if len(word) >= WHOLE_WORD_CHARS and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:STEM_CHARS]


@dataclass(frozen=True)
class Terms:
    """What a sentence asserts, as the lexical match and the rules compare it."""

    words: frozenset[str]  # stems of its content words
    names: frozenset[str]  # proper names and acronyms as written, folded to lower case
    figures: tuple[Figure, ...]

    def tokens(self) -> list[str]:
        """For BM25: words, names again (a name tells sources apart more than a word), figures."""
        return [*self.words, *(stem(n) for n in self.names), *(f"#{f.key}" for f in self.figures)]


def _is_cjk_run(word: str) -> bool:
    return _script(word[0]) == "cjk"


def terms_of(text: str, language: Language, *, decimal: str = ".", all_figures: bool = False) -> Terms:
    """The content words, names and figures of `text` in `language` (markers and Markdown ignored).
    `all_figures`: small counts too (a source's "3 funds" may back a claim's "three"; a claim's may not)."""
    plain = plain_claim(text)
    figures = figures_in(plain, checked_only=not all_figures, decimal=decimal)
    if not all_figures:
        figures += [Figure(m.group(0), Decimal(m.group(1) or m.group(2))) for m in _DAY.finditer(plain)]
    stop = _stopwords(language.code)
    for figure in figures:  # "US$1.2B" is a figure, not the name "US"
        plain = plain.replace(figure.text, " ")
    words: set[str] = set()
    names: set[str] = set()
    first = True
    for found in _WORD.finditer(plain):
        word = found.group(0)
        if _is_cjk_run(word):  # written without spaces: pairs of characters stand for words
            words.update(word[i : i + 2] for i in range(max(1, len(word) - 1)))
            first = False
            continue
        folded = _fold(word)
        if len(word) < 2 or folded in stop:
            first = False
            continue
        words.add(stem(word))
        acronym = len(word) >= 2 and word.isupper()
        # A capitalised word inside the sentence is a name (in German, a name or a noun). The first word
        # is not taken: "Secondo Meteo.it", "Regular binge episodes" (a name there is left to the judge).
        capitalised = word[0].isupper() and not first
        if acronym or capitalised:
            names.add(folded)
        first = False
    return Terms(frozenset(words), frozenset(names), tuple(figures))
