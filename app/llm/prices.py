"""What a model's tokens cost: configured prices first, else LiteLLM's bundled price map.

The map is the JSON file LiteLLM ships (what it loads itself with
`LITELLM_LOCAL_MODEL_COST_MAP=True`); it is read from the installed package without importing
LiteLLM (that import costs seconds), once, off the event loop, and only when a model's price is
asked for. Each model's price is looked up once and kept.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_MAP_FILE = "model_prices_and_context_window_backup.json"
PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """Per token, in the map's unit (USD)."""

    input: float = 0.0
    output: float = 0.0

    def of(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens * self.input + completion_tokens * self.output


FREE = Price()


@functools.cache
def _bundled_map() -> dict[str, Any]:
    """Read once per process (about 5 MB, 45 ms), however many runtimes price models: the file
    does not change while the process runs. Callers only read it."""
    spec = importlib.util.find_spec("litellm")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / _MAP_FILE
        if path.is_file():
            loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return loaded
    # A LiteLLM without the file: its own loader, told to stay offline.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return dict(litellm.model_cost)


def _candidates(model: str) -> list[str]:
    """`openai/gpt-4o-mini` is in the map as `gpt-4o-mini`; `deepseek/deepseek-chat` as is."""
    names = [model]
    if "/" in model:
        names.append(model.split("/", 1)[1])
    return names


class Prices:
    def __init__(self, configured: dict[str, tuple[float, float]] | None = None) -> None:
        self._known: dict[str, Price] = {
            name: Price(inp / PER_MILLION, out / PER_MILLION)
            for name, (inp, out) in (configured or {}).items()
        }
        self._map: dict[str, Any] | None = None
        self._lock = asyncio.Lock()

    def cached(self, model: str) -> Price | None:
        if model.startswith("hermes/"):
            return FREE
        return self._known.get(model)

    async def of(self, model: str) -> Price:
        """The model's price; the first ask for a model without a configured price reads the
        map (in a thread). A model the map lacks costs nothing, with one warning."""
        price = self.cached(model)
        if price is not None:
            return price
        async with self._lock:
            price = self._known.get(model)
            if price is None:
                if self._map is None:
                    self._map = await asyncio.to_thread(_bundled_map)
                price = self._known[model] = _lookup(self._map, model)
        return price

    async def warm(self, models: list[str]) -> None:
        """Look the models up now (at start-up), not on a turn's first model call."""
        for model in models:
            await self.of(model)


def _lookup(cost_map: dict[str, Any], model: str) -> Price:
    for name in _candidates(model):
        entry = cost_map.get(name)
        if isinstance(entry, dict) and "input_cost_per_token" in entry:
            return Price(
                float(entry.get("input_cost_per_token") or 0),
                float(entry.get("output_cost_per_token") or 0),
            )
    log.warning(
        "no price known for model %s: its tokens count as free against cost budgets "
        "(set HERMES_MODEL_PRICES)",
        model,
    )
    return FREE
