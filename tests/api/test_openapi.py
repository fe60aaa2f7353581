"""The OpenAPI document as generated clients read it, fetched from the running service."""

from __future__ import annotations

from app.testing import LiveService


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
