"""Dates to ISO against a fixed today: Wednesday 2024-05-22 (its week runs 20..26 May)."""

from __future__ import annotations

from datetime import date

import pytest

from app.nlu.dates import normalise_date

TODAY = date(2024, 5, 22)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("今天", "2024-05-22"),
        ("明天", "2024-05-23"),
        ("明儿", "2024-05-23"),
        ("后天", "2024-05-24"),
        ("大后天", "2024-05-25"),
        ("昨天", "2024-05-21"),
        ("前天", "2024-05-20"),
        ("大前天", "2024-05-19"),
        ("下周一", "2024-05-27"),
        ("下个星期三", "2024-05-29"),
        ("下下周二", "2024-06-04"),
        ("上礼拜五", "2024-05-17"),
        ("这周日", "2024-05-26"),
        ("周五", "2024-05-24"),
        ("星期天", "2024-05-26"),
        ("3天后", "2024-05-25"),
        ("三天以后", "2024-05-25"),
        ("十天之前", "2024-05-12"),
        ("两周后", "2024-06-05"),
        ("5月20日", "2024-05-20"),
        ("五月二十号", "2024-05-20"),
        ("5月20", "2024-05-20"),
        ("2024年5月20日", "2024-05-20"),
        ("二〇二四年五月二十日", "2024-05-20"),
        ("20号", "2024-05-20"),
        ("2024-05-20", "2024-05-20"),
        ("2024/5/20", "2024-05-20"),
        ("5/20", "2024-05-20"),
    ],
)
def test_chinese_dates(text: str, expected: str) -> None:
    assert normalise_date(text, TODAY) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("today", "2024-05-22"),
        ("Tomorrow", "2024-05-23"),
        ("tmrw", "2024-05-23"),
        ("yesterday", "2024-05-21"),
        ("the day after tomorrow", "2024-05-24"),
        ("the day before yesterday", "2024-05-20"),
        ("next Friday", "2024-05-31"),
        ("next fri", "2024-05-31"),
        ("last Tuesday", "2024-05-14"),
        ("this Friday", "2024-05-24"),
        ("on Monday", "2024-05-20"),
        ("this coming Monday", "2024-05-27"),
        ("this coming Thursday", "2024-05-23"),
        ("in 3 days", "2024-05-25"),
        ("in two weeks", "2024-06-05"),
        ("two days ago", "2024-05-20"),
        ("a week ago", "2024-05-15"),
        ("May 20", "2024-05-20"),
        ("May 20th, 2024", "2024-05-20"),
        ("20 May", "2024-05-20"),
        ("the 20th of May", "2024-05-20"),
        ("the 3rd", "2024-05-03"),
        ("05/20/2024", "2024-05-20"),
        ("25/12/2024", "2024-12-25"),
        ("Dec. 1", "2024-12-01"),
    ],
)
def test_english_dates(text: str, expected: str) -> None:
    assert normalise_date(text, TODAY) == expected


@pytest.mark.parametrize("text", ["June 31", "2月30日", "next week", "soon", "上个月", "13/13"])
def test_what_is_not_one_day_is_refused(text: str) -> None:
    assert normalise_date(text, TODAY) is None


def test_relative_dates_follow_the_injected_today() -> None:
    sunday = date(2024, 12, 29)
    assert normalise_date("明天", sunday) == "2024-12-30"
    assert normalise_date("下周一", sunday) == "2024-12-30"
    assert normalise_date("周一", sunday) == "2024-12-23"
    assert normalise_date("in 5 days", sunday) == "2025-01-03"
    assert normalise_date("yesterday", date(2024, 3, 1)) == "2024-02-29"
