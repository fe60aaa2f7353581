"""Say which arguments hold sensitive values, and of what kind, without showing them.

An operator deciding an approval sees masked arguments; this summary tells them what the
masks hide ("body contains a full bank card number and a phone number"), so a masked value is
never mistaken for a harmless one. It reveals nothing a mask does not already imply, so it is
shown to every role and travels in the `approval.requested` event.

Detection is the Redactor's own (app/tools/shaping.py), applied in the same order with the
same masking in between, so the summary names exactly what the masking changed.
"""

from __future__ import annotations

from typing import Any, TypedDict

from app.tools.shaping import DETECTORS, SENSITIVE_KEYS, Redactor


class SensitiveField(TypedDict):
    field: str
    kinds: list[str]
    note: str


_WHAT = {
    "api_key": "an API key or token",
    "secret": "a password or secret",
    "email": "an email address",
    "id_card": "a full ID card number",
    "bank_card": "a full bank card number",
    "phone": "a phone number",
    "custom": "text matching a configured redaction pattern",
}


def kinds_in(text: str, redactor: Redactor | None = None) -> list[str]:
    """The kinds of sensitive value in `text`, in detection order, each once."""
    found: list[str] = []
    for detector in DETECTORS:
        text, count = detector.pattern.subn(detector.mask, text)
        if count and detector.kind not in found:
            found.append(detector.kind)
    for pattern in redactor.extra if redactor is not None else ():
        text, count = pattern.subn("****", text)
        if count and "custom" not in found:
            found.append("custom")
    return found


def summarize(arguments: dict[str, Any], redactor: Redactor | None = None) -> list[SensitiveField]:
    """One entry per field (dotted path for nested values) that holds something sensitive."""
    found: list[SensitiveField] = []
    _walk(arguments, "", redactor, found)
    return found


def _walk(value: Any, path: str, redactor: Redactor | None, found: list[SensitiveField]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            field = f"{path}.{key}" if path else str(key)
            if SENSITIVE_KEYS.match(str(key)) and item not in (None, ""):
                found.append(
                    {"field": field, "kinds": ["secret"], "note": f"{field} is a secret field"}
                )
            else:
                _walk(item, field, redactor, found)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _walk(item, f"{path}.{i}" if path else str(i), redactor, found)
    elif isinstance(value, str):
        kinds = kinds_in(value, redactor)
        if kinds:
            found.append({"field": path, "kinds": kinds, "note": _note(path, kinds)})


def _note(field: str, kinds: list[str]) -> str:
    parts = [_WHAT.get(kind, kind) for kind in kinds]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{field} contains {listed}"
