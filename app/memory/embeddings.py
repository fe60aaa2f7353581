"""Optional semantic scoring: an embedding model behind a small Protocol, vectors as blobs.

The memory service works fully without it (lexical, key/entity, recency and confidence
scores). When `Settings.embedding_model` is set, each memory's text is embedded once when
it is written, stored as float32 bytes, and compared with the query's vector by cosine.
A failing embedding call never fails a write or a recall; it only drops the semantic part.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Protocol

import numpy as np

log = logging.getLogger(__name__)


class Embedder(Protocol):
    model: str

    async def embed(self, texts: list[str]) -> list[list[float]]: ...


def pack(vector: list[float] | np.ndarray) -> bytes:
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return (array / norm if norm > 0 else array).astype(np.float32).tobytes()


def unpack(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32)


def cosine(query: np.ndarray, stored: list[bytes]) -> np.ndarray:
    """Cosine of one query vector against packed (unit-length) vectors; 0 where sizes differ."""
    out = np.zeros(len(stored), dtype=np.float32)
    norm = float(np.linalg.norm(query))
    if norm == 0 or not stored:
        return out
    unit = (query / norm).astype(np.float32)
    same = [i for i, blob in enumerate(stored) if len(blob) == unit.nbytes]
    if same:
        matrix = np.vstack([unpack(stored[i]) for i in same])
        out[same] = matrix @ unit
    return out


async def embed_one(embedder: Embedder | None, text: str) -> bytes | None:
    if embedder is None:
        return None
    try:
        vectors = await embedder.embed([text])
    except Exception:
        log.warning("embedding failed; continuing without a vector", exc_info=True)
        return None
    return pack(vectors[0]) if vectors else None


class LiteLLMEmbedder:
    """Embeddings through LiteLLM (`litellm.aembedding`), e.g. `openai/text-embedding-3-small`."""

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.model = model
        self._api_base = api_base
        self._api_key = api_key
        self._timeout_s = timeout_s
        # Imported here, when an embedding model is configured (at start-up), not at module
        # import: it takes seconds, and a first use mid-turn would stall the event loop. Set up
        # as app.llm.litellm_gateway does: no price-map download, provider errors not logged
        # verbatim (they can name hosts and keys).
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_LOG", "ERROR")
        import litellm

        litellm.telemetry = False
        litellm.suppress_debug_info = True
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        self._litellm = litellm

    async def embed(self, texts: list[str]) -> list[list[float]]:
        response = await self._litellm.aembedding(
            model=self.model,
            input=texts,
            api_base=self._api_base,
            api_key=self._api_key,
            timeout=self._timeout_s,
        )
        return [_vector(item) for item in response.data]


def _vector(item: Any) -> list[float]:
    values = item["embedding"] if isinstance(item, dict) else item.embedding
    return [float(v) for v in values]
