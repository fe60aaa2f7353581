"""The per-field summary of what is sensitive uses the Redactor's own detectors: it names what
the masking hides, and nothing the masking leaves alone."""

from __future__ import annotations

import re
from typing import Any

from app.tools.sensitive import kinds_in, summarize
from app.tools.shaping import Redactor

CARD, PHONE, ID_CARD = "6222021234567890123", "13800138000", "110101199003074512"


def test_body_with_a_card_and_a_phone() -> None:
    summary = summarize(
        {
            "to": "lx.attacker@example.com",
            "subject": "Your card",
            "body": f"Card {CARD}, call {PHONE}.",
        }
    )
    assert summary == [
        {"field": "to", "kinds": ["email"], "note": "to contains an email address"},
        {
            "field": "body",
            "kinds": ["bank_card", "phone"],
            "note": "body contains a full bank card number and a phone number",
        },
    ]


def test_an_id_card_number_is_not_also_called_a_bank_card() -> None:
    # The id-card detector masks first, as the Redactor does; the card pattern then sees "*".
    assert kinds_in(f"ID {ID_CARD}") == ["id_card"]


def test_international_numbers_are_phones_too() -> None:
    assert kinds_in("call +447700900123 or 13900139000") == ["phone"]


def test_nested_fields_secret_fields_and_configured_patterns() -> None:
    redactor = Redactor.with_patterns([r"VIP-\d{4}"])
    summary = summarize(
        {"customer": {"password": "hunter22", "notes": ["fine", "member VIP-1234"]}, "n": 3},
        redactor,
    )
    assert summary == [
        {
            "field": "customer.password",
            "kinds": ["secret"],
            "note": "customer.password is a secret field",
        },
        {
            "field": "customer.notes.1",
            "kinds": ["custom"],
            "note": "customer.notes.1 contains text matching a configured redaction pattern",
        },
    ]


def test_nothing_sensitive_gives_an_empty_summary() -> None:
    assert summarize({"subject": "Your order 202405201234 shipped", "amount": 12.5}) == []


def test_the_summary_names_exactly_the_fields_the_redactor_changes() -> None:
    redactor = Redactor()
    arguments: dict[str, Any] = {
        "a": f"card {CARD}",
        "b": "order 202405201234",
        "c": "key sk-abcdefghijklmnopqrstuv",
        "d": "Bearer abcdefgh12345678",
        "e": "password: hunter2",
        "f": "nothing here",
        "g": ID_CARD,
    }
    masked = redactor.data(arguments)
    changed = {k for k in arguments if masked[k] != arguments[k]}
    assert {s["field"] for s in summarize(arguments, redactor)} == changed
    assert re.search(r"\d{16}", str(masked)) is None
