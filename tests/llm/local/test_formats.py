from __future__ import annotations

from app.llm.local.formats import money, when


def test_money_is_written_the_languages_way() -> None:
    assert money(948, "CNY", "zh") == "948.00元"
    assert money(948, "CNY", "en") == "CNY 948.00"
    assert money(1786.5, "CNY", "en") == "CNY 1,786.50"
    assert money(12.3, "USD", "zh") == "12.30 USD"


def test_dates_and_times_are_written_the_languages_way() -> None:
    stamp = "2024-05-21T21:15:00+08:00"
    assert when(stamp, "zh") == "2024年5月21日 21:15"
    assert when(stamp, "en") == "May 21, 2024, 9:15 PM"
    assert when("2024-05-23", "zh") == "2024年5月23日"
    assert when("2024-05-23", "en") == "May 23, 2024"
    assert when("2024-05-21T00:05:00Z", "en") == "May 21, 2024, 12:05 AM"
    assert when("tomorrow", "en") == "tomorrow"  # not a date: shown as it came
