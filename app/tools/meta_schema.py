"""The meta-schema tools.yaml is checked against at start-up (see app/tools/loader.py)."""

from __future__ import annotations

from typing import Any

_NAME = r"^[a-z][a-z0-9_]{0,63}$"
_PYTHON_TARGET = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"

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
                "limits_scope": {"enum": ["tenant", "global"]},
            },
        },
        # `module:attribute` of each app.tools.deps.Provider the tools' handlers need.
        "providers": {"type": "array", "items": {"type": "string", "pattern": _PYTHON_TARGET}},
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
                "history_rules": {"type": "array", "items": {"$ref": "#/$defs/history_rule"}},
                "precheck": {"type": "string", "pattern": _PYTHON_TARGET},
                "confirm": {"$ref": "#/$defs/confirm"},
                "limits_scope": {"enum": ["tenant", "global"]},
                "untrusted_output": {"type": "boolean"},
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
                            "properties": {"python": {"type": "string", "pattern": _PYTHON_TARGET}},
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
        "history_rule": {
            "type": "object",
            "additionalProperties": False,
            "required": ["kind", "history", "on_violation"],
            "properties": {
                "kind": {"enum": ["cumulative_max", "sequence"]},
                "history": {"type": "string", "pattern": _PYTHON_TARGET},
                "on_violation": {"enum": ["approval", "reject"]},
                "field": {"type": "string"},
                "limit": {"type": "number", "minimum": 0},
                "per": {"type": "string"},
                "after": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "window_hours": {"type": "number", "exclusiveMinimum": 0},
                "message": {"type": "string"},
            },
            "allOf": [
                {
                    "if": {"properties": {"kind": {"const": "cumulative_max"}}},
                    "then": {"required": ["field", "limit", "per"]},
                },
                {
                    "if": {"properties": {"kind": {"const": "sequence"}}},
                    "then": {"required": ["after"]},
                },
            ],
        },
        "bilingual": {
            "type": "object",
            "additionalProperties": False,
            "required": ["en", "zh"],
            "properties": {"en": {"type": "string"}, "zh": {"type": "string"}},
        },
        "confirm": {
            "oneOf": [
                {"const": True},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["en", "zh"],
                    "properties": {
                        "en": {"type": "string", "minLength": 1},
                        "zh": {"type": "string", "minLength": 1},
                        "labels": {
                            "type": "object",
                            "additionalProperties": {
                                "type": "object",
                                "additionalProperties": {
                                    "type": "object",
                                    "additionalProperties": {"type": "string"},
                                },
                            },
                        },
                        # what an argument left out means, per language
                        "absent": {
                            "type": "object",
                            "additionalProperties": {"$ref": "#/$defs/bilingual"},
                        },
                        # what it comes to now: "module:function", read-only
                        "resolve": {"type": "string", "pattern": _PYTHON_TARGET},
                    },
                },
            ]
        },
    },
}
