"""Business rules declared per tool, checked against validated arguments before anything runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from app.tools.spec import BusinessRule, ToolSpec


@dataclass(frozen=True)
class Violation:
    rule: BusinessRule
    reason: str

    @property
    def action(self) -> Literal["approval", "reject"]:
        return self.rule.on_violation


def _domain(address: str) -> str:
    return address.rsplit("@", 1)[-1].strip().lower() if "@" in address else ""


def check(rule: BusinessRule, args: dict[str, Any]) -> Violation | None:
    value = args.get(rule.field)
    if value is None:
        return None
    if rule.kind == "domain_allowlist":
        allowed = {d.lower() for d in rule.values}
        domain = _domain(str(value))
        if domain not in allowed:
            return Violation(
                rule,
                rule.message
                or f"{rule.field} {value!r} is outside the allowed domains "
                f"({', '.join(sorted(allowed))})",
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
