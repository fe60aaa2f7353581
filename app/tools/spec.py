"""What a tool is: the declaration from tools.yaml (or an MCP server), as typed data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Risk = Literal["read", "write", "external"]


@dataclass(frozen=True)
class PythonHandler:
    module: str
    function: str

    @property
    def target(self) -> str:
        return f"{self.module}:{self.function}"


@dataclass(frozen=True)
class HttpHandler:
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class McpHandler:
    server: str
    tool: str


Handler = PythonHandler | HttpHandler | McpHandler


@dataclass(frozen=True)
class BusinessRule:
    """A declared rule checked against the arguments before the tool runs.

    kind `domain_allowlist`: `field` must be an address in one of `values`' domains.
    kind `max_value`: `field` must be at most `limit`.
    `on_violation` is `approval` (a human decides) or `reject` (the model is told why).
    """

    kind: Literal["domain_allowlist", "max_value"]
    field: str
    on_violation: Literal["approval", "reject"]
    values: tuple[str, ...] = ()
    limit: float | None = None
    message: str = ""


@dataclass(frozen=True)
class Fallback:
    data: Any = None
    message: str | None = None


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Handler
    output_schema: dict[str, Any] | None = None
    risk: Risk = "read"
    timeout_s: float = 10.0
    rate_limit: float = 5.0  # calls per second
    max_concurrency: int = 4
    idempotent: bool = False
    business_rules: tuple[BusinessRule, ...] = ()
    fallback: Fallback | None = None
    intents: tuple[str, ...] = ()
    always_on: bool = False
    cpu_bound: bool = False
    source: str = "local"  # "local" or "mcp:<server>"
    untrusted_output: bool = False

    def model_schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry the model sees."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description.strip(),
                "parameters": self.parameters,
            },
        }
