"""Check a model's tool arguments before anything runs, and say precisely what is wrong.

Arguments are coerced only where the schema asks for a scalar type and the value is an
unambiguous spelling of it ("5" for an integer, 202405201234 for a string). Every problem is
reported with the field, what was expected and what was received, so the model can fix it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema import ValidationError
from jsonschema.validators import Draft202012Validator

_INT = re.compile(r"^[+-]?\d+$")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")

_FORMAT_HINTS = {
    "date": "a date as YYYY-MM-DD",
    "date-time": "a date-time as YYYY-MM-DDTHH:MM:SSZ",
    "email": "an email address like name@example.com",
    "uri": "an absolute URI",
    "uuid": "a UUID",
}


@dataclass(frozen=True)
class ArgumentProblem:
    field: str
    expected: str
    received: str

    def __str__(self) -> str:
        return f"{self.field}: expected {self.expected}; received {self.received}"


class InvalidArguments(Exception):
    def __init__(self, problems: list[ArgumentProblem], *, malformed_json: bool = False) -> None:
        self.problems = problems
        self.malformed_json = malformed_json
        super().__init__("; ".join(str(p) for p in problems))

    @property
    def hint(self) -> str:
        return "Fix the arguments and call the tool again. " + " ".join(
            f"[{p}]" for p in self.problems
        )


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(
        json.loads(schema_json), format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def validator_for(schema: dict[str, Any]) -> Draft202012Validator:
    return _validator(json.dumps(schema, sort_keys=True))


def parse_arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """The model's argument text as a dict, or `InvalidArguments` saying why it isn't one."""
    if isinstance(raw, dict):
        return raw
    text = (raw or "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        snippet = text if len(text) <= 120 else text[:117] + "..."
        raise InvalidArguments(
            [
                ArgumentProblem(
                    "(arguments)",
                    "a JSON object",
                    f"malformed JSON ({exc.msg} at char {exc.pos}): {snippet}",
                )
            ],
            malformed_json=True,
        ) from None
    if not isinstance(value, dict):
        raise InvalidArguments(
            [ArgumentProblem("(arguments)", "a JSON object", _show(value))], malformed_json=True
        )
    return value


def _types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, list):
        return set(t)
    return {t} if isinstance(t, str) else set()


def coerce(value: Any, schema: dict[str, Any]) -> Any:
    """Coerce scalars the schema clearly asks for; leave everything else as it is."""
    types = _types(schema)
    if isinstance(value, dict) and "object" in types:
        props = schema.get("properties", {})
        return {k: coerce(v, props[k]) if k in props else v for k, v in value.items()}
    if isinstance(value, list) and "array" in types and isinstance(schema.get("items"), dict):
        return [coerce(v, schema["items"]) for v in value]
    if isinstance(value, str):
        text = value.strip()
        if "integer" in types and "string" not in types and _INT.match(text):
            return int(text)
        if "number" in types and "string" not in types and _NUMBER.match(text):
            return float(text) if not _INT.match(text) else int(text)
        if "boolean" in types and "string" not in types and text.lower() in ("true", "false"):
            return text.lower() == "true"
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and types == {"string"}:
        return (
            str(value)
            if not isinstance(value, float) or not value.is_integer()
            else str(int(value))
        )
    return value


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    kind = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{kind} {text}"


def _expected(schema: dict[str, Any]) -> str:
    parts: list[str] = []
    if "enum" in schema:
        parts.append(
            "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
        )
    elif "format" in schema and schema["format"] in _FORMAT_HINTS:
        parts.append(_FORMAT_HINTS[schema["format"]])
    else:
        types = sorted(_types(schema))
        parts.append(" or ".join(types) if types else "a value")
        if "pattern" in schema:
            parts.append(f"matching {schema['pattern']}")
        if "minimum" in schema:
            parts.append(f">= {schema['minimum']}")
        if "maximum" in schema:
            parts.append(f"<= {schema['maximum']}")
        if "minLength" in schema:
            parts.append(f"at least {schema['minLength']} characters")
        if "maxLength" in schema:
            parts.append(f"at most {schema['maxLength']} characters")
    if schema.get("description"):
        parts.append(f"({schema['description'].strip().rstrip('.')})")
    if schema.get("examples"):
        parts.append("e.g. " + json.dumps(schema["examples"][0], ensure_ascii=False))
    return " ".join(parts)


def _problem(error: ValidationError, root: dict[str, Any]) -> ArgumentProblem:
    path = ".".join(str(p) for p in error.absolute_path) or "(arguments)"
    if error.validator == "required":
        missing = re.findall(r"'([^']+)' is a required property", error.message)
        name = missing[0] if missing else str(error.message)
        sub = error.schema.get("properties", {}).get(name, {})
        field = f"{path}.{name}" if path != "(arguments)" else name
        return ArgumentProblem(field, _expected(sub), "nothing (the field is missing)")
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        allowed = ", ".join(sorted(error.schema.get("properties", {}))) or "none"
        field = ", ".join(extra) if path == "(arguments)" else f"{path}.{','.join(extra)}"
        return ArgumentProblem(field, f"no such field (allowed: {allowed})", "an unexpected field")
    return ArgumentProblem(path, _expected(error.schema), _show(error.instance))


def validate_arguments(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Coerced, valid arguments or `InvalidArguments` listing every problem."""
    value = coerce(arguments, schema)
    errors = sorted(validator_for(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        raise InvalidArguments([_problem(e, schema) for e in errors])
    return value


def output_problems(data: Any, schema: dict[str, Any]) -> list[str]:
    errors = validator_for(schema).iter_errors(data)
    return [
        f"{'.'.join(str(p) for p in e.absolute_path) or '(output)'}: {e.message}" for e in errors
    ]
