"""Phones, emails, order ids and tracking numbers: normalised, or refused when invalid."""

from __future__ import annotations

from datetime import date

import pytest

from app.nlu.normalise import (
    normalise,
    normalise_email,
    normalise_order_id,
    normalise_phone,
    normalise_product,
    normalise_tracking,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("13800138000", "13800138000"),
        ("138 0013 8000", "13800138000"),
        ("138-0013-8000", "13800138000"),
        ("+86 138 0013 8000", "13800138000"),
        ("+86-138-0013-8000", "13800138000"),
        ("0086 13800138000", "13800138000"),
        ("８613800138000", "13800138000"),
        ("+44 7700 900123", "+447700900123"),
        ("+1 (415) 555-0123", "+14155550123"),
        ("0049 151 23456789", "+4915123456789"),
    ],
)
def test_phones(text: str, expected: str) -> None:
    assert normalise_phone(text) == expected


@pytest.mark.parametrize("text", ["12345", "12800138000", "010-12345678", "+0123456789", "+1234"])
def test_invalid_phones_are_refused(text: str) -> None:
    assert normalise_phone(text) is None


def test_order_ids_are_twelve_digits() -> None:
    assert normalise_order_id("202405201234") == "202405201234"
    assert normalise_order_id("2024 0520 1234") == "202405201234"
    assert normalise_order_id("２０２４０５２０１２３４") == "202405201234"
    assert normalise_order_id("20240520123") is None
    assert normalise_order_id("2024052012345") is None


def test_tracking_numbers_follow_the_carrier_pattern() -> None:
    assert normalise_tracking("SF123456789CN") == "SF123456789CN"
    assert normalise_tracking("sf1234567890") == "SF1234567890"
    assert normalise_tracking("JD 0012 3456 78") == "JD0012345678"
    assert normalise_tracking("S123456789") is None
    assert normalise_tracking("SF12345678") is None
    assert normalise_tracking("SF1234567890123") is None


def test_emails_are_lower_cased_and_checked() -> None:
    assert normalise_email("Li.Lei@Example.com") == "li.lei@example.com"
    assert normalise_email("li.lei@example.com。") == "li.lei@example.com"
    assert normalise_email("li.lei@example") is None
    assert normalise_email("not an email") is None


def test_products_keep_their_words_without_edge_punctuation() -> None:
    assert normalise_product(" 蓝牙耳机， ") == "蓝牙耳机"
    assert normalise_product("wireless   earbuds") == "wireless earbuds"
    assert normalise_product("，。") is None


def test_dispatch_by_slot_name() -> None:
    today = date(2024, 5, 22)
    assert normalise("date", "明天", today) == "2024-05-23"
    assert normalise("amount", "120元", today) == "120.00"
    with pytest.raises(ValueError, match="unknown slot"):
        normalise("colour", "red", today)


def test_pronouns_and_tell_me_verbs_are_never_products() -> None:
    for text in ("告诉", "告诉我", "通知", "我", "me", "Tell me"):
        assert normalise_product(text) is None, text
    assert normalise_product("通讯录同步器") == "通讯录同步器"  # a product is still one
