"""Date expressions (absolute and relative, Chinese and English) to ISO `YYYY-MM-DD`.

`today` is always passed in, so tests and evaluation pin it. Conventions (see docs/nlu.md):
weeks run Monday to Sunday; a bare weekday ("周五", "Friday") is that day of the current week;
"下周五" and "next Friday" are the Friday of the following week; "this coming Friday" is the
first Friday after today; a month and day without a year are in today's year.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta

from app.nlu.numbers import parse_int
from app.text.fold import fold

_ZH_DAYS = {
    "今天": 0, "今日": 0, "今儿": 0, "今儿个": 0, "今晚": 0,
    "明天": 1, "明日": 1, "明儿": 1, "明儿个": 1, "明早": 1, "明晚": 1,
    "后天": 2, "大后天": 3,
    "昨天": -1, "昨日": -1, "昨儿": -1, "昨儿个": -1, "昨晚": -1,
    "前天": -2, "大前天": -3,
}  # fmt: skip
_EN_DAYS = {
    "today": 0, "tonight": 0, "tomorrow": 1, "tmr": 1, "tmrw": 1, "tomorow": 1, "tommorow": 1,
    "tommorrow": 1, "yesterday": -1, "yday": -1, "yesterdy": -1,
    "the day after tomorrow": 2, "day after tomorrow": 2,
    "the day before yesterday": -2, "day before yesterday": -2,
}  # fmt: skip
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_ZH_WEEKDAYS.update({str(i + 1): i for i in range(7)})
_ZH_WEEK_SHIFT = {"": 0, "这": 0, "本": 0, "这个": 0, "下": 1, "下个": 1, "下下": 2,
                  "下下个": 2, "上": -1, "上个": -1, "上上": -2, "上上个": -2}  # fmt: skip
_EN_WEEKDAYS = {
    "mon": 0, "monday": 0, "tue": 1, "tues": 1, "tuesday": 1, "wed": 2, "wednesday": 2,
    "weds": 2, "thu": 3, "thur": 3, "thurs": 3, "thursday": 3, "fri": 4, "friday": 4,
    "sat": 5, "saturday": 5, "sun": 6, "sunday": 6,
}  # fmt: skip
_EN_MONTHS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4,
    "april": 4, "may": 5, "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8,
    "sep": 9, "sept": 9, "september": 9, "oct": 10, "october": 10, "nov": 11,
    "november": 11, "dec": 12, "december": 12,
}  # fmt: skip

_CN_NUM = r"[0-9零〇一二两三四五六七八九十]+"
_EN_WD = "|".join(sorted(_EN_WEEKDAYS, key=len, reverse=True))
_EN_MON = "|".join(sorted(_EN_MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_EN_COUNT = r"[0-9]+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"


def _ymd(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _week_day(today: date, weeks: int, weekday: int) -> date:
    monday = today - timedelta(days=today.weekday())
    return monday + timedelta(weeks=weeks, days=weekday)


def _num(text: str | None) -> int | None:
    return None if text is None else parse_int(text)


def _zh(m: re.Match[str], today: date) -> date | None:
    g = m.groupdict()
    if g.get("rel") is not None:
        return today + timedelta(days=_ZH_DAYS[g["rel"]])
    if g.get("wd") is not None:
        return _week_day(today, _ZH_WEEK_SHIFT[g["shift"] or ""], _ZH_WEEKDAYS[g["wd"]])
    if g.get("n") is not None:
        n = _num(g["n"])
        if n is None:
            return None
        days = n * (7 if g["unit"] != "天" else 1)
        return today + timedelta(days=days if g["dir"] in ("后", "以后", "之后") else -days)
    year = _num(g.get("y")) if g.get("y") else today.year
    month = _num(g.get("m")) if g.get("m") else today.month
    day = _num(g.get("d"))
    if year is None or month is None or day is None:
        return None
    return _ymd(year, month, day)


def _en(m: re.Match[str], today: date) -> date | None:
    g = m.groupdict()
    if g.get("rel") is not None:
        return today + timedelta(days=_EN_DAYS[" ".join(g["rel"].split())])
    if g.get("wd") is not None:
        weekday = _EN_WEEKDAYS[g["wd"]]
        shift = " ".join((g["shift"] or "").split())
        if shift in ("coming", "this coming", "the coming"):
            ahead = (weekday - today.weekday() - 1) % 7 + 1
            return today + timedelta(days=ahead)
        weeks = {"next": 1, "last": -1, "past": -1}.get(shift, 0)
        return _week_day(today, weeks, weekday)
    month = _EN_MONTHS[g["mon"]] if g.get("mon") else today.month
    year = int(g["y"]) if g.get("y") else today.year
    return _ymd(year, month, int(g["d"]))


def _numeric(m: re.Match[str], today: date) -> date | None:
    g = m.groupdict()
    if g.get("y") is not None:
        return _ymd(int(g["y"]), int(g["m"]), int(g["d"]))
    first, second = int(g["a"]), int(g["b"])
    year = int(g["yy"]) if g.get("yy") else today.year
    if first > 12:  # only a day can be above 12: day/month order
        first, second = second, first
    return _ymd(year, first, second)


_Rule = tuple[re.Pattern[str], Callable[[re.Match[str], date], date | None]]
_RULES: list[_Rule] = [
    (re.compile(r"(?P<y>[0-9]{4})[-/.](?P<m>[0-9]{1,2})[-/.](?P<d>[0-9]{1,2})"), _numeric),
    (re.compile(r"(?P<a>[0-9]{1,2})[/.-](?P<b>[0-9]{1,2})(?:[/.-](?P<yy>[0-9]{4}))?"), _numeric),
    (re.compile("(?P<rel>" + "|".join(sorted(_ZH_DAYS, key=len, reverse=True)) + ")"), _zh),
    (
        re.compile(
            r"(?P<shift>下下个|上上个|下下|上上|这个|下个|上个|这|本|下|上)?(?:个)?"
            r"(?:周|星期|礼拜)(?P<wd>[一二三四五六日天1-7])"
        ),
        _zh,
    ),
    (
        re.compile(
            rf"(?P<n>{_CN_NUM})\s*(?:个)?(?P<unit>天|周|星期|礼拜)"
            r"(?P<dir>以后|之后|以前|之前|后|前)"
        ),
        _zh,
    ),
    (
        re.compile(
            rf"(?:(?P<y>[0-9]{{4}}|[零〇一二三四五六七八九]{{4}})\s*年\s*)?"
            rf"(?:(?P<m>{_CN_NUM})\s*月\s*)?(?P<d>{_CN_NUM})\s*[日号]"
        ),
        _zh,
    ),
    (
        re.compile(rf"(?:(?P<y>[0-9]{{4}})\s*年\s*)?(?P<m>{_CN_NUM})\s*月\s*(?P<d>{_CN_NUM})"),
        _zh,
    ),
    (
        re.compile(
            r"(?P<rel>(?:the\s+)?day\s+(?:after\s+tomorrow|before\s+yesterday)"
            r"|today|tonight|tomorrow|tmrw|tmr|tomorow|tommorow|tommorrow"
            r"|yesterday|yday|yesterdy)"
        ),
        _en,
    ),
    (
        re.compile(
            rf"(?:(?P<shift>next|last|past|this\s+coming|the\s+coming|coming|this)\s+)?"
            rf"(?P<wd>{_EN_WD})\.?"
        ),
        _en,
    ),
    (
        re.compile(
            rf"in\s+(?P<n>{_EN_COUNT})\s+(?P<unit>days?|weeks?)"
            rf"|(?P<n2>{_EN_COUNT})\s+(?P<unit2>days?|weeks?)\s+(?P<dir>ago|later|from\s+now)"
        ),
        lambda m, today: _en_count(m, today),
    ),
    (
        re.compile(
            rf"(?P<mon>{_EN_MON})\.?\s+(?:the\s+)?(?P<d>[0-9]{{1,2}}){_ORD}"
            rf"(?:,?\s+(?P<y>[0-9]{{4}}))?"
        ),
        _en,
    ),
    (
        re.compile(
            rf"(?:the\s+)?(?P<d>[0-9]{{1,2}}){_ORD}(?:\s+(?:of\s+)?(?P<mon>{_EN_MON})\.?"
            rf"(?:,?\s+(?P<y>[0-9]{{4}}))?)?"
        ),
        _en,
    ),
]


def _en_count(m: re.Match[str], today: date) -> date | None:
    n = _num(m.group("n") or m.group("n2"))
    unit = m.group("unit") or m.group("unit2")
    if n is None:
        return None
    days = n * (7 if unit.startswith("week") else 1)
    return today + timedelta(days=-days if m.group("dir") == "ago" else days)


_TRIM = " \t,.;:!?，。；：！？、的"

# For spotting candidates in running text (the CRF's gazetteer feature): the same patterns,
# not glued to a neighbouring Latin letter or digit.
SCAN_PATTERNS = [
    re.compile(rf"(?<![a-z0-9])(?:{pattern.pattern})(?![a-z0-9])") for pattern, _ in _RULES
]


def normalise_date(text: str, today: date) -> str | None:
    """ISO date for a whole date expression, or None if it is not one we can pin to a day."""
    cleaned = fold(text).strip(_TRIM)
    cleaned = re.sub(r"^(?:on|by|until|since)\s+", "", cleaned)
    for pattern, build in _RULES:
        m = pattern.fullmatch(cleaned)
        if m is not None:
            found = build(m, today)
            return found.isoformat() if found is not None else None
    return None
