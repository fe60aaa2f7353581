"""`NLUPipeline`: load a model directory once, then `parse(text) -> ParseResult`.

    nlu = NLUPipeline.load(settings.nlu.model_dir)     # in the lifespan
    result = nlu.parse("I want a refund of 120 yuan for order 202405201235")
    nlu.close()

`load` checks the manifest first (see app/nlu/manifest.py) and fails with `NLUModelError`
and a message that says how to fix it. `today` is injectable so relative dates resolve
against a fixed day in tests and evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

from app.nlu.features import document
from app.nlu.intent import IntentClassifier
from app.nlu.manifest import INTENT_MODEL, SLOT_MODEL, Manifest
from app.nlu.slots import SlotTagger
from app.nlu.types import IntentScore, ParseResult, Slot
from app.settings import PROJECT_ROOT
from app.text.fold import tokenize
from app.text.language import detect_language

DEFAULT_DATA_DIR = PROJECT_ROOT / "data" / "nlu"
MAX_TEXT = 2000  # longer input is cut: an utterance, not a document


class NLUPipeline:
    def __init__(
        self,
        intents: IntentClassifier,
        tagger: SlotTagger,
        manifest: Manifest,
        today: Callable[[], date] = date.today,
    ) -> None:
        self.intents = intents
        self.tagger = tagger
        self.manifest = manifest
        self._today = today

    @classmethod
    def load(
        cls,
        model_dir: Path,
        *,
        data_dir: Path | None = DEFAULT_DATA_DIR,
        today: Callable[[], date] = date.today,
    ) -> NLUPipeline:
        """`data_dir=None` skips the training-data check (artefact hashes are still checked)."""
        manifest = Manifest.read(model_dir)
        manifest.verify(model_dir, data_dir)
        intents = IntentClassifier(model_dir / INTENT_MODEL)
        tagger = SlotTagger(model_dir / SLOT_MODEL)
        return cls(intents, tagger, manifest, today)

    def classify(self, text: str) -> list[IntentScore]:
        """Intent ranking only (top 3)."""
        return self.intents.rank(document(tokenize(text[:MAX_TEXT])))

    def extract(self, text: str) -> list[Slot]:
        """Slots only."""
        text = text[:MAX_TEXT]
        return self.tagger.extract(text, tokenize(text), self._today())

    def parse(self, text: str) -> ParseResult:
        text = text[:MAX_TEXT]
        tokens = tokenize(text)
        ranking = self.intents.rank(document(tokens))
        slots = self.tagger.extract(text, tokens, self._today())
        return ParseResult(
            text=text,
            intent=ranking[0].intent,
            confidence=ranking[0].confidence,
            ranking=ranking,
            slots=slots,
            language=detect_language(text),
        )

    def close(self) -> None:
        self.tagger.close()
        self.intents.close()
