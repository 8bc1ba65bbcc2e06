"""The figure check write_section and revise_section run before a body is saved.

Every figure in a sentence must be stated by a passage the sentence cites (or be a
calculator result whose inputs those passages state). A mismatch is refused with what the
cited passages do say, so the model can fix the figure or the citation. Sending the same
figure with the same markers again is taken as the model's considered choice: the text is
saved and the figure flagged for the reader, never silently trusted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..figures import FigureFlag, check_sentence, figures_said, sentences
from ..language import language
from .base import ToolContext

# A refusal quotes at most this many problems; the rest are counted.
PROBLEMS_SHOWN = 6
SENTENCE_CHARS = 140

Key = tuple[str, tuple[str, ...]]  # (figure value, cited markers): what "the same again" means


@dataclass
class Problem:
    figure: str
    key: Key
    sentence: str
    markers: list[str]
    said: dict[str, list[str]] = field(default_factory=dict)  # marker → figures its passage states

    def why(self) -> str:
        if not self.markers:
            return "no citation"
        return "not found in " + " ".join(f"[{m}]" for m in self.markers)

    def describe(self) -> str:
        sentence = self.sentence if len(self.sentence) <= SENTENCE_CHARS else self.sentence[: SENTENCE_CHARS - 1] + "…"
        if not self.markers:
            return (
                f'"{sentence}" states {self.figure} with no marker: end the sentence with the [sN] of the '
                "passage that states it."
            )
        said = "; ".join(f"[{m}] says {', '.join(figs) if figs else 'no figures'}" for m, figs in self.said.items())
        return f'"{sentence}": {said}, not {self.figure}.'


@dataclass
class FigureReport:
    checked: int
    flags: list[FigureFlag]
    refusal: str | None  # set when the body must not be saved yet


def check_figures(body: str, ctx: ToolContext) -> FigureReport:
    passages = {s.marker: s.passage for s in ctx.registry.all()}
    checked = 0
    problems: list[Problem] = []
    for sentence in sentences(body):
        verdict = check_sentence(sentence, passages, ctx.calculations, decimal=language(ctx.language).decimal)
        checked += verdict.checked
        for figure in verdict.missing:
            problems.append(
                Problem(
                    figure=figure.text,
                    key=(figure.key, tuple(sorted(verdict.markers))),
                    sentence=sentence,
                    markers=verdict.markers,
                    said={m: figures_said(passages.get(m, "")) for m in verdict.markers},
                )
            )
    fresh = [p for p in problems if p.key not in ctx.figure_refusals]
    if not fresh:  # nothing, or only figures the model already insisted on
        flags = [FigureFlag(figure=p.figure, sentence=p.sentence, markers=p.markers, why=p.why()) for p in problems]
        return FigureReport(checked, flags, None)
    ctx.figure_refusals.update(p.key for p in fresh)
    lines = [f"Not saved: {len(fresh)} figure(s) are not stated by the passages their sentence cites."]
    lines += [f"- {p.describe()}" for p in fresh[:PROBLEMS_SHOWN]]
    if len(fresh) > PROBLEMS_SHOWN:
        lines.append(f"- … and {len(fresh) - PROBLEMS_SHOWN} more.")
    lines.append(
        "Correct the figure, or cite the passage that states it (read the page with read_page if you only "
        "have a snippet). A figure you computed must come from the calculator, its inputs cited in the same "
        "sentence. If the figure and citation are right as written, send them again unchanged: the section "
        "is then saved with the figure marked for the reader as not found in its source."
    )
    return FigureReport(checked, [], "\n".join(lines))
