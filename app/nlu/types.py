"""The NLU contract: label sets and what `parse` returns. Everything else in app/nlu serves it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

INTENTS: tuple[str, ...] = (
    "order_status",
    "track_shipment",
    "refund_request",
    "return_request",
    "password_reset",
    "complaint",
    "human_handoff",
    "update_contact",
    "greeting",
    "goodbye",
    "out_of_scope",
    "email_request",  # "email me the receipt at ...": send something, not a contact change
    # "how long does a refund take?", "退货运费谁出": a question about a rule, answered, never
    # acted on (issue 27); "I want a refund for order ..." is refund_request.
    "policy_question",
)

SLOTS: tuple[str, ...] = (
    "order_id",  # 12 digits
    "tracking_number",  # carrier style, e.g. SF123456789CN
    "phone",
    "email",
    "date",  # normalised to ISO YYYY-MM-DD
    "amount",  # normalised to a decimal string, e.g. "120.50"
    "product",
)


@dataclass(frozen=True)
class Slot:
    name: str
    value: str  # normalised value (ISO date, digits-only phone, decimal amount, ...)
    start: int  # character offsets into the original text
    end: int
    text: str = ""  # the surface text as written

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class IntentScore:
    intent: str
    confidence: float


@dataclass(frozen=True)
class ParseResult:
    text: str
    intent: str
    confidence: float
    ranking: list[IntentScore] = field(default_factory=list)  # top 3, best first
    slots: list[Slot] = field(default_factory=list)
    language: str = "en"  # "zh" or "en"

    def slot(self, name: str) -> str | None:
        return next((s.value for s in self.slots if s.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "intent": self.intent,
            "confidence": round(self.confidence, 4),
            "ranking": [
                {"intent": r.intent, "confidence": round(r.confidence, 4)} for r in self.ranking
            ],
            "slots": [s.to_dict() for s in self.slots],
            "language": self.language,
        }


class Parser(Protocol):
    def parse(self, text: str) -> ParseResult: ...
