"""The words the bot writes itself in a thread, in the team's language: a small message catalogue.

The research model writes the report and the summary in the question's language (the engine
tells it which, agent/language.py); what the bot adds around them comes from here: the progress
message's words (phases, "Now:", "Checking:", how to steer, done / stopped / ended early, the
budget left), the report's status line, its "Summary" and "Sources" headings and its footer.
English and German are translated; any other language gets English words with its own decimal
mark. Names of things (`go deeper`, the stop reaction, run ids, tool progress lines the engine
writes) stay as they are.
"""

from __future__ import annotations

from agent import detect_language

__all__ = ["Words", "money", "plural", "said_once", "words_for"]

EN: dict[str, str] = {
    "researching": "Researching",
    "compacting": "Compacting notes before continuing",
    "finishing": "Writing the summary",
    "writing": "Writing",
    "queued": "⏳ Queued: research starts as soon as a worker is free",
    "now": "Now",
    "checking": "Checking",
    "steer": "react to stop · reply “go deeper” for a longer budget · reply to add a requirement",
    "go_deeper": "Go deeper",
    "done": "Done",
    "final_report": "the pinned report is final",
    "note": "Note",
    "stopped": "Stopped",
    "ended_early": "Ended early",
    "why": "Why",
    "kept": "Sections written so far are kept in the pinned report.",
    "budget_left": "{profile} budget · {parts} left",
    "in_progress": "In progress · {sections} so far{updated}",
    "updated": " · updated {time} UTC",
    "final": "Final · {sections} · finished {time} UTC",
    "incomplete": "Incomplete",
    "asked_by": "Asked by {who}",
    "estimated": "est. {cost}",
    "run": "run {id}",
    "continues": "continues run {id}",
    "summary": "Summary",
    "sources": "Sources",
    "min": "min",
}
DE: dict[str, str] = {
    "researching": "Recherche läuft",
    "compacting": "Notizen werden verdichtet, dann geht es weiter",
    "finishing": "Die Zusammenfassung wird geschrieben",
    "writing": "Schreibt",
    "queued": "⏳ In der Warteschlange: die Recherche beginnt, sobald ein Worker frei ist",
    "now": "Jetzt",
    "checking": "Prüfe",
    "steer": "zum Anhalten reagieren · „go deeper“ antworten für ein größeres Budget · antworten, um eine "
    "Anforderung hinzuzufügen",
    "go_deeper": "Go deeper",
    "done": "Fertig",
    "final_report": "der angeheftete Bericht ist endgültig",
    "note": "Hinweis",
    "stopped": "Angehalten",
    "ended_early": "Vorzeitig beendet",
    "why": "Warum",
    "kept": "Bereits geschriebene Abschnitte bleiben im angehefteten Bericht.",
    "budget_left": "Budget {profile} · noch {parts}",
    "in_progress": "In Arbeit · bisher {sections}{updated}",
    "updated": " · aktualisiert {time} UTC",
    "final": "Endgültig · {sections} · fertig {time} UTC",
    "incomplete": "Unvollständig",
    "asked_by": "Gefragt von {who}",
    "estimated": "ca. {cost}",
    "run": "Lauf {id}",
    "continues": "setzt Lauf {id} fort",
    "summary": "Zusammenfassung",
    "sources": "Quellen",
    "min": "Min.",
}
# Singular and plural of the nouns the bot counts.
NOUNS: dict[str, dict[str, tuple[str, str]]] = {
    "en": {
        "model request": ("model request", "model requests"),
        "source": ("source", "sources"),
        "section": ("section", "sections"),
    },
    "de": {
        "model request": ("Modellanfrage", "Modellanfragen"),
        "source": ("Quelle", "Quellen"),
        "section": ("Abschnitt", "Abschnitte"),
    },
}
CATALOGUES = {"en": EN, "de": DE}


class Words:
    """The catalogue of one language, with its decimal mark."""

    def __init__(self, code: str, decimal: str) -> None:
        self.code = code if code in CATALOGUES else "en"
        self.decimal = decimal
        self._words = CATALOGUES[self.code]

    def __call__(self, key: str, **values: object) -> str:
        return self._words[key].format(**values)

    def noun(self, word: str, n: int) -> str:
        one, many = NOUNS[self.code].get(word, (word, word + "s"))
        return one if n == 1 else many


def words_for(question: str) -> Words:
    """The catalogue for a run: the language of its question (the thread's first)."""
    lang = detect_language(question)
    return Words(lang.code, lang.decimal)


def number(value: float, places: int, words: Words) -> str:
    text = f"{value:,.{places}f}"
    if words.decimal == ",":
        text = text.replace(",", "\u2009").replace(".", ",")  # thin space between thousands, decimal comma
    return text


def plural(n: int, word: str, words: Words) -> str:
    return f"{number(n, 0, words)} {words.noun(word, n)}"


def money(usd: float, words: Words) -> str:
    """USD as the language writes it: $0.84, or 0,84 $ with a decimal comma."""
    amount = number(usd, 2, words)
    return f"{amount} $" if words.decimal == "," else f"${amount}"


def said_once(word: str, reason: str) -> str | None:
    """A run's end and its reason as one phrase when the reason opens by saying the end again: "Stopped"
    with "stopped by <@U0ANA> at 10:42 UTC" reads "Stopped by <@U0ANA> at 10:42 UTC", not "Stopped · Why:
    stopped by …". None when the reason says something else (then both are shown)."""
    head, _, rest = reason.strip().partition(" ")
    if not rest or head.lower() != word.lower():
        return None
    return f"{word} {rest}"
