"""domain_allowlist judges every address in the field, never "the part after the last @"."""

from __future__ import annotations

from typing import Any

import pytest

from app.tools.rules import check
from app.tools.spec import BusinessRule

RULE = BusinessRule("domain_allowlist", "to", "approval", values=("example.com", "Example.ORG"))


@pytest.mark.parametrize(
    "to", ["li.lei@example.com", "LI.LEI@EXAMPLE.COM", ["a@example.com", "b@example.org"], []]
)
def test_addresses_inside_the_list_pass(to: Any) -> None:
    assert check(RULE, {"to": to}) is None


@pytest.mark.parametrize(
    ("to", "named"),
    [
        ("ops@partner.example", "partner.example"),
        ("attacker@evil.com,li.lei@example.com", "(not one plain address)"),
        ("li.lei@example.com,attacker@evil.com", "(not one plain address)"),
        ("attacker@evil.com <li.lei@example.com>", "(not one plain address)"),
        ("li.lei@example.com.evil.com", "example.com.evil.com"),
        (["li.lei@example.com", "attacker@evil.com"], "evil.com"),
        (["li.lei@example.com", 42], "(not one plain address)"),
    ],
)
def test_any_address_outside_the_list_fails(to: Any, named: str) -> None:
    violation = check(RULE, {"to": to})
    assert violation is not None and violation.action == "approval"
    assert violation.reason.endswith(named)
    assert "attacker" not in violation.reason  # the reason travels in events: domains only


def test_the_declared_message_is_kept() -> None:
    rule = BusinessRule("domain_allowlist", "to", "reject", values=("example.com",), message="no")
    violation = check(rule, {"to": "a@evil.com"})
    assert violation is not None and violation.reason == "no"
