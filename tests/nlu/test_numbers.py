"""Numbers in words."""

from __future__ import annotations

from decimal import Decimal

import pytest

from app.nlu.numbers import parse_cn_decimal, parse_cn_int, parse_decimal, parse_en_int


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("十", 10),
        ("十五", 15),
        ("二十", 20),
        ("八十九", 89),
        ("一百零二", 102),
        ("一百二十", 120),
        ("三百五", 350),
        ("两千五", 2500),
        ("一千零五十", 1050),
        ("五万", 50000),
        ("一万五", 15000),
        ("二〇二四", 2024),
        ("壹佰贰拾", 120),
        ("两百", 200),
    ],
)
def test_chinese_integers(text: str, expected: int) -> None:
    assert parse_cn_int(text) == expected


@pytest.mark.parametrize("text", ["", "一二百", "百百", "abc", "十x"])
def test_chinese_nonsense_is_refused(text: str) -> None:
    assert parse_cn_int(text) is None


def test_chinese_decimals() -> None:
    assert parse_cn_decimal("一百二十点五") == Decimal("120.5")
    assert parse_cn_decimal("三点一四") == Decimal("3.14")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("fifty", 50), ("twenty-five", 25), ("one hundred and twenty", 120), ("a thousand", 1000)],
)
def test_english_integers(text: str, expected: int) -> None:
    assert parse_en_int(text) == expected


def test_decimals_in_any_script() -> None:
    assert parse_decimal("1,200.50") == Decimal("1200.50")
    assert parse_decimal("一百") == Decimal(100)
    assert parse_decimal("ninety") == Decimal(90)
    assert parse_decimal("1,20") is None
