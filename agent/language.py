"""The team's language: which language a question is written in, and how that language writes numbers.

`detect(text)` picks, from the languages below, the one whose common words the text uses most
(English when none stands out; Japanese and Chinese by their scripts): the run writes its report, summary and progress notes in it (the
opening names it, agent/task.py), the figure check reads the report's numbers in its convention
(decimal comma or point), and the bot picks its own words for the thread from a small catalogue
(bot/catalogue.py). A few dozen function words per language are enough to tell a question's
language; no model call and no dependency.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ENGLISH", "LANGUAGES", "Language", "detect", "language"]


@dataclass(frozen=True)
class Language:
    code: str  # ISO 639-1
    name: str  # in English, for the prompt
    native: str  # as its speakers write it
    decimal: str  # "." or ","
    words: frozenset[str]  # common function words, lower case


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


LANGUAGES: dict[str, Language] = {
    lang.code: lang
    for lang in (
        Language(
            "en",
            "English",
            "English",
            ".",
            _words(
                "the and of to in is are what which how does do for with on than from this that was were "
                "their its compare between a an it be by as or"
            ),
        ),
        Language(
            "de",
            "German",
            "Deutsch",
            ",",
            _words(
                "der die das und ist sind wie was welche welcher welches im in den dem des ein eine einen "
                "mit für von zu auf nicht als bei vergleiche vergleich wie hoch gibt es sich"
            ),
        ),
        Language(
            "fr",
            "French",
            "français",
            ",",
            _words(
                "le la les et est sont quel quelle quels quelles comment des du de un une pour avec dans "
                "sur que qui pas au aux entre comparer"
            ),
        ),
        Language(
            "es",
            "Spanish",
            "español",
            ",",
            _words(
                "el la los las y es son qué cuál cuáles cómo de del un una para con en por que entre comparar cuánto"
            ),
        ),
        Language(
            "it",
            "Italian",
            "italiano",
            ",",
            _words("il lo la gli le e è sono che quale quali come di del della un una per con in tra confronta quanto"),
        ),
        Language(
            "pt",
            "Portuguese",
            "português",
            ",",
            _words("o a os as e é são que qual quais como de do da um uma para com em entre comparar quanto"),
        ),
        Language(
            "nl",
            "Dutch",
            "Nederlands",
            ",",
            _words("de het een en is zijn wat welke hoe van voor met op in dat die niet tussen vergelijk"),
        ),
        # Told apart by their scripts, not by words (neither writes spaces between words): see `_by_script`.
        Language("ja", "Japanese", "日本語", ".", frozenset()),
        Language("zh", "Chinese", "中文", ".", frozenset()),
    )
}
ENGLISH = LANGUAGES["en"]
# A language must match at least this many more words than English to be chosen over it:
# English questions borrow "de", "a", "in", "die" in names and quotes.
MARGIN = 1
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


# Japanese and Chinese are told by script: a text with at least this many Chinese characters (kanji,
# hanzi) and kana per word in other scripts is one of the two (each such character is about a word's
# worth; a Latin fund name, a ticker or a line of pinyin beside the characters is fine) …
CJK_PER_OTHER_WORD = 0.5
# … and Japanese when at least this share of those are kana (Chinese writes none; Japanese prose is
# mostly kana around its kanji, and even a headline has a particle or two).
KANA_SHARE = 0.1


def _is_kana(char: str) -> bool:
    return "\u3040" <= char <= "\u30ff" or "\u31f0" <= char <= "\u31ff" or "\uff66" <= char <= "\uff9d"


def _is_han(char: str) -> bool:
    return "\u4e00" <= char <= "\u9fff" or "\u3400" <= char <= "\u4dbf" or "\uf900" <= char <= "\ufaff"


def _by_script(text: str) -> Language | None:
    """Japanese or Chinese, by their characters; None for a text written in neither."""
    kana = han = other_words = 0
    in_word = False
    for char in text:
        cjk = _is_kana(char) or _is_han(char)
        kana += _is_kana(char)
        han += _is_han(char)
        if char.isalpha() and not cjk:
            other_words += not in_word
            in_word = True
        else:
            in_word = False
    if not (kana + han) or (kana + han) < CJK_PER_OTHER_WORD * other_words:
        return None
    return LANGUAGES["ja"] if kana >= KANA_SHARE * (kana + han) else LANGUAGES["zh"]


def detect(text: str) -> Language:
    """The language of `text` among LANGUAGES; English when none stands out."""
    written = _by_script(text)
    if written is not None:
        return written
    tokens = [t.lower() for t in _WORD.findall(text)]
    if not tokens:
        return ENGLISH
    scores = {code: sum(t in lang.words for t in tokens) for code, lang in LANGUAGES.items()}
    best = max(scores, key=lambda code: (scores[code], code == "en"))
    if best != "en" and scores[best] < scores["en"] + MARGIN + (1 if len(tokens) > 8 else 0):
        return ENGLISH
    return LANGUAGES[best]


def language(code: str) -> Language:
    """The language of a code (from a stored run); English for one this module does not know."""
    return LANGUAGES.get(code, ENGLISH)
