"""Check a model's tool arguments before anything runs, and say precisely what is wrong.

Arguments are coerced only where the schema asks for a scalar type and the value is an
unambiguous spelling of it ("5" for an integer, 202405201234 for a string). Every problem is
reported with the field, what was expected and what was received, so the model can fix it.

Beyond the schema, and before anything is approved or run: numbers must be finite (Python's
json reads NaN and Infinity), a `format: email` field holds exactly one plain address (the
jsonschema default accepts "a@x.com,b@y.com"), and strings carry no control characters; line
breaks (LF or CRLF) only where the field's schema says `x-multiline: true`, since a line break
in a one-line field is how headers get injected.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema import FormatChecker, ValidationError
from jsonschema.validators import Draft202012Validator

from app.errors import InternalError

_INT = re.compile(r"^[+-]?\d+$")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")

_FORMAT_HINTS = {
    "date": "a date as YYYY-MM-DD",
    "date-time": "a date-time as YYYY-MM-DDTHH:MM:SSZ",
    "email": "exactly one plain email address like name@example.com (no name, list or spaces)",
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


class InvalidArguments(InternalError):
    """Arguments the model sent fail validation: the executor hands `hint` back to it."""

    def __init__(self, problems: list[ArgumentProblem], *, malformed_json: bool = False) -> None:
        self.problems = problems
        self.malformed_json = malformed_json
        super().__init__("; ".join(str(p) for p in problems))

    @property
    def hint(self) -> str:
        return "Fix the arguments and call the tool again. " + " ".join(
            f"[{p}]" for p in self.problems
        )


# One plain address: a dot-atom local part, "@", a host name with at least one dot. Nothing
# else: no display name, angle brackets, spaces, separators or second "@".
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_ADDRESS = re.compile(rf"({_ATOM}(?:\.{_ATOM})*)@({_LABEL}(?:\.{_LABEL})+)")


def single_address(value: str) -> tuple[str, str] | None:
    """(local part, lower-cased domain) when `value` is exactly one plain address, else None."""
    match = _ADDRESS.fullmatch(value) if len(value) <= 254 else None
    if match is None or len(match[1]) > 64:
        return None
    return match[1], match[2].lower()


_FORMATS = FormatChecker(formats=())
_FORMATS.checkers = dict(Draft202012Validator.FORMAT_CHECKER.checkers)


def _one_address(value: object) -> bool:
    return not isinstance(value, str) or single_address(value) is not None


# Registered by call, not as a decorator: jsonschema's decorator is untyped to mypy.
_FORMATS.checks("email")(_one_address)


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json), format_checker=_FORMATS)


# Tool schemas are long-lived objects (a ToolSpec's `parameters`): look their validator up by
# identity first, so a call does not serialise its schema just to find the cached validator.
_BY_IDENTITY: dict[int, tuple[dict[str, Any], Draft202012Validator]] = {}
_BY_IDENTITY_MAX = 512


def validator_for(schema: dict[str, Any]) -> Draft202012Validator:
    known = _BY_IDENTITY.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    validator = _validator(json.dumps(schema, sort_keys=True))
    if len(_BY_IDENTITY) >= _BY_IDENTITY_MAX:
        _BY_IDENTITY.clear()
    _BY_IDENTITY[id(schema)] = (schema, validator)  # holds the schema, so its id stays its own
    return validator


def parse_arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """The model's argument text as a dict, or `InvalidArguments` saying why it isn't one."""
    if isinstance(raw, dict):
        return raw
    text = (raw or "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or a number too long to convert
        snippet = text if len(text) <= 120 else text[:117] + "..."
        why = (
            f"{exc.msg} at char {exc.pos}"
            if isinstance(exc, json.JSONDecodeError)
            else "a number with too many digits"
        )
        raise InvalidArguments(
            [ArgumentProblem("(arguments)", "a JSON object", f"malformed JSON ({why}): {snippet}")],
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
    if isinstance(value, str) and len(value) <= 100:  # longer is no number anyone means
        text = value.strip()
        if "integer" in types and "string" not in types and _INT.match(text):
            return int(text)
        if "number" in types and "string" not in types and _NUMBER.match(text):
            number = float(text) if not _INT.match(text) else int(text)
            return number if math.isfinite(number) else value
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


def _field(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path) or "(arguments)"


def _non_finite(value: Any, path: tuple[Any, ...] = ()) -> list[ArgumentProblem]:
    if isinstance(value, float) and not math.isfinite(value):
        spelled = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return [ArgumentProblem(_field(path), "a finite number", spelled)]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _non_finite(v, (*path, k))]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in _non_finite(v, (*path, i))]
    return []


# Every C0 control but TAB, DEL, the C1 controls and the Unicode line/paragraph separators;
# in a multi-line field, LF and CRLF line breaks are text (a lone CR is not).
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_MULTILINE = re.compile(r"\r(?!\n)|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")
_NAMES = {"\n": "a line break (\\n)", "\r": "a carriage return (\\r)"}


def _control_problems(value: Any, schema: Any, path: tuple[Any, ...] = ()) -> list[ArgumentProblem]:
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(value, str):
        multiline = schema.get("x-multiline") is True
        bad = (_CONTROL_MULTILINE if multiline else _CONTROL).search(value)
        if bad is None:
            return []
        what = _NAMES.get(bad[0], f"control character U+{ord(bad[0]):04X}")
        expected = (
            "text without control characters (line breaks are allowed)"
            if multiline
            else "one line without control characters"
        )
        return [ArgumentProblem(_field(path), expected, f"{what} at character {bad.start()}")]
    if isinstance(value, dict):
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        rest = schema.get("additionalProperties")
        return [
            problem
            for k, v in value.items()
            for problem in _control_problems(v, props.get(k, rest), (*path, k))
        ]
    if isinstance(value, list | tuple):
        items = schema.get("items")
        return [p for i, v in enumerate(value) for p in _control_problems(v, items, (*path, i))]
    return []


def validate_arguments(arguments: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Coerced, valid arguments or `InvalidArguments` listing every problem."""
    non_finite = _non_finite(arguments)
    if non_finite:  # before the schema: its keywords do arithmetic that NaN breaks
        raise InvalidArguments(non_finite)
    value: dict[str, Any] = coerce(arguments, schema)  # a dict coerces to a dict
    errors = sorted(validator_for(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    problems = [_problem(e, schema) for e in errors] + _control_problems(value, schema)
    if problems:
        raise InvalidArguments(problems)
    return value


def output_problems(data: Any, schema: dict[str, Any]) -> list[str]:
    errors = validator_for(schema).iter_errors(data)
    return [
        f"{'.'.join(str(p) for p in e.absolute_path) or '(output)'}: {e.message}" for e in errors
    ]
