"""Business rules declared per tool, checked against validated arguments before anything runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from app.tools.spec import BusinessRule, ToolSpec
from app.tools.validation import single_address


@dataclass(frozen=True)
class Violation:
    rule: BusinessRule
    reason: str

    @property
    def action(self) -> Literal["approval", "reject"]:
        return self.rule.on_violation


def _outside(value: Any, allowed: set[str]) -> list[str]:
    """The domains of every address in the field (one, or a list) outside `allowed`.

    Never "the part after the last @": "x@evil.com,y@example.com" is not an example.com
    address, it is not one address at all, and it fails. Only domains are named: the reason
    travels in events, where addresses are masked.
    """
    addresses = value if isinstance(value, list | tuple) else [value]
    outside: list[str] = []
    for address in addresses:
        parsed = single_address(address) if isinstance(address, str) else None
        what = "(not one plain address)" if parsed is None else parsed[1]
        if what not in allowed and what not in outside:
            outside.append(what)
    return outside


def check(rule: BusinessRule, args: dict[str, Any]) -> Violation | None:
    value = args.get(rule.field)
    if value is None:
        return None
    if rule.kind == "domain_allowlist":
        allowed = {d.lower() for d in rule.values}
        outside = _outside(value, allowed)
        if outside:
            return Violation(
                rule,
                rule.message
                or f"{rule.field} is outside the allowed domains ({', '.join(sorted(allowed))}): "
                f"{', '.join(outside)}",
            )
        return None
    if rule.kind == "max_value":
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None  # schema validation already vouched for the type
        if rule.limit is not None and number > rule.limit:
            return Violation(
                rule,
                rule.message or f"{rule.field} {number:g} is above the limit of {rule.limit:g}",
            )
        return None
    raise ValueError(f"unknown rule kind {rule.kind!r}")


def violations(spec: ToolSpec, args: dict[str, Any]) -> list[Violation]:
    found = (check(rule, args) for rule in spec.business_rules)
    return [v for v in found if v is not None]
