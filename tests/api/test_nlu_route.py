"""POST /v1/nlu/parse on a small app of its own: the router, auth and the error handlers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import date
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.auth import Authenticator
from app.api.errors import install_error_handlers
from app.api.routes import nlu as nlu_routes
from app.api.tokens import TokenSigner
from app.nlu.pipeline import NLUPipeline
from app.nlu.testing import ScriptedParser
from app.nlu.types import Parser
from app.settings import PROJECT_ROOT


@dataclass
class Runtime:
    nlu: Parser | None


def make_app(parser: Parser | None, auth: Authenticator | None = None) -> FastAPI:
    app = FastAPI()
    app.state.runtime = Runtime(nlu=parser)
    app.state.auth = auth or Authenticator("off", [])
    app.state.signer = TokenSigner()
    install_error_handlers(app)
    app.include_router(nlu_routes.router)
    return app


@pytest.fixture(scope="module")
def pipeline() -> Any:
    loaded = NLUPipeline.load(PROJECT_ROOT / "models" / "nlu", today=lambda: date(2024, 5, 22))
    yield loaded
    loaded.close()


async def client_for(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


@pytest.fixture
async def client(pipeline: NLUPipeline) -> AsyncIterator[httpx.AsyncClient]:
    async for c in client_for(make_app(pipeline)):
        yield c


async def test_parse_returns_intent_ranking_and_slots(client: httpx.AsyncClient) -> None:
    text = "I want a refund of 120 yuan for order 202405201235"
    response = await client.post("/v1/nlu/parse", json={"text": text})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["intent"] == "refund_request"
    assert 0.5 < body["confidence"] <= 1
    assert body["ranking"][0]["intent"] == "refund_request"
    assert len(body["ranking"]) == 3
    assert body["slots"] == [
        {"name": "amount", "value": "120.00", "start": 19, "end": 27},
        {"name": "order_id", "value": "202405201235", "start": 38, "end": 50},
    ]
    assert body["language"] == "en"


async def test_chinese_relative_dates_resolve(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/nlu/parse", json={"text": "我的包裹明天能到吗"})
    body = response.json()
    assert body["intent"] == "track_shipment"
    assert body["slots"] == [{"name": "date", "value": "2024-05-23", "start": 4, "end": 6}]
    assert body["language"] == "zh"


@pytest.mark.parametrize("payload", [{"text": ""}, {"text": "x" * 2001}, {}, {"text": 5}])
async def test_invalid_requests_get_the_one_error_shape(
    client: httpx.AsyncClient, payload: dict[str, Any]
) -> None:
    response = await client.post("/v1/nlu/parse", json=payload)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"


async def test_the_longest_allowed_text_is_accepted(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/nlu/parse", json={"text": "订" * 2000})
    assert response.status_code == 200


async def test_the_parser_comes_from_the_runtime() -> None:
    parser = ScriptedParser().on("hello there", "greeting", 0.99)
    async for client in client_for(make_app(parser)):
        response = await client.post("/v1/nlu/parse", json={"text": "hello there"})
        assert response.json()["intent"] == "greeting"
    assert parser.calls == ["hello there"]


async def test_without_loaded_models_the_route_says_so() -> None:
    async for client in client_for(make_app(None)):
        response = await client.post("/v1/nlu/parse", json={"text": "hi"})
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "nlu_unavailable"


async def test_authentication_is_required_when_on() -> None:
    auth = Authenticator("api_key", ["default:agent:sk-nlu"])
    async for client in client_for(make_app(ScriptedParser(), auth)):
        response = await client.post("/v1/nlu/parse", json={"text": "hi"})
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"
        response = await client.post(
            "/v1/nlu/parse", json={"text": "hi"}, headers={"X-API-Key": "sk-nlu"}
        )
        assert response.status_code == 200
