"""`ScriptedParser`: a `Parser` whose answers a test or demo sets in advance.

parser = ScriptedParser()
parser.on("我的订单到哪了", "order_status", 0.93)
parser.enqueue("refund_request", slots={"order_id": "202405201235", "amount": "120.00"})
parser.parse("我的订单到哪了").intent   # "order_status"
parser.parse("anything").intent        # "refund_request" (the queue, in order)
parser.parse("anything else").intent   # the default: out_of_scope at confidence 0.0
parser.calls                           # every text parsed, in order
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

from app.nlu.types import INTENTS, IntentScore, ParseResult, Slot
from app.text.language import detect_language

SlotsArg = Mapping[str, str] | Sequence[Slot]
_Answer = tuple[str, float, SlotsArg, str | None, str | None]  # ..., language, runner-up


class ScriptedParser:
    def __init__(self, default_intent: str = "out_of_scope", default_confidence: float = 0.0):
        self._by_text: dict[str, _Answer] = {}
        self._queue: deque[_Answer] = deque()
        self._default: _Answer = (_known(default_intent), default_confidence, {}, None, None)
        self.calls: list[str] = []

    def on(
        self,
        text: str,
        intent: str,
        confidence: float = 0.95,
        slots: SlotsArg = (),
        language: str | None = None,
        runner_up: str | None = None,
    ) -> ScriptedParser:
        """Answer `text` (exactly) with this intent every time it is parsed; `runner_up` is the
        second intent of the ranking (by default the first other label)."""
        self._by_text[text] = (_known(intent), confidence, slots, language, runner_up)
        return self

    def enqueue(
        self,
        intent: str,
        confidence: float = 0.95,
        slots: SlotsArg = (),
        language: str | None = None,
    ) -> ScriptedParser:
        """Answer the next parse of any text not scripted with `on`."""
        self._queue.append((_known(intent), confidence, slots, language, None))
        return self

    def parse(self, text: str) -> ParseResult:
        self.calls.append(text)
        if text in self._by_text:
            intent, confidence, slots, language, runner_up = self._by_text[text]
        elif self._queue:
            intent, confidence, slots, language, runner_up = self._queue.popleft()
        else:
            intent, confidence, slots, language, runner_up = self._default
        others = [name for name in INTENTS if name not in (intent, runner_up)][:2]
        if runner_up is not None:
            others = [_known(runner_up), others[0]]
        rest = max(0.0, 1.0 - confidence) / 2
        return ParseResult(
            text=text,
            intent=intent,
            confidence=confidence,
            ranking=[IntentScore(intent, confidence), *(IntentScore(o, rest) for o in others)],
            slots=_slots(text, slots),
            language=language or detect_language(text),
        )


def _known(intent: str) -> str:
    if intent not in INTENTS:
        raise ValueError(f"unknown intent {intent!r}")
    return intent


def _slots(text: str, slots: SlotsArg) -> list[Slot]:
    """Slots as given; from a mapping, each placed where its value occurs in the text
    (0..0 when it does not)."""
    if not isinstance(slots, Mapping):
        return list(slots)
    out = []
    for name, value in slots.items():
        start = text.find(value)
        end = start + len(value) if start >= 0 else 0
        start = max(start, 0)
        out.append(Slot(name=name, value=value, start=start, end=end, text=text[start:end]))
    return out
