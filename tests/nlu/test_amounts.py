"""Money amounts to a two-place decimal string."""

from __future__ import annotations

import pytest

from app.nlu.amounts import normalise_amount


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("120元", "120.00"),
        ("120 yuan", "120.00"),
        ("120块钱", "120.00"),
        ("¥120", "120.00"),
        ("￥120.5", "120.50"),
        ("$15.50", "15.50"),
        ("RMB 300", "300.00"),
        ("300RMB", "300.00"),
        ("人民币200元", "200.00"),
        ("USD 40", "40.00"),
        ("1,200元", "1200.00"),
        ("3千", "3000.00"),
        ("1.5万", "15000.00"),
        ("2k", "2000.00"),
        ("89", "89.00"),
        ("一百二十块", "120.00"),
        ("三百五十元", "350.00"),
        ("三百五", "350.00"),
        ("两千五百元", "2500.00"),
        ("一千零五十块", "1050.00"),
        ("八十九块九", "89.90"),
        ("5块5毛", "5.50"),
        ("十块零五分", "10.05"),
        ("99.9块", "99.90"),
        ("fifty dollars", "50.00"),
        ("fifty bucks", "50.00"),
        ("one hundred and twenty yuan", "120.00"),
        ("twenty-five dollars", "25.00"),
    ],
)
def test_amounts(text: str, expected: str) -> None:
    assert normalise_amount(text) == expected


@pytest.mark.parametrize("text", ["0元", "abc", "", "元", "-5元"])
def test_what_is_not_a_positive_amount_is_refused(text: str) -> None:
    assert normalise_amount(text) is None
