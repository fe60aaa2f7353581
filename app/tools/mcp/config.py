"""`mcp_servers.json`: which MCP servers to run or reach, and how far to trust them.

The common `{"mcpServers": {name: {...}}}` format: `command` + `args` + `env` + `cwd` for a
server started as a subprocess (stdio), or `url` + `headers` (+ `transport`) for one reached
over HTTP. Hermes adds per-server options: `enabled`, `trust`, `timeout_s`, `tool_filter`,
`risk`, `intents` and `protocol`.

`${VAR}` in `args`, `env`, `url` and `headers` is replaced by the parent's environment at load
time; the values that came from the environment (and every header value) are secrets: they
are collected in a `SecretMasker` and never shown in a log or status line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from app.errors import McpConfigError
from app.tools.mcp.secrets import SecretMasker
from app.tools.spec import Risk

_SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")  # no "__": it separates parts
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRETISH = re.compile(r"key|token|secret|password|passwd|auth|credential|cookie", re.I)

Trust = Literal["trusted", "untrusted"]
ProtocolMode = Literal["auto", "legacy"]


class ToolFilter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)

    def admits(self, tool: str) -> bool:
        if self.include and not any(fnmatchcase(tool, p) for p in self.include):
            return False
        return not any(fnmatchcase(tool, p) for p in self.exclude)


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    enabled: bool = True
    trust: Trust = "untrusted"
    timeout_s: float | None = Field(None, gt=0, le=3600)
    tool_filter: ToolFilter = Field(default_factory=ToolFilter)
    # tool name or glob -> risk; the first matching entry wins, in file order.
    risk: dict[str, Risk] = Field(default_factory=dict)
    # tool name or glob -> NLU intents it serves (without, a tool serves `out_of_scope`).
    intents: dict[str, list[str]] = Field(default_factory=dict)
    protocol: ProtocolMode = "auto"


class _StdioEntry(_Options):
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    transport: Literal["stdio"] = Field("stdio", alias="type")


class _HttpEntry(_Options):
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    transport: Literal["streamable_http", "http", "streamable-http", "sse"] = Field(
        "streamable_http", alias="type"
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return value


@dataclass(frozen=True)
class StdioTarget:
    command: str
    args: tuple[str, ...]
    env: dict[str, str]  # declared variables only, references expanded
    cwd: str | None


@dataclass(frozen=True)
class HttpTarget:
    url: str
    headers: dict[str, str]
    sse: bool = False


@dataclass(frozen=True)
class ServerConfig:
    name: str
    target: StdioTarget | HttpTarget
    enabled: bool = True
    trusted: bool = False
    timeout_s: float | None = None
    tool_filter: ToolFilter = field(default_factory=ToolFilter)
    risk: tuple[tuple[str, Risk], ...] = ()
    intents: tuple[tuple[str, tuple[str, ...]], ...] = ()
    protocol: ProtocolMode = "auto"

    @property
    def transport(self) -> str:
        if isinstance(self.target, StdioTarget):
            return "stdio"
        return "sse" if self.target.sse else "streamable_http"

    def risk_override(self, tool: str) -> Risk | None:
        for pattern, risk in self.risk:
            if fnmatchcase(tool, pattern):
                return risk
        return None

    def intents_for(self, tool: str) -> tuple[str, ...]:
        for pattern, intents in self.intents:
            if fnmatchcase(tool, pattern):
                return intents
        return ()

    def display_target(self, masker: SecretMasker) -> str:
        """Where the server is, for status lines: secrets masked, no env or headers."""
        if isinstance(self.target, StdioTarget):
            return masker.mask(" ".join([self.target.command, *self.target.args]))
        return masker.mask(self.target.url)


@dataclass
class McpConfig:
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    masker: SecretMasker = field(default_factory=SecretMasker)
    source: str = "<none>"

    def enabled(self) -> list[ServerConfig]:
        return [s for s in self.servers.values() if s.enabled]


def load_mcp_config(path: Path | str | None, environ: Mapping[str, str] | None = None) -> McpConfig:
    """Read and check the file; `None` means no MCP servers. Raises `McpConfigError`."""
    if path is None:
        return McpConfig()
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise McpConfigError(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise McpConfigError(str(path), f"cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise McpConfigError(str(path), f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return parse_mcp_config(raw, str(path), environ)


def parse_mcp_config(
    raw: Any, source: str = "<config>", environ: Mapping[str, str] | None = None
) -> McpConfig:
    env = os.environ if environ is None else environ
    if not isinstance(raw, dict) or not isinstance(raw.get("mcpServers"), dict):
        raise McpConfigError(source, 'expected an object with an "mcpServers" object')
    unknown = sorted(set(raw) - {"mcpServers", "$schema"})
    if unknown:
        raise McpConfigError(source, f"unknown top-level key(s): {', '.join(unknown)}")
    config = McpConfig(source=source)
    for name, entry in raw["mcpServers"].items():
        config.servers[name] = _server(name, entry, source, env, config.masker)
    return config


def _server(
    name: str, entry: Any, source: str, env: Mapping[str, str], masker: SecretMasker
) -> ServerConfig:
    where = f"{source}: server {name!r}"
    if not _SERVER_NAME.match(name) or len(name) > 40:
        raise McpConfigError(
            where,
            "the name must be 1-40 letters, digits, '-' or single '_' "
            "(it becomes part of tool names)",
        )
    if not isinstance(entry, dict):
        raise McpConfigError(where, "expected an object")
    if ("command" in entry) == ("url" in entry):
        raise McpConfigError(where, "give either 'command' (stdio) or 'url' (HTTP)")
    try:
        parsed: _StdioEntry | _HttpEntry = (
            _StdioEntry.model_validate(entry)
            if "command" in entry
            else _HttpEntry.model_validate(entry)
        )
    except ValidationError as exc:
        raise McpConfigError(where, f"{_describe(exc)}") from None

    def expand(value: str, what: str, secret: bool = False) -> str:
        def one(match: re.Match[str]) -> str:
            found = env.get(match[1])
            if found is None:
                if not parsed.enabled:
                    return ""  # a switched-off server may name variables this host lacks
                raise McpConfigError(where, f"{what} refers to ${{{match[1]}}}, which is not set")
            masker.add(found)
            return found

        expanded = _REFERENCE.sub(one, value)
        if secret:
            masker.add(expanded)
        return expanded

    target: StdioTarget | HttpTarget
    if isinstance(parsed, _StdioEntry):
        target = StdioTarget(
            command=expand(parsed.command, "command"),
            args=tuple(expand(a, f"args[{i}]") for i, a in enumerate(parsed.args)),
            env={
                k: expand(v, f"env.{k}", secret=bool(_SECRETISH.search(k)))
                for k, v in parsed.env.items()
            },
            cwd=None if parsed.cwd is None else expand(parsed.cwd, "cwd"),
        )
    else:
        target = HttpTarget(
            url=expand(parsed.url, "url"),
            headers={k: expand(v, f"headers.{k}", secret=True) for k, v in parsed.headers.items()},
            sse=parsed.transport == "sse",
        )
    return ServerConfig(
        name=name,
        target=target,
        enabled=parsed.enabled,
        trusted=parsed.trust == "trusted",
        timeout_s=parsed.timeout_s,
        tool_filter=parsed.tool_filter,
        risk=tuple(parsed.risk.items()),
        intents=tuple((k, tuple(v)) for k, v in parsed.intents.items()),
        protocol=parsed.protocol,
    )


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown option"
        parts.append(f"{loc}: {message}" if loc else message)
    return "; ".join(parts)
