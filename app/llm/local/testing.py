"""A scripted `Parser` for tests and demos of the offline model without trained NLU models.

    parser = ScriptedParser()
    parser.add("我的订单202405201234到哪了", "order_status", order_id="202405201234")
    parser.parse("我的订单202405201234到哪了").slot("order_id")  # "202405201234"

Texts that were not scripted parse as `out_of_scope` with low confidence, like an utterance a
real classifier has never seen; slot values are located in the text to give real offsets.
"""

from __future__ import annotations

from app.nlu.types import INTENTS, SLOTS, IntentScore, ParseResult, Slot
from app.text.language import latest_language


def utterance(
    text: str, intent: str, confidence: float = 0.95, runner_up: str | None = None, **slots: str
) -> ParseResult:
    """A parse of `text`: each slot value must appear in the text (its offsets are found);
    `runner_up` is the second intent of the ranking (by default the first other label)."""
    if intent not in INTENTS:
        raise ValueError(f"unknown intent {intent!r}")
    found = []
    for name, value in slots.items():
        if name not in SLOTS:
            raise ValueError(f"unknown slot {name!r}")
        start = text.find(value)
        if start < 0:
            raise ValueError(f"slot value {value!r} is not in {text!r}")
        found.append(Slot(name, value, start, start + len(value), value))
    runner_up = runner_up or next(i for i in INTENTS if i != intent)
    ranking = [IntentScore(intent, confidence), IntentScore(runner_up, 1.0 - confidence)]
    return ParseResult(
        text=text,
        intent=intent,
        confidence=confidence,
        ranking=ranking,
        slots=sorted(found, key=lambda s: s.start),
        language=latest_language([text]),
    )


class ScriptedParser:
    """`Parser` that answers scripted parses by exact text and records what it was asked."""

    def __init__(self, unknown_confidence: float = 0.2) -> None:
        self._script: dict[str, ParseResult] = {}
        self.unknown_confidence = unknown_confidence
        self.calls: list[str] = []

    def add(
        self,
        text: str,
        intent: str,
        confidence: float = 0.95,
        runner_up: str | None = None,
        **slots: str,
    ) -> None:
        self._script[text.strip()] = utterance(text.strip(), intent, confidence, runner_up, **slots)

    def parse(self, text: str) -> ParseResult:
        self.calls.append(text)
        scripted = self._script.get(text.strip())
        if scripted is not None:
            return scripted
        return utterance(text, "out_of_scope", self.unknown_confidence)
