"""tools.yaml declares every contract tool, loads against the meta-schema, and resolves."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from jsonschema.validators import Draft202012Validator

from app.nlu.types import INTENTS
from app.settings import PROJECT_ROOT
from app.tools.loader import load_tools, resolve_python
from app.tools.spec import PythonHandler, ToolSpec

# name -> (risk, required arguments, output fields), from tool_contract.md
CONTRACT: dict[str, tuple[str, set[str], set[str]]] = {
    "query_order_status": (
        "read",
        {"order_id"},
        {
            "order_id",
            "status",
            "status_text",
            "items",
            "total_amount",
            "currency",
            "created_at",
            "updated_at",
            "tracking_number",
            "carrier",
        },
    ),
    "track_shipment": (
        "read",
        {"tracking_number"},
        {"tracking_number", "carrier", "status", "estimated_delivery", "events"},
    ),
    "create_ticket": (
        "write",
        {"category", "summary"},
        {"ticket_id", "status", "category", "priority", "created_at"},
    ),
    "request_refund": (
        "write",
        {"order_id"},
        {"refund_id", "order_id", "amount", "currency", "status"},
    ),
    "request_return": ("write", {"order_id"}, {"return_id", "order_id", "status", "label_url"}),
    "reset_password": ("write", {"phone"}, {"status", "channel", "masked_phone"}),
    "update_contact_info": ("write", {"field", "value"}, {"field", "status", "masked_value"}),
    "send_email": ("external", {"to", "subject", "body"}, {"message_id", "status"}),
}


@pytest.fixture(scope="module")
def specs() -> dict[str, ToolSpec]:
    return {s.name: s for s in load_tools(PROJECT_ROOT / "tools.yaml", resolve=resolve_python)}


def test_every_contract_tool_is_declared_as_agreed(specs: dict[str, ToolSpec]) -> None:
    assert "get_current_time" in specs
    for name, (risk, required, output) in CONTRACT.items():
        spec = specs[name]
        assert spec.risk == risk, name
        assert set(spec.parameters.get("required", [])) == required, name
        assert spec.parameters["additionalProperties"] is False
        assert spec.output_schema is not None
        assert set(spec.output_schema["required"]) == output, name
        assert set(spec.output_schema["properties"]) == output, name
        assert set(spec.intents) <= set(INTENTS), name


def test_every_handler_resolves_to_a_coroutine(specs: dict[str, ToolSpec]) -> None:
    for name in CONTRACT:
        handler = specs[name].handler
        assert isinstance(handler, PythonHandler)
        fn = resolve_python(handler.target)
        assert inspect.iscoroutinefunction(fn), name
        params = inspect.signature(fn).parameters
        arguments = set(specs[name].parameters["properties"])
        assert set(list(params)[1:]) == arguments, name  # ctx, then exactly the arguments


def _examples(schema: dict[str, Any]) -> list[tuple[str, Any, dict[str, Any]]]:
    return [
        (field, example, sub)
        for field, sub in schema["properties"].items()
        for example in sub.get("examples", [])
    ]


def test_argument_examples_satisfy_their_own_schemas(specs: dict[str, ToolSpec]) -> None:
    checked = 0
    for name in CONTRACT:
        for field, example, sub in _examples(specs[name].parameters):
            validator = Draft202012Validator(
                sub, format_checker=Draft202012Validator.FORMAT_CHECKER
            )
            assert validator.is_valid(example), f"{name}.{field}: {example!r}"
            checked += 1
    assert checked >= len(CONTRACT)


def test_business_rules_and_fallbacks(specs: dict[str, ToolSpec]) -> None:
    [refund_rule] = specs["request_refund"].business_rules
    assert (refund_rule.kind, refund_rule.field, refund_rule.limit) == ("max_value", "amount", 500)
    assert refund_rule.on_violation == "approval"
    [email_rule] = specs["send_email"].business_rules
    assert (email_rule.kind, email_rule.field) == ("domain_allowlist", "to")
    assert (email_rule.values, email_rule.on_violation) == (("example.com",), "approval")
    for name in ("query_order_status", "track_shipment"):
        fallback = specs[name].fallback
        assert fallback is not None and fallback.message
    for name in ("create_ticket", "request_refund", "request_return", "send_email"):
        assert specs[name].idempotent, name


def test_only_free_text_fields_may_span_lines(specs: dict[str, ToolSpec]) -> None:
    multiline = {
        f"{name}.{field}"
        for name, spec in specs.items()
        for field, schema in spec.parameters["properties"].items()
        if schema.get("x-multiline") is True
    }
    assert multiline == {
        "send_email.body",
        "create_ticket.summary",
        "request_refund.reason",
        "request_return.reason",
    }


def test_patterns_accept_the_fixture_ids_and_reject_others(specs: dict[str, ToolSpec]) -> None:
    def valid(tool: str, args: dict[str, Any]) -> bool:
        return Draft202012Validator(specs[tool].parameters).is_valid(args)

    assert valid("query_order_status", {"order_id": "202405201234"})
    assert not valid("query_order_status", {"order_id": "20240520123"})
    assert valid("track_shipment", {"tracking_number": "SF123456789CN"})
    assert not valid("track_shipment", {"tracking_number": "sf123456789cn"})
    assert valid("reset_password", {"phone": "13800138000"})
    assert valid("reset_password", {"phone": "+8613800138000"})
    assert not valid("reset_password", {"phone": "0138001380"})
    assert not valid("create_ticket", {"category": "complaint", "summary": "hi"})
