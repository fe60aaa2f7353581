"""The OpenAPI document as clients and fuzzers should read it, derived from the generated one.

FastAPI describes what a route declares; a few things every route shares it cannot see:

- how a caller authenticates: the key headers the principal dependency reads become two security
  schemes (`Authorization: Bearer <key>` and `X-API-Key`) instead of optional parameters on each
  operation;
- the errors every operation can answer, all in the one error shape: 400 (a body that is not
  JSON), 401 and 403 where a key is needed, 404 where the path names something, and 422
  (FastAPI's own 422 schema describes a body Hermes never sends);
- that a query or header parameter is never `null` on the wire: it is there or it is not.

Done once, on the whole document, so a router added later gets the same without a line of its
own (tests/api/test_openapi.py checks every operation).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.api.schemas import ErrorResponse

BEARER = "bearerKey"
API_KEY = "apiKeyHeader"
# The headers the principal dependency reads (app/api/deps.py), as FastAPI names them.
_KEY_HEADERS = frozenset({"authorization", "x-api-key"})
_ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}
_METHODS = frozenset({"get", "put", "post", "delete", "patch", "options", "head", "trace"})

SECURITY_SCHEMES: dict[str, dict[str, Any]] = {
    BEARER: {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key as a bearer token: `Authorization: Bearer <key>`",
    },
    API_KEY: {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": "The same key in its own header",
    },
}

_ERRORS: dict[str, str] = {
    "400": "The body is not JSON",
    "401": "No key, or a key Hermes does not know",
    "403": "The key's role may not do this",
    "422": "A parameter or the body is invalid (`details.errors` names each field)",
    "404": "Nothing by that id here (another tenant's ids answer the same)",
}


def install_openapi(app: FastAPI, *, auth_required: bool) -> None:
    """Serve `hermes_openapi` of the generated document at /openapi.json (built once)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            generated = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            app.openapi_schema = hermes_openapi(generated, auth_required=auth_required)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def hermes_openapi(doc: dict[str, Any], *, auth_required: bool) -> dict[str, Any]:
    """`doc` with security schemes, the shared error responses and non-null parameters."""
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    schemas.setdefault("ErrorResponse", ErrorResponse.model_json_schema(ref_template=_REF))
    for name, schema in ErrorResponse.model_json_schema(ref_template=_REF).get("$defs", {}).items():
        schemas.setdefault(name, schema)
    components.setdefault("securitySchemes", {}).update(SECURITY_SCHEMES)
    # With authentication off a request without a key is served too: `{}` says so.
    requirement: list[dict[str, list[str]]] = [
        {BEARER: []},
        {API_KEY: []},
        *([] if auth_required else [{}]),
    ]
    for operations in doc.get("paths", {}).values():
        for method, operation in operations.items():
            if method in _METHODS:
                _operation(operation, requirement)
    # Nothing refers to FastAPI's own validation schemas any more.
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    return doc


_REF = "#/components/schemas/{model}"


def _operation(operation: dict[str, Any], requirement: list[dict[str, Any]]) -> None:
    params = operation.get("parameters", [])
    keyed = any(p["in"] == "header" and p["name"].lower() in _KEY_HEADERS for p in params)
    kept = [p for p in params if not (p["in"] == "header" and p["name"].lower() in _KEY_HEADERS)]
    for param in kept:
        param["schema"] = _not_null(param.get("schema", {}))
    if kept:
        operation["parameters"] = kept
    else:
        operation.pop("parameters", None)
    responses = operation.setdefault("responses", {})
    codes = ["400", "422"] + (["401", "403"] if keyed else [])
    if any(p["in"] == "path" for p in kept):
        codes.append("404")
    if keyed:
        operation["security"] = requirement
    for code in codes:
        entry = responses.setdefault(code, {"description": _ERRORS[code]})
        entry["content"] = {"application/json": {"schema": _ERROR_REF}}


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """`anyOf: [X, {type: null}]` as X: a parameter absent is how a client says none."""
    options = schema.get("anyOf")
    if not isinstance(options, list):
        return schema
    rest = [o for o in options if o != {"type": "null"}]
    if len(rest) == len(options):
        return schema
    extra = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**rest[0], **extra} if len(rest) == 1 else {**extra, "anyOf": rest}
