"""Argument validation beyond the schema: one address per address field, no control characters
(line breaks only in multi-line fields), finite numbers; each problem names the field."""

from __future__ import annotations

from typing import Any

import pytest

from app.tools.validation import (
    InvalidArguments,
    parse_arguments,
    single_address,
    validate_arguments,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "to": {"type": "string", "format": "email"},
        "cc": {"type": "array", "items": {"type": "string", "format": "email"}},
        "subject": {"type": "string"},
        "body": {"type": "string", "x-multiline": True},
        "amount": {"type": "number", "exclusiveMinimum": 0, "multipleOf": 0.01},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"label": {"type": "string"}, "qty": {"type": "number"}},
            },
        },
    },
}


def problems(arguments: dict[str, Any] | str) -> list[str]:
    with pytest.raises(InvalidArguments) as caught:
        validate_arguments(parse_arguments(arguments), SCHEMA)
    assert not caught.value.malformed_json
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize(
    "address",
    ["li.lei@example.com", "LI.Lei+receipts@Mail.Example.COM", "o'brien@example.co.uk"],
)
def test_one_plain_address_is_accepted(address: str) -> None:
    assert validate_arguments({"to": address}, SCHEMA) == {"to": address}


@pytest.mark.parametrize(
    "address",
    [
        "attacker@evil.com,li.lei@example.com",
        "attacker@evil.com;li.lei@example.com",
        "attacker@evil.com li.lei@example.com",
        "Li Lei <li.lei@example.com>",
        "<li.lei@example.com>",
        '"Li Lei" li.lei@example.com',
        "li.lei@evil.com@example.com",
        " li.lei@example.com",
        "li.lei@example.com\n",
        "li..lei@example.com",
        "li.lei@example",
        "li.lei@",
        "@example.com",
        "a" * 65 + "@example.com",
    ],
)
def test_anything_but_one_plain_address_is_refused(address: str) -> None:
    [problem, *_] = problems({"to": address})
    assert problem.startswith("to: expected exactly one plain email address")
    assert single_address(address) is None


def test_single_address_gives_the_domain_lower_cased() -> None:
    assert single_address("Li.Lei@Example.COM") == ("Li.Lei", "example.com")


def test_address_lists_are_checked_item_by_item() -> None:
    assert validate_arguments({"cc": ["a@example.com", "b@example.org"]}, SCHEMA)
    [problem] = problems({"cc": ["a@example.com", "b@example.org, c@evil.com"]})
    assert problem.startswith("cc.1: expected exactly one plain email address")


@pytest.mark.parametrize(
    ("subject", "what"),
    [
        ("Your order\r\nBcc: x@evil.com", "a carriage return (\\r) at character 10"),
        ("Your order\nBcc: x@evil.com", "a line break (\\n) at character 10"),
        ("Your order\x00", "control character U+0000 at character 10"),
        ("Your\x7forder", "control character U+007F at character 4"),
        ("Your\x1border", "control character U+001B at character 4"),
        ("Your\u2028order", "control character U+2028 at character 4"),
        ("Your\x85order", "control character U+0085 at character 4"),
    ],
)
def test_control_characters_are_refused_in_one_line_fields(subject: str, what: str) -> None:
    assert problems({"subject": subject}) == [
        f"subject: expected one line without control characters; received {what}"
    ]


def test_a_tab_is_text() -> None:
    assert validate_arguments({"subject": "a\tb"}, SCHEMA) == {"subject": "a\tb"}


def test_multi_line_fields_take_lf_and_crlf_but_no_other_controls() -> None:
    body = "Dear Li Lei,\r\nyour refund is on its way.\n\nRegards\n"
    assert validate_arguments({"body": body}, SCHEMA) == {"body": body}
    for bad, what in [
        ("a\rb", "a carriage return (\\r) at character 1"),
        ("a\n\x00", "control character U+0000 at character 2"),
        ("a\x0bb", "control character U+000B at character 1"),
    ]:
        assert problems({"body": bad}) == [
            "body: expected text without control characters (line breaks are allowed); "
            f"received {what}"
        ]


def test_nested_strings_are_checked_with_their_own_schema() -> None:
    [problem] = problems({"lines": [{"label": "ok"}, {"label": "two\nlines"}]})
    assert problem.startswith("lines.1.label: expected one line")


def test_the_hint_names_the_field() -> None:
    with pytest.raises(InvalidArguments) as caught:
        validate_arguments({"subject": "a\r\nBcc: x@evil.com"}, SCHEMA)
    assert "[subject: expected one line without control characters;" in caught.value.hint


@pytest.mark.parametrize(
    ("text", "spelled"),
    [
        ('{"amount": Infinity}', "Infinity"),
        ('{"amount": -Infinity}', "-Infinity"),
        ('{"amount": NaN}', "NaN"),
        ('{"amount": 1e999}', "Infinity"),  # too big for a float: json reads it as inf
        ('{"lines": [{"qty": NaN}]}', "NaN"),
    ],
)
def test_non_finite_numbers_in_json_text_are_refused(text: str, spelled: str) -> None:
    [problem] = problems(text)
    assert problem.endswith(f"expected a finite number; received {spelled}")


def test_non_finite_numbers_in_parsed_input_are_refused() -> None:
    assert problems({"amount": float("inf")}) == [
        "amount: expected a finite number; received Infinity"
    ]
    assert problems({"amount": float("nan")}) == ["amount: expected a finite number; received NaN"]


def test_a_number_written_as_text_is_never_coerced_to_infinity() -> None:
    [problem] = problems({"amount": "1e999"})
    assert problem.startswith("amount: expected number")
    assert validate_arguments({"amount": "12.50"}, SCHEMA) == {"amount": 12.5}


def test_a_number_too_long_to_read_is_malformed_json_not_a_crash() -> None:
    with pytest.raises(InvalidArguments) as caught:
        parse_arguments('{"amount": ' + "9" * 5000 + "}")
    assert caught.value.malformed_json
    assert "too many digits" in str(caught.value)
