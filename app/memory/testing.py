"""Test doubles for the memory seams: embedders, and turn-loop memories that do nothing or
record what they were asked."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence

from app.memory.extract import Proposal, ToolEvidence
from app.memory.lexicon import normalize
from app.memory.port import AfterTurn, BeforeTurn
from app.memory.records import Scope
from app.storage.session_writer import SessionWriter


class FixedClock:
    """A clock that moves only when told: decay and recency become exact in tests."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, *, seconds: float = 0.0, hours: float = 0.0, days: float = 0.0) -> float:
        self.now += seconds + hours * 3600 + days * 86400
        return self.now


class FakeEmbedder:
    """Deterministic vectors: `table` entries verbatim, otherwise hashed character bigrams.

    Texts that share bigrams get similar vectors, and a test can give two texts with no
    words in common the same vector to exercise the semantic path."""

    def __init__(self, table: Mapping[str, Sequence[float]] | None = None, dim: int = 64) -> None:
        self.model = "fake/embedding"
        self.dim = dim
        self.table = dict(table or {})
        self.calls: list[list[str]] = []
        self.fail = False

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.fail:
            raise RuntimeError("embedding service unavailable")
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        for probe, vector in self.table.items():
            if probe in text:
                return [float(v) for v in vector]
        out = [0.0] * self.dim
        lowered = normalize(text)
        for i in range(len(lowered) - 1):
            digest = hashlib.blake2b(lowered[i : i + 2].encode(), digest_size=4).digest()
            out[int.from_bytes(digest, "big") % self.dim] += 1.0
        norm = math.sqrt(sum(v * v for v in out)) or 1.0
        return [v / norm for v in out]


class NullMemory:
    """A turn memory that never recalls or stores anything."""

    async def before_turn(
        self, scope: Scope, writer: SessionWriter, text: str, intent: str | None = None
    ) -> BeforeTurn:
        return BeforeTurn()

    async def after_turn(
        self,
        scope: Scope,
        writer: SessionWriter,
        user_text: str,
        final_text: str = "",
        tool_results: Sequence[ToolEvidence] = (),
        previous_assistant: str = "",
        proposals: Sequence[Proposal] = (),
    ) -> AfterTurn:
        return AfterTurn()
