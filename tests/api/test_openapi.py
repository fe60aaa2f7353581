"""The OpenAPI document as generated clients and fuzzers read it, fetched from the running service:
how to authenticate, the errors every operation answers, parameters as they travel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.api.openapi import API_KEY, BEARER
from app.testing import LiveService, serve

KEY = "acme-admin-key-0123456789"
AS_ADMIN = {"X-API-Key": KEY}  # with authentication on the document too needs a key
ERROR = {"$ref": "#/components/schemas/ErrorResponse"}
METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture
async def keyed(make_settings: Any) -> AsyncIterator[LiveService]:
    async with serve(make_settings(auth="api_key", api_keys=[f"acme:admin:{KEY}"])) as svc:
        yield svc


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, op)
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if method in METHODS
    ]


async def test_every_schema_has_a_plain_unique_name(service: LiveService) -> None:
    # Two wire models with one class name make FastAPI fall back to module-path names
    # (`app__api__routes__...`), which generated frontend clients turn into unusable types.
    response = await service.client.get("/openapi.json")
    assert response.status_code == 200
    names = list(response.json()["components"]["schemas"])
    # module paths are lower case: `ApprovalDecisionIn` is fine, `app__api__...` is not
    leaked = [n for n in names if "__" in n or n.startswith("app")]
    assert not leaked, leaked
    assert {"ToolApprovalOut", "McpToolApprovalOut", "SessionOut"} <= set(names)


async def test_keys_are_security_schemes_not_parameters(keyed: LiveService) -> None:
    doc = (await keyed.client.get("/openapi.json", headers=AS_ADMIN)).json()
    schemes = doc["components"]["securitySchemes"]
    assert schemes[BEARER] == {**schemes[BEARER], "type": "http", "scheme": "bearer"}
    assert schemes[API_KEY] == {**schemes[API_KEY], "type": "apiKey", "in": "header"}
    assert schemes[API_KEY]["name"] == "X-API-Key"
    secured = 0
    for method, path, op in operations(doc):
        names = {p["name"].lower() for p in op.get("parameters", [])}
        assert not names & {"authorization", "x-api-key"}, (method, path)
        if path in ("/healthz", "/v1/desk/login"):
            # public: a load balancer's probe; the desk's sign-in, whose key is in the body
            assert "security" not in op
            continue
        # With authentication on a key is required: no empty requirement.
        assert op["security"] == [{BEARER: []}, {API_KEY: []}], (method, path)
        secured += 1
    assert secured >= 20
    # And the server holds to it: no key is a 401, either scheme is let in.
    assert (await keyed.client.get("/v1/sessions")).status_code == 401
    for headers in ({"Authorization": f"Bearer {KEY}"}, {"X-API-Key": KEY}):
        assert (await keyed.client.get("/v1/sessions", headers=headers)).status_code == 200


async def test_without_authentication_a_key_is_optional(service: LiveService) -> None:
    doc = (await service.client.get("/openapi.json")).json()
    op = doc["paths"]["/v1/sessions"]["get"]
    assert op["security"] == [{BEARER: []}, {API_KEY: []}, {}]


async def test_every_operation_documents_its_errors_in_the_one_shape(keyed: LiveService) -> None:
    doc = (await keyed.client.get("/openapi.json", headers=AS_ADMIN)).json()
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    for method, path, op in operations(doc):
        expected = {"400", "422"}
        if "security" in op:
            expected |= {"401", "403"}
        if "{" in path:
            expected.add("404")
        for code in expected:
            content = op["responses"][code]["content"]["application/json"]
            assert content["schema"] == ERROR, (method, path, code)
        for code, response in op["responses"].items():
            if code >= "400":
                schema = response["content"]["application/json"]["schema"]
                assert schema == ERROR, (method, path, code)


async def test_parameters_are_never_null_on_the_wire(keyed: LiveService) -> None:
    # An optional header or query parameter is absent or a string: a fuzzer sending the text
    # "null" for a nullable one got a 422 for a request the schema allowed.
    doc = (await keyed.client.get("/openapi.json", headers=AS_ADMIN)).json()
    for method, path, op in operations(doc):
        for param in op.get("parameters", []):
            assert "null" not in str(param["schema"]), (method, path, param["name"])


async def test_a_body_that_is_not_json_is_a_400(keyed: LiveService) -> None:
    json_type = {"Content-Type": "application/json", "X-API-Key": KEY}
    response = await keyed.client.post("/v1/sessions", content=b'{"user_id": ', headers=json_type)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"
    # valid JSON with a wrong value stays a 422
    wrong = await keyed.client.post("/v1/sessions", json={"user_id": ""}, headers=json_type)
    assert wrong.status_code == 422


async def test_405_allows_every_method_of_the_path(keyed: LiveService) -> None:
    # Starlette named only the first route's methods: OPTIONS /v1/sessions said `Allow: POST`.
    doc = (await keyed.client.get("/openapi.json", headers=AS_ADMIN)).json()
    for path, ops in doc["paths"].items():
        url = path.replace("{", "x").replace("}", "")
        documented = {m.upper() for m in ops if m in METHODS}
        response = await keyed.client.request("PUT", url)
        assert response.status_code == 405, (path, response.text)
        assert response.json()["error"]["code"] == "method_not_allowed"
        assert set(response.headers["Allow"].split(", ")) - {"HEAD"} == documented, path
    options = await keyed.client.options("/v1/sessions")
    assert options.status_code == 405
    assert options.headers["Allow"] == "GET, POST"
