"""What a tool is: the declaration from tools.yaml (or an MCP server), as typed data."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
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
class HistoryRule:
    """A rule over what was already done, read from the tool's own store before it runs.

    kind `cumulative_max`: `field` of this call plus what was already done under the same key
    (`per`: an argument such as `order_id`, or `customer`), within `window_hours` if given, must
    stay at most `limit`.
    kind `sequence`: a call soon after one of the `after` actions (in the same session, or
    within `window_hours`) breaks the rule.
    `history` names the Python function that reads the store (see app/tools/policy/history.py).
    A store that cannot be read counts as a violation: rules over history fail closed.
    """

    kind: Literal["cumulative_max", "sequence"]
    history: str  # "module:function"
    on_violation: Literal["approval", "reject"]
    field: str | None = None
    limit: float | None = None
    per: str | None = None
    after: tuple[str, ...] = ()
    window_hours: float | None = None
    message: str = ""


@dataclass(frozen=True)
class Confirmation:
    """`confirm:` in tools.yaml: the customer says yes before the call runs.

    `text` holds the read-back per language ("en", "zh") with `{argument}` placeholders that
    are filled with masked values; `labels` turns enum values into words per language, and
    `absent` says per language what an argument left out means ("the whole order amount");
    `resolve` ("module:function", async `(ctx, **arguments) -> dict`) says what such an
    argument comes to now, read-only, so the customer confirms a figure ("179.00 (the whole
    order amount)") and not only a phrase.
    """

    text: dict[str, str] = field(default_factory=dict)
    labels: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    absent: dict[str, dict[str, str]] = field(default_factory=dict)
    resolve: str | None = None


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
    history_rules: tuple[HistoryRule, ...] = ()
    # "module:function" called with the arguments before any approval; it raises the
    # refusal the tool would answer with (app/tools/policy/precheck.py).
    precheck: str | None = None
    confirm: Confirmation | None = None
    fallback: Fallback | None = None
    intents: tuple[str, ...] = ()
    always_on: bool = False
    cpu_bound: bool = False
    source: str = "local"  # "local" or "mcp:<server>"
    untrusted_output: bool = False
    # Breaker and rate limit per (tenant, tool), or one for everybody (a shared upstream).
    limits_scope: Literal["tenant", "global"] = "tenant"
    # What the handler needs from the deployment: the type in its `ToolContext[...]`, read
    # when the loader resolves it (app/tools/deps.py); None: nothing.
    dependency: type | None = None

    @property
    def acts(self) -> bool:
        """Writes and external actions: what confirmation, taint and approvals guard."""
        return self.risk != "read"

    @cached_property
    def _model_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description.strip(),
                # Hermes' own keywords (`x-multiline`) are for its validator; some model APIs
                # reject schema keywords they do not know.
                "parameters": _without_extensions(self.parameters),
            },
        }

    def model_schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry the model sees."""
        return self._model_schema


def _without_extensions(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {
            k: _without_extensions(v)
            for k, v in schema.items()
            if not (isinstance(k, str) and k.startswith("x-"))
        }
    if isinstance(schema, list):
        return [_without_extensions(v) for v in schema]
    return schema
