"""The team's language: which language a question is written in, and how that language writes numbers.

`detect(text)` picks, from the languages below, the one whose common words the text uses most
(English when none stands out): the run writes its report, summary and progress notes in it (the
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
    )
}
ENGLISH = LANGUAGES["en"]
# A language must match at least this many more words than English to be chosen over it:
# English questions borrow "de", "a", "in", "die" in names and quotes.
MARGIN = 1
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def detect(text: str) -> Language:
    """The language of `text` among LANGUAGES; English when none stands out."""
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
