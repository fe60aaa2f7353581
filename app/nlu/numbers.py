"""Numbers written out in words: Chinese numerals and English number words.

Shared by the date and amount normalisers. Each parser returns None for anything it does
not fully understand, so a caller can try the next reading.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

CN_DIGITS = {
    "零": 0, "〇": 0, "0": 0,
    "一": 1, "壹": 1, "幺": 1,
    "二": 2, "两": 2, "俩": 2, "贰": 2,
    "三": 3, "叁": 3, "仨": 3,
    "四": 4, "肆": 4,
    "五": 5, "伍": 5,
    "六": 6, "陆": 6,
    "七": 7, "柒": 7,
    "八": 8, "捌": 8,
    "九": 9, "玖": 9,
}  # fmt: skip
for _d in "123456789":
    CN_DIGITS[_d] = int(_d)
_SMALL_UNITS = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}
_BIG_UNITS = {"万": 10_000, "萬": 10_000, "亿": 100_000_000}
CN_NUMERAL_CHARS = frozenset(CN_DIGITS) | frozenset(_SMALL_UNITS) | frozenset(_BIG_UNITS)


def parse_cn_int(text: str) -> int | None:
    """ "一百二十" -> 120, "三百五" -> 350 (spoken short form), "一千零五十" -> 1050,
    "十五" -> 15, "二〇二四" -> 2024 (digit by digit)."""
    if not text or any(ch not in CN_NUMERAL_CHARS for ch in text):
        return None
    if all(ch in CN_DIGITS for ch in text):
        if len(text) == 1:
            return CN_DIGITS[text]
        return int("".join(str(CN_DIGITS[ch]) for ch in text))
    total = section = 0
    digit: int | None = None
    last_unit = last_big = 0
    zero_seen = False
    for ch in text:
        if ch in CN_DIGITS:
            if digit is not None and CN_DIGITS[ch] != 0:
                return None  # two digits in a row inside a unit number: "一二百"
            value = CN_DIGITS[ch]
            zero_seen = zero_seen or value == 0
            digit = None if value == 0 else value
        elif ch in _SMALL_UNITS:
            unit = _SMALL_UNITS[ch]
            if last_unit and unit >= last_unit and digit is None:
                return None
            section += (1 if digit is None else digit) * unit
            digit, last_unit, zero_seen = None, unit, False
        else:
            section += digit or 0
            last_big = _BIG_UNITS[ch]
            total += (section or 1) * last_big
            section, digit, last_unit, zero_seen = 0, None, 0, False
    if digit is not None:
        # "三百五" means 350 and "一万五" 15000: a trailing digit right after a unit counts
        # in the next unit down.
        unit = last_unit or last_big
        section += digit * (unit // 10) if unit >= 100 and not zero_seen else digit
    return total + section


def parse_cn_decimal(text: str) -> Decimal | None:
    """ "一百二十点五" -> 120.5; also plain integers."""
    whole, _, frac = text.partition("点")
    number = parse_cn_int(whole)
    if number is None:
        return None
    if not frac:
        return Decimal(number)
    if any(ch not in CN_DIGITS for ch in frac):
        return None
    return Decimal(f"{number}.{''.join(str(CN_DIGITS[ch]) for ch in frac)}")


_EN_ONES = {
    "zero": 0, "one": 1, "a": 1, "an": 1, "two": 2, "three": 3, "four": 4, "five": 5,
    "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_EN_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
_EN_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
EN_NUMBER_WORDS = frozenset(_EN_ONES) | frozenset(_EN_TENS) | frozenset(_EN_SCALES)


def parse_en_int(text: str) -> int | None:
    """ "one hundred and twenty" -> 120, "twenty-five" -> 25, "a thousand" -> 1000."""
    words = [w for w in re.split(r"[\s-]+", text.strip()) if w and w != "and"]
    if not words:
        return None
    total = current = 0
    for word in words:
        if word in _EN_ONES:
            current += _EN_ONES[word]
        elif word in _EN_TENS:
            current += _EN_TENS[word]
        elif word == "hundred":
            current = (current or 1) * 100
        elif word in _EN_SCALES:
            total += (current or 1) * _EN_SCALES[word]
            current = 0
        else:
            return None
    return total + current


def parse_int(text: str) -> int | None:
    """Arabic digits, Chinese numerals or English words."""
    text = text.strip()
    if text.isdigit() and text.isascii():
        return int(text)
    return parse_cn_int(text) if any(ch in CN_NUMERAL_CHARS for ch in text) else parse_en_int(text)


def parse_decimal(text: str) -> Decimal | None:
    """Arabic decimals with optional thousands separators, Chinese or English numerals."""
    text = text.strip()
    if re.fullmatch(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?", text):
        try:
            return Decimal(text.replace(",", ""))
        except InvalidOperation:  # pragma: no cover - the pattern admits only valid decimals
            return None
    if text and all(ch in CN_NUMERAL_CHARS or ch == "点" for ch in text):
        return parse_cn_decimal(text)
    value = parse_en_int(text)
    return None if value is None else Decimal(value)
