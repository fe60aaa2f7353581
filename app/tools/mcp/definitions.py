"""An MCP tool's definition as Hermes sees it: its fingerprint, risk, and `ToolSpec`.

The fingerprint covers everything the model or the executor acts on (description, input and
output schemas, annotations). A server that changes any of it after the tool was first seen
gets the tool blocked until an operator approves the new definition (tool poisoning: the
description is a prompt the model reads).

Risk. The MCP spec says clients must not make tool-use decisions from the annotations of an
untrusted server, so an untrusted server's tools are `external` (every call waits for a human)
unless the operator sets `risk` for them. A trusted server's hints are used: read-only tools
are `read`, tools that reach the open world are `external`, the rest `write`.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from mcp_types import Tool

from app.errors import InternalError
from app.tools.mcp.config import ServerConfig
from app.tools.mcp.naming import tool_name
from app.tools.spec import McpHandler, Risk, ToolSpec

# The executor's own timeout is a little longer than ours, so a slow MCP call ends with our
# clearer `mcp_timeout` instead of the executor's generic one.
EXECUTOR_MARGIN_S = 1.0


class UnusableTool(InternalError):
    """The tool's input schema cannot be offered to a model."""


@dataclass(frozen=True)
class Definition:
    """The parts of an MCP tool that the model and the executor act on."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any] | None

    @classmethod
    def of(cls, tool: Tool) -> Definition:
        return cls(
            name=tool.name,
            description=tool.description or "",
            input_schema=tool.input_schema,
            output_schema=tool.output_schema,
            annotations=(
                None
                if tool.annotations is None
                else tool.annotations.model_dump(mode="json", exclude_none=True)
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "annotations": self.annotations,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Definition:
        return cls(**data)

    def fingerprint(self) -> str:
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()

    def changed_fields(self, other: Definition) -> list[str]:
        mine, theirs = self.to_dict(), other.to_dict()
        return [key for key in mine if mine[key] != theirs[key]]


def model_parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """The input schema as a model accepts it: an object at the root. Everything else, including
    `additionalProperties`, is kept as the server declared it."""
    declared = schema.get("type", "object")
    if declared != "object" and not (isinstance(declared, list) and "object" in declared):
        raise UnusableTool(f"its input schema is of type {declared!r}, not an object")
    out = copy.deepcopy(schema)
    out["type"] = "object"
    out.setdefault("properties", {})
    out.pop("$schema", None)  # some model APIs reject it; validation does not need it
    # MCP servers cannot say which text may span lines; their plain text fields are free text
    # (notes, queries), so line breaks pass there. Other control characters never do.
    for prop in out["properties"].values():
        if isinstance(prop, dict) and prop.get("type") == "string" and "format" not in prop:
            prop.setdefault("x-multiline", True)
    return out


def choose_risk(server: ServerConfig, definition: Definition) -> Risk:
    override = server.risk_override(definition.name)
    if override is not None:
        return override
    if not server.trusted:
        return "external"
    hints = definition.annotations or {}
    if hints.get("read_only_hint") is True:
        return "read"
    if hints.get("open_world_hint") is True:
        return "external"
    return "write"


def build_spec(server: ServerConfig, definition: Definition, timeout_s: float) -> ToolSpec:
    hints = definition.annotations or {}
    description = definition.description.strip() or (
        f"Tool {definition.name} of the MCP server {server.name}."
    )
    return ToolSpec(
        name=tool_name(server.name, definition.name),
        description=description,
        parameters=model_parameters(definition.input_schema),
        handler=McpHandler(server.name, definition.name),
        output_schema=definition.output_schema,
        risk=choose_risk(server, definition),
        timeout_s=timeout_s + EXECUTOR_MARGIN_S,
        idempotent=server.trusted and hints.get("idempotent_hint") is True,
        intents=server.intents_for(definition.name),
        source=f"mcp:{server.name}",
        untrusted_output=not server.trusted,
    )
