"""Example user evaluators: ``answers_in_french`` (registered as an entry point) and
``oae_example_plugin:AnswerLength`` (named by ``module:Class``)."""

from __future__ import annotations

import re

from otel_agent_eval import AgentTrace, EvalResult, Evaluator

FRENCH_WORDS = frozenset("le la les un une est et il elle fait nous vous votre bonjour merci soleil heure".split())
LANGUAGE_KEY = "app.language"
"""An agent span attribute (so in the run's metadata) may name the language expected of the run."""


class AnswersInFrench(Evaluator):
    """The final answer is in French (share of common French words); runs whose metadata names
    another language (``app.language``) are skipped."""

    name = "answers_in_french"
    version = "1"

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        language = trace.metadata.get(LANGUAGE_KEY)
        if language not in (None, "fr"):
            return [self.skipped(trace, f"the run is expected in {language}, not French")]
        words = re.findall(r"[a-zàâçéèêëîïôûùüÿœ]+", (trace.final_output or "").lower())
        if not words:
            return [self.skipped(trace, "no final answer")]
        french = sum(word in FRENCH_WORDS for word in words) / len(words)
        return [self.scored(trace, 1.0 if french >= 0.2 else 0.0, f"{french:.0%} common French words")]


class AnswerLength(Evaluator):
    """The final answer is at most 60 characters."""

    name = "answer_length"
    version = "1"
    default_threshold = 1.0

    def evaluate(self, trace: AgentTrace) -> list[EvalResult]:
        length = len(trace.final_output or "")
        return [self.scored(trace, 1.0 if length <= 60 else 0.0, f"{length} characters")]


def both() -> list[Evaluator]:
    """A factory (``oae_example_plugin:both``): several evaluators from one spec."""
    return [AnswersInFrench(), AnswerLength()]
