"""What a model step's trace leaves out when it is stored, and how it reads back whole.

Most model calls are alike: the output schema is always `MODEL_OUTPUT_SCHEMA`, the reply is
valid, and one model answered at its first try (the step is named after it); a tool call that
succeeded had a valid output. The recorder stores none of that, only what differs from it;
`whole` puts it back, so the steps API shows every step as it always has. Rows stored before
carry it all and read the same.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.llm.gateway import ModelRoute
from app.storage.steps import Step

MODEL_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "tool_calls": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "arguments"],
                "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
            },
        },
    },
}
VALID: dict[str, Any] = {"valid": True, "errors": []}


def models_to_store(route: ModelRoute | None) -> list[dict[str, Any]] | None:
    """A model step's `result.models` as stored: None (left out) when the model the step is
    named after answered at its first try; `[]` when no route is known."""
    if route is None:
        return []
    answered = route.answered_by
    if answered and [a.as_dict() for a in route.attempts] == [_first_try(answered)]:
        return None
    return route.trace()


def whole(step: Step) -> Step:
    """The step as the recorder saw it: a model step's schema, validation and models back, a
    succeeded tool call's validation."""
    if step.action_type == "call_tool":
        if step.status != "succeeded" or step.validation is not None:
            return step
        checked = step.expected_output_schema is not None
        return replace(
            step, validation={"schema": True, "valid": True} if checked else {"schema": False}
        )
    if step.action_type != "generate_response":
        return step
    changes: dict[str, Any] = {}
    if step.expected_output_schema is None:
        changes["expected_output_schema"] = MODEL_OUTPUT_SCHEMA
    if step.status == "succeeded":
        if step.validation is None:
            changes["validation"] = VALID
        if isinstance(step.result, dict) and "models" not in step.result:
            changes["result"] = {**step.result, "models": [_first_try(step.name)]}
    return replace(step, **changes) if changes else step


def _first_try(model: str) -> dict[str, Any]:
    return {"model": model, "outcome": "answered", "tries": 1}
