"""The slot tagger: a CRFsuite model over tokens, then rule-based normalisation per slot."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import pycrfsuite

from app.errors import NLUModelError
from app.nlu.normalise import TRACKING_NUMBER, normalise
from app.nlu.slot_features import decode, sentence_features
from app.nlu.types import Slot
from app.text.fold import Token, fold


class SlotTagger:
    def __init__(self, path: Path) -> None:
        self._tagger = pycrfsuite.Tagger()
        try:
            self._tagger.open(str(path))
        except (OSError, ValueError) as exc:
            raise NLUModelError(str(path), f"cannot load the slot model: {exc}") from exc
        # A crfsuite Tagger keeps the sequence it is tagging inside itself: one caller at a time.
        self._lock = threading.Lock()

    def labels(self, text: str, tokens: Sequence[Token]) -> list[str]:
        if not tokens:
            return []
        features = sentence_features(fold(text), tokens)
        with self._lock:
            tags: list[str] = self._tagger.tag(features)
        return tags

    def extract(self, text: str, tokens: Sequence[Token], today: date) -> list[Slot]:
        """Slots with normalised values; spans whose text is not a valid value are dropped."""
        spans = decode(tokens, self.labels(text, tokens))
        slots = []
        for name, start, end in spans + _unmistakable(tokens, spans):
            surface = text[start:end]
            value = normalise(name, surface, today)
            if value is not None:
                slots.append(Slot(name=name, value=value, start=start, end=end, text=surface))
        return sorted(slots, key=lambda s: s.start)

    def close(self) -> None:
        with self._lock:
            self._tagger.close()


def _unmistakable(
    tokens: Sequence[Token], spans: list[tuple[str, int, int]]
) -> list[tuple[str, int, int]]:
    """Emails and carrier tracking numbers the tagger left out: their form alone says what
    they are, in any context (a bare "SF123456789CN" answering "which parcel?")."""
    extra = []
    for token in tokens:
        if any(start < token.end and token.start < end for _, start, end in spans):
            continue
        if token.kind == "email":
            extra.append(("email", token.start, token.end))
        elif token.kind == "word" and TRACKING_NUMBER.fullmatch(token.text.upper()):
            extra.append(("tracking_number", token.start, token.end))
    return extra
