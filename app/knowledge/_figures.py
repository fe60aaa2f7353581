"""Figures as written, made comparable: numerals in three scripts, units of time, currencies.

The grounding check (app/knowledge/grounding.py) finds figures with its patterns and asks this
module what they are worth: "十五", "15", "fifteen" and "１５" are all 15; "24 hours" and "1 day"
are one duration, "7 working days" another (a working day is not a calendar day).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

# -- Numerals -------------------------------------------------------------------------------

CN_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6}
CN_DIGITS |= {"七": 7, "八": 8, "九": 9}
_CN_PLACES = {"十": 10, "百": 100, "千": 1000}
CN_NUMERAL = "[零〇一二两三四五六七八九十百千万]+"

_EN_UNITS = "zero one two three four five six seven eight nine ten eleven twelve thirteen".split()
_EN_UNITS += "fourteen fifteen sixteen seventeen eighteen nineteen".split()
_EN_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60}
_EN_TENS |= {"seventy": 70, "eighty": 80, "ninety": 90}
_EN_ONES = "one|two|three|four|five|six|seven|eight|nine"
EN_NUMERAL = (
    rf"\b(?:(?:{'|'.join(_EN_TENS)})(?:[- ](?:{_EN_ONES}))?|(?:a|one) hundred"
    rf"|{'|'.join(sorted(_EN_UNITS, key=len, reverse=True))})\b"
)


def _chinese(text: str) -> Decimal | None:
    if not any(ch in _CN_PLACES or ch == "万" for ch in text):
        # 二〇二七: digit by digit
        return Decimal("".join(str(CN_DIGITS[ch]) for ch in text)) if text else None
    total = section = digit = 0
    for ch in text:
        if ch in CN_DIGITS:
            digit = CN_DIGITS[ch]
        elif ch in _CN_PLACES:
            section += (digit or 1) * _CN_PLACES[ch]
            digit = 0
        else:  # 万
            total += (section + digit or 1) * 10000
            section = digit = 0
    return Decimal(total + section + digit)


def _english(text: str) -> Decimal:
    words = text.replace("-", " ").split()
    if words[-1] == "hundred":
        return Decimal(100)
    value = _EN_TENS.get(words[0])
    if value is None:
        return Decimal(_EN_UNITS.index(words[0]))
    return Decimal(value + (_EN_UNITS.index(words[1]) if len(words) > 1 else 0))


def value_of(numeral: str) -> Decimal | None:
    """What a numeral is worth: "1,000", "1.5万", "两千", "二〇二七", "twenty-four", "半"."""
    numeral = numeral.strip()
    if not numeral:
        return None
    if numeral == "半":
        return Decimal("0.5")
    if numeral[0].isdigit():
        multiplier = {"万": 10000, "千": 1000}.get(numeral[-1], 1)
        try:
            return Decimal(numeral.rstrip("万千").replace(",", "")) * multiplier
        except InvalidOperation:
            return None
    if numeral[0] in CN_DIGITS or numeral[0] in _CN_PLACES or numeral[0] == "万":
        return _chinese(numeral)
    return _english(numeral)


def plain(value: Decimal) -> str:
    """1000, 1.2, 109 (never 1E+3 nor 109.00)."""
    text = format(value.normalize(), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


# -- Durations ------------------------------------------------------------------------------

# Each unit as (scale, factor): units of one scale compare with each other ("24 hours" is
# "1 day", "12 months" is "1 year"); units of different scales never do. Months are not days
# (28 to 31 of them), and a working day is not a calendar day: "3 days" is not "3 working days".
_MINUTE, _MONTH, _WORKING_DAY = "minute", "month", "working day"
DURATION_UNITS = {
    "minute": (_MINUTE, 1),
    "hour": (_MINUTE, 60),
    "day": (_MINUTE, 1440),
    "week": (_MINUTE, 10080),
    "month": (_MONTH, 1),
    "year": (_MONTH, 12),
    "working day": (_WORKING_DAY, 1),
}
# The largest unit of each scale that states every total in whole numbers names it (the last,
# of size 1, states any).
_SHOWN = {
    _MINUTE: (("day", 1440), ("hour", 60), ("minute", 1)),  # "14 days", never "2 weeks"
    _MONTH: (("year", 12), ("month", 1)),
    _WORKING_DAY: (("working day", 1),),
}


def duration(values: list[Decimal], unit: str) -> str:
    """One wording for a duration or a range of them: ([3, 7], "working day") -> "3-7 working
    days"; ([24], "hour") -> "1 day"; ([2], "week") -> "14 days"."""
    scale, factor = DURATION_UNITS[unit]
    totals = [value * factor for value in values]
    name, size = next(
        (name, size)
        for name, size in _SHOWN[scale]
        if size == 1 or all(total % size == 0 for total in totals)
    )
    shown = [total / size for total in totals]
    plural = "" if shown == [1] else "s"
    return "-".join(plain(value) for value in shown) + f" {name}{plural}"
