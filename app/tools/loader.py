"""Load and check tools.yaml. A bad file stops start-up with the line and the reason."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema.validators import Draft202012Validator

from app.tools.spec import (
    BusinessRule,
    Fallback,
    Handler,
    HttpHandler,
    PythonHandler,
    ToolSpec,
)

_NAME = r"^[a-z][a-z0-9_]{0,63}$"

META_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["tools"],
    "properties": {
        "version": {"const": 1},
        "defaults": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 600},
                "rate_limit": {"type": "number", "exclusiveMinimum": 0},
                "max_concurrency": {"type": "integer", "minimum": 1},
            },
        },
        "tools": {"type": "array", "items": {"$ref": "#/$defs/tool"}},
    },
    "$defs": {
        "tool": {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "description", "parameters", "risk", "handler"],
            "properties": {
                "name": {"type": "string", "pattern": _NAME},
                "description": {"type": "string", "minLength": 20},
                "parameters": {"$ref": "#/$defs/parameters"},
                "output_schema": {"type": "object"},
                "risk": {"enum": ["read", "write", "external"]},
                "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 600},
                "rate_limit": {"type": "number", "exclusiveMinimum": 0},
                "max_concurrency": {"type": "integer", "minimum": 1},
                "idempotent": {"type": "boolean"},
                "cpu_bound": {"type": "boolean"},
                "always_on": {"type": "boolean"},
                "intents": {"type": "array", "items": {"type": "string"}},
                "business_rules": {"type": "array", "items": {"$ref": "#/$defs/rule"}},
                "fallback": {
                    "type": "object",
                    "additionalProperties": False,
                    "minProperties": 1,
                    "properties": {"data": {}, "message": {"type": "string"}},
                },
                "handler": {
                    "oneOf": [
                        {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["python"],
                            "properties": {
                                "python": {
                                    "type": "string",
                                    "pattern": r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
                                }
                            },
                        },
                        {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["http"],
                            "properties": {
                                "http": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["method", "url"],
                                    "properties": {
                                        "method": {
                                            "enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]
                                        },
                                        "url": {"type": "string", "pattern": "^https?://"},
                                        "headers": {
                                            "type": "object",
                                            "additionalProperties": {"type": "string"},
                                        },
                                    },
                                }
                            },
                        },
                    ]
                },
            },
        },
        "parameters": {
            "type": "object",
            "required": ["type", "properties", "additionalProperties"],
            "properties": {
                "type": {"const": "object"},
                "properties": {
                    "type": "object",
                    # Hermes' own keyword: line breaks allowed (app/tools/validation.py).
                    "additionalProperties": {"properties": {"x-multiline": {"type": "boolean"}}},
                },
                "required": {"type": "array", "items": {"type": "string"}},
                "additionalProperties": {"const": False},
            },
        },
        "rule": {
            "type": "object",
            "additionalProperties": False,
            "required": ["kind", "field", "on_violation"],
            "properties": {
                "kind": {"enum": ["domain_allowlist", "max_value"]},
                "field": {"type": "string"},
                "on_violation": {"enum": ["approval", "reject"]},
                "values": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "limit": {"type": "number"},
                "message": {"type": "string"},
            },
            "allOf": [
                {
                    "if": {"properties": {"kind": {"const": "domain_allowlist"}}},
                    "then": {"required": ["values"]},
                },
                {
                    "if": {"properties": {"kind": {"const": "max_value"}}},
                    "then": {"required": ["limit"]},
                },
            ],
        },
    },
}


class ToolsFileError(ValueError):
    """tools.yaml is invalid; the message carries the file, line and reason."""


def _line_index(node: yaml.Node, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Map each path in the document to the 1-based line where its value starts."""
    lines = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            lines.update(_line_index(value, (*path, key.value)))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines.update(_line_index(item, (*path, i)))
    return lines


def _line_of(lines: dict[tuple[Any, ...], int], path: tuple[Any, ...]) -> int:
    while path and path not in lines:
        path = path[:-1]
    return lines.get(path, 1)


def parse_handler(raw: dict[str, Any]) -> Handler:
    if "python" in raw:
        module, function = raw["python"].split(":", 1)
        return PythonHandler(module, function)
    http = raw["http"]
    return HttpHandler(http["method"], http["url"], dict(http.get("headers") or {}))


def _spec(raw: dict[str, Any], defaults: dict[str, Any]) -> ToolSpec:
    fallback = raw.get("fallback")
    return ToolSpec(
        name=raw["name"],
        description=raw["description"],
        parameters=raw["parameters"],
        handler=parse_handler(raw["handler"]),
        output_schema=raw.get("output_schema"),
        risk=raw["risk"],
        timeout_s=float(raw.get("timeout_s", defaults.get("timeout_s", 10.0))),
        rate_limit=float(raw.get("rate_limit", defaults.get("rate_limit", 5.0))),
        max_concurrency=int(raw.get("max_concurrency", defaults.get("max_concurrency", 4))),
        idempotent=bool(raw.get("idempotent", False)),
        business_rules=tuple(
            BusinessRule(
                kind=r["kind"],
                field=r["field"],
                on_violation=r["on_violation"],
                values=tuple(r.get("values", ())),
                limit=r.get("limit"),
                message=r.get("message", ""),
            )
            for r in raw.get("business_rules", ())
        ),
        fallback=None
        if fallback is None
        else Fallback(fallback.get("data"), fallback.get("message")),
        intents=tuple(raw.get("intents", ())),
        always_on=bool(raw.get("always_on", False)),
        cpu_bound=bool(raw.get("cpu_bound", False)),
    )


def load_tools(path: Path, *, resolve: Callable[[str], object] | None = None) -> list[ToolSpec]:
    """Parse, check against the meta-schema, check each tool's own schemas and handler."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolsFileError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ToolsFileError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if node is None or data is None:
        raise ToolsFileError(f"{path}:1: the file is empty")
    lines = _line_index(node)

    def fail(at: tuple[Any, ...], reason: str) -> ToolsFileError:
        return ToolsFileError(f"{path}:{_line_of(lines, at)}: {reason}")

    errors = sorted(
        Draft202012Validator(META_SCHEMA).iter_errors(data), key=lambda e: list(e.absolute_path)
    )
    if errors:
        best = jsonschema.exceptions.best_match(errors)
        error_at = tuple(best.absolute_path)
        label = ".".join(str(p) for p in error_at) or "(top level)"
        raise fail(error_at, f"{label}: {best.message}")

    defaults = data.get("defaults") or {}
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(data["tools"]):
        at: tuple[Any, ...] = ("tools", i)
        if raw["name"] in seen:
            raise fail((*at, "name"), f"duplicate tool name {raw['name']!r}")
        seen.add(raw["name"])
        for key in ("parameters", "output_schema"):
            if key in raw:
                try:
                    Draft202012Validator.check_schema(raw[key])
                except jsonschema.SchemaError as exc:
                    inner = tuple(exc.absolute_path)
                    raise fail(
                        (*at, key, *inner),
                        f"{raw['name']}.{key} is not a valid JSON Schema: {exc.message}",
                    ) from None
        for j, rule in enumerate(raw.get("business_rules", ())):
            if rule["field"] not in raw["parameters"]["properties"]:
                raise fail(
                    (*at, "business_rules", j),
                    f"{raw['name']}: rule field {rule['field']!r} is not a parameter",
                )
        spec = _spec(raw, defaults)
        if resolve is not None and isinstance(spec.handler, PythonHandler):
            try:
                resolve(spec.handler.target)
            except (ImportError, AttributeError, ValueError) as exc:
                raise fail((*at, "handler"), f"{raw['name']}: handler not found: {exc}") from None
        specs.append(spec)
    return specs


def resolve_python(target: str) -> Callable[..., Any]:
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    fn = getattr(module, attr)
    if not callable(fn):
        raise ValueError(f"{target} is not callable")
    return fn
