"""Where a memory's value came from: the customer's free text, a structured value, or an
operator. Free text from a conversation is untrusted: recalled into a turn, it is quoted data
that may carry someone's instructions, and the turn's taint rule treats it as such.

A value is structured only when its shape leaves no room for words: one of the lexicon's
canonical values for a preference key, an e-mail address or a phone number for a contact
key. Everything else a conversation (the customer, the model or a tool) put into memory is
`customer_text`. The same rules classify rows written before the origin was stored.
"""

from __future__ import annotations

import re
from typing import Literal

from app.memory.lexicon import CATEGORY_KEYS, ENTITIES

Origin = Literal["customer_text", "structured", "operator"]
ORIGINS: tuple[Origin, ...] = ("customer_text", "structured", "operator")

_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
_PHONE = re.compile(r"\+?\d{6,15}")
_VOCABULARY: dict[str, frozenset[str]] = {
    key: frozenset(ENTITIES[category]) for category, key in CATEGORY_KEYS.items()
}
_SHAPES: dict[str, re.Pattern[str]] = {"contact.email": _EMAIL, "contact.phone": _PHONE}


def is_structured(key: str, value: str) -> bool:
    """A closed-vocabulary preference, or a contact value of the key's exact shape."""
    vocabulary = _VOCABULARY.get(key)
    if vocabulary is not None:
        return value in vocabulary
    shape = _SHAPES.get(key)
    return shape is not None and shape.fullmatch(value) is not None


def classify(tier: str, key: str, value: str, source: str) -> Origin:
    if source == "operator":
        return "operator"
    if tier == "fact" and is_structured(key, value):
        return "structured"
    return "customer_text"
