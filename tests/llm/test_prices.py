"""Model prices: configured first, hermes/local free, else LiteLLM's bundled price map, read
without importing LiteLLM; an unknown model is free (with a warning)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from app.llm.prices import FREE, Price, Prices


async def test_a_configured_price_is_per_million_tokens() -> None:
    prices = Prices({"openai/house-model": (1000.0, 2000.0)})
    price = await prices.of("openai/house-model")
    assert price == Price(0.001, 0.002)
    assert price.of(100, 50) == pytest.approx(0.2)


async def test_the_local_model_is_free_and_needs_no_map() -> None:
    prices = Prices()
    assert prices.cached("hermes/local") == FREE
    assert await prices.of("hermes/local") == FREE


async def test_known_models_are_priced_from_the_bundled_map() -> None:
    prices = Prices()
    price = await prices.of("openai/gpt-4o-mini")  # in the map as `gpt-4o-mini`
    assert price.input > 0 and price.output > price.input
    assert prices.cached("openai/gpt-4o-mini") == price  # looked up once
    assert await prices.of("deepseek/deepseek-chat") != FREE


async def test_an_unknown_model_is_free_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    assert await Prices().of("openai/no-such-model-xyz") == FREE
    assert "HERMES_MODEL_PRICES" in caplog.text


def test_pricing_does_not_import_litellm() -> None:
    code = textwrap.dedent(
        """
        import asyncio, sys
        from app.llm.prices import Prices
        price = asyncio.run(Prices().of("openai/gpt-4o-mini"))
        assert price.input > 0, price
        assert "litellm" not in sys.modules
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
