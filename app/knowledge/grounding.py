"""The grounding check: which figures of a reply no source states.

A reply that answers from knowledge may state a figure (a number, an amount, a duration, a date,
a time of day, a percentage, a phone number, a URL, an email address) only if a retrieved
passage, a tool result or the customer's own words state it too. `claims` finds the figures of
a text with a value that is equal for equal facts across wordings and languages ("七天" and
"7 days", "CNY 99", "¥99" and "99元", "400 820 1234" and "400-820-1234"); `unsupported` lists
the reply's claims that no source supports.

What is a claim, and what supports it:
- Digits are claims wherever they stand, except a Markdown list's numbering ("1. ", "2) ") and
  a citation mark ("[1]"). Number words ("seven", "七", "两") are claims only with a unit ("seven
  days", "两个工作日"), or, in Chinese, as a numeral of two characters or more with a place ("十五",
  "一百"): a bare "one" or "一" is a word ("one moment", "一下"), not a figure.
- Figures inside a URL, an email address or an identifier (letters with four digits or more:
  "SF123456789CN") belong to it: the identifier is one claim, of kind number.
- A duration must match in value and scale: "24 hours" is "1 day", "12 months" is "1 year", but
  "3 days" is not "3 working days" (nor the other way), and months are not days. A range
  ("3-7 working days", "3至7个工作日", "3 to 7") is one claim; a source's range also supports
  either of its ends ("up to 7 working days"), a reply's range needs the same range.
- A bare number in a source (a tool result's `"amount": 109.0`, the customer's "109") supports
  the same number in the reply, and an amount of it in any currency; a number in a source that
  has a unit ("7 days") supports the bare number "7" but not "7 hours" nor "CNY 7".
- A date with a year needs that year ("2027年1月20日" is not supported by "1月20日"); one without
  a year is supported by that day in any year. "24/7" is a claim like any figure: supported
  only where a source says it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Literal

from app.knowledge._figures import (
    CN_DIGITS,
    CN_NUMERAL,
    DURATION_UNITS,
    EN_NUMERAL,
    duration,
    plain,
    value_of,
)
from app.text.fold import fold

Kind = Literal[
    "number", "amount", "duration", "date", "time", "percentage", "phone", "url", "email"
]


@dataclass(frozen=True)
class Claim:
    kind: Kind
    raw: str  # as the text wrote it
    value: str  # the same for the same fact: "7 working days", "CNY 99", "2027-01-20"
    start: int
    end: int
    # values of the same kind it states too: a range's ends, a dated day without its year
    also: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()  # the numbers in it, as plain numbers ("24" of "24 hours")


# -- Patterns, on folded text (half-width, lower case) -------------------------------------

_DIGITS = r"\d+(?:,\d{3})*(?:\.\d+)?"
_D = rf"(?<![a-z0-9_.第]){_DIGITS}(?:[万千](?![a-z]))?"
# A Chinese numeral starts where no numeral character stands before it (nor 第: 第二天 is
# "the next day"); like _D's look-behind, this keeps a long run from being tried at every place.
_CN = rf"(?<![第{CN_NUMERAL[1:-2]}]){CN_NUMERAL}"
_NUM = rf"(?:{_D}|{_CN}|{EN_NUMERAL})"
_SEP = r"(?:\s*[-–—~至到]\s*|\s+(?:to|and)\s+)"
_DATE_SEP = r"(?:\s*[-–—~至到]\s*|\s+to\s+)"
_ZH_SMALL = r"(?:\d{1,2}|[一二三四五六七八九十]{1,3})"
_YEAR = r"(?:19|20)\d{2}"
_MONTH = (  # a full name, or an abbreviation with its dot ("Feb. 3"; "in May." keeps its own)
    r"(?P<mon>(?:january|february|march|april|may|june|july|august|september|october|november"
    r"|december)\b|(?:jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\b\.?)"
)
_ORDINAL = r"(?:st|nd|rd|th)?"
_URL_CHARS = r"[a-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]"
_TLDS = "com|cn|net|org|io|co|info|biz|gov|edu|hk|tw|me|app|dev|ai|shop"

_EMAIL = re.compile(r"(?<![a-z0-9._%+-])[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}")
_URL = re.compile(
    rf"(?:https?://|www\.)[a-z0-9.-]+(?::\d+)?(?:/{_URL_CHARS}*)?"
    rf"|(?<![a-z0-9@.-])(?:[a-z0-9-]+\.)+(?:{_TLDS})\b(?:/{_URL_CHARS}*)?"
)
_ISO_DATE = re.compile(
    rf"(?<![0-9])(?P<y>{_YEAR})[-/.](?P<m>\d{{1,2}})[-/.](?P<d>\d{{1,2}})(?![0-9])"
)
_ZH_DATE = re.compile(
    rf"(?:(?P<y>{_YEAR}|[〇零一二三四五六七八九]{{4}})年)?(?P<m>{_ZH_SMALL})月(?P<d>{_ZH_SMALL})[日号]"
    rf"(?:{_DATE_SEP}(?:(?P<m2>{_ZH_SMALL})月)?(?P<d2>{_ZH_SMALL})[日号])?"
)
_ZH_MONTH = re.compile(rf"(?P<y>{_YEAR})年(?P<m>{_ZH_SMALL})月")
_EN_DAY_MONTH = re.compile(
    rf"\b(?P<d>\d{{1,2}}){_ORDINAL}(?:{_DATE_SEP}(?P<d2>\d{{1,2}}){_ORDINAL})?\s+(?:of\s+)?{_MONTH}"
    rf"(?:,?\s+(?P<y>{_YEAR})\b)?"
)
_EN_MONTH_DAY = re.compile(
    rf"\b{_MONTH}\s+(?P<d>\d{{1,2}}){_ORDINAL}(?:{_DATE_SEP}(?P<d2>\d{{1,2}}){_ORDINAL})?\b"
    rf"(?:,?\s+(?P<y>{_YEAR})\b)?"
)
_EN_MONTH_YEAR = re.compile(rf"\b{_MONTH}\s+(?P<y>{_YEAR})\b")
_PHONE = re.compile(
    r"(?<![0-9a-z+])(?:(?P<cc>(?:\+|00)86)[ -]?)?"
    r"(?:[48]00[ -]?\d{3}[ -]?\d{4}"  # a hotline
    r"|1[3-9]\d[ -]?\d{4}[ -]?\d{4}"  # a mobile
    r"|(?:\(0\d{2,3}\)|0\d{2,3})[ -]?\d{7,8})"  # a landline with its area code
    r"(?![0-9])"
    r"|\+(?!86)\d{1,3}[ -]?\d{1,4}(?:[ -]?\d{2,4}){2,4}(?![0-9])"
)
_CLOCK = re.compile(
    r"(?<![0-9])(?<![0-9]:)(?P<h>\d{1,2}):(?P<m>\d{2})(?::\d{2}(?:\.\d+)?)?(?![0-9])"
    r"(?:\s*(?P<ap>[ap])(?:m\b|\.m\.))?"
)
_AM_PM = re.compile(r"(?<![0-9.:])(?P<h>\d{1,2})(?:\.(?P<m>\d{2}))?\s*(?P<ap>[ap])(?:m\b|\.m\.)")
_ZH_CLOCK = re.compile(
    rf"(?P<q>凌晨|早上|早晨|上午|中午|下午|傍晚|晚上|夜里|夜间)?(?P<h>\d{{1,2}}|{_CN})点"
    rf"(?:(?P<half>半)|(?P<m>\d{{1,2}}|{_CN})分)?"
)
_FRACTION = re.compile(r"(?<![0-9/])\d+/\d+(?![0-9/])")
_PERCENT = re.compile(rf"(?P<a>{_NUM})(?:{_SEP}(?P<b>{_NUM}))?\s*(?:%|percent\b|per cent\b)")
_ZH_PERCENT = re.compile(rf"百分之(?P<a>{_NUM})(?:{_SEP}(?:百分之)?(?P<b>{_NUM}))?")
_CURRENCY = r"cny|rmb|us\$|hk\$|usd|hkd|eur|¥|\$|€"
_AMOUNT_BEFORE = re.compile(
    rf"(?<![a-z])(?P<c>{_CURRENCY})\s*(?P<a>{_DIGITS}[万千]?)"
    rf"(?:{_SEP}(?:(?:{_CURRENCY})\s*)?(?P<b>{_DIGITS}[万千]?))?"
)
_AMOUNT_AFTER = re.compile(
    rf"(?P<a>{_NUM})(?:{_SEP}(?P<b>{_NUM}))?\s*"
    r"(?P<c>元|块钱|块|人民币|美元|港元|港币|欧元|(?:yuan|rmb|cny|usd|dollars?|hkd|eur|euros?)\b)"
)
_EN_UNIT = (
    r"(?P<en>(?:working|business)[ -]days?|work ?days?|calendar days?|days?|hours?|hrs?|h"
    r"|minutes?|mins?|weeks?|months?|years?|yrs?)\b"
)
_ZH_UNIT = (
    r"(?P<zh>个?工作日|个?自然日|天|日(?=内|之内|以内|后|之后|以后|起|左右)|个?小时|个?钟头|分钟"
    r"|周|个?星期|个?礼拜|个月|年)"
)
_DURATION = re.compile(
    rf"(?P<a>{_NUM})(?:{_SEP}(?P<b>{_NUM}))?(?:\s*|-)(?:{_EN_UNIT}|{_ZH_UNIT})"
    r"|(?P<half>半)个?(?P<hu>小时|钟头|天|年|月)|(?P<hh>half an hour)"
)
_IDENTIFIER = re.compile(
    r"(?<![a-z0-9])(?=[a-z0-9-]*[a-z])(?=(?:[a-z-]*[0-9]){4})[a-z0-9]+(?:-[a-z0-9]+)*(?![a-z0-9])"
)
_BARE = re.compile(rf"(?<![a-z0-9_.第]){_DIGITS}(?:[万千](?![a-z]))?(?:st|nd|rd|th)?(?![a-z0-9])")
_ZH_BARE = re.compile(
    rf"(?<![第{CN_NUMERAL[1:-2]}])[一二两三四五六七八九十]{CN_NUMERAL[:-1]}*(?!分)"  # see _CN
)
_NOT_CLAIMS = re.compile(  # a list's numbering, a citation mark, a step of instructions
    r"(?m)^[ \t]*(?:[-*+][ \t]+)?\d{1,3}(?:[.)][ \t]|、)|\[\d{1,3}\]|【\d{1,3}】"
    r"|\bstep \d{1,2}\b|第[一二三四五六七八九十\d]{1,3}步"
)

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_CURRENCIES = {"usd": "USD", "$": "USD", "us$": "USD", "dollar": "USD", "dollars": "USD"}
_CURRENCIES |= {"美元": "USD", "hkd": "HKD", "hk$": "HKD", "港元": "HKD", "港币": "HKD"}
_CURRENCIES |= {"eur": "EUR", "€": "EUR", "euro": "EUR", "euros": "EUR", "欧元": "EUR"}
_EVENING = ("下午", "傍晚", "晚上", "夜里", "夜间")


# -- Reading one match ------------------------------------------------------------------------


def _claim(kind: Kind, m: re.Match[str], text: str, value: str, **more: tuple[str, ...]) -> Claim:
    return Claim(kind, text[m.start() : m.end()], value, m.start(), m.end(), **more)


def _numbers(m: re.Match[str]) -> list[Decimal] | None:
    """The number of group `a` and, for a range, of `b`; None when one does not read."""
    values = [value_of(m["a"])] + ([value_of(m["b"])] if m["b"] else [])
    return None if any(v is None for v in values) else values  # type: ignore[return-value]


def _ranged(kind: Kind, m: re.Match[str], text: str, show: Callable[[list[Decimal]], str]) -> Claim:
    values = _numbers(m) or []
    ends = tuple(show([v]) for v in values) if len(values) > 1 else ()
    figures = tuple(plain(v) for v in values)
    return _claim(kind, m, text, show(values), also=ends, figures=figures)


def _email(m: re.Match[str], text: str) -> list[Claim]:
    return [_claim("email", m, text, m[0])]


def _url(m: re.Match[str], text: str) -> list[Claim]:
    raw = m[0].rstrip(".,;:!?)]'\"")
    value = re.sub(r"^(?:https?://)?(?:www\.)?", "", raw).rstrip("/")
    end = m.start() + len(raw)
    return [Claim("url", text[m.start() : end], value, m.start(), end)]


def _small(numeral: str) -> int:
    value = value_of(numeral)
    return int(value) if value is not None else 0


def _dates(m: re.Match[str], text: str, month: int | None = None) -> list[Claim] | None:
    groups = m.groupdict()
    if month is None:
        month = _small(m["m"])
    year = _small(groups["y"]) if groups.get("y") else None
    days = [(month, _small(m["d"]))]
    if groups.get("d2"):
        days.append((_small(groups["m2"]) if groups.get("m2") else month, _small(m["d2"])))
    if not all(1 <= mo <= 12 and 1 <= d <= 31 for mo, d in days):
        return None
    out = []
    for mo, d in days:
        figures = (str(mo), str(d)) + ((str(year),) if year else ())
        day = f"--{mo:02d}-{d:02d}"
        if year:
            value, also = f"{year}-{mo:02d}-{d:02d}", (day, f"{year}-{mo:02d}")
            out.append(_claim("date", m, text, value, also=also, figures=figures))
        else:
            out.append(_claim("date", m, text, day, figures=figures))
    return out


def _en_dates(m: re.Match[str], text: str) -> list[Claim] | None:
    return _dates(m, text, _MONTHS.index(m["mon"][:3]) + 1)


def _year_month(m: re.Match[str], text: str) -> list[Claim] | None:
    month = _MONTHS.index(m["mon"][:3]) + 1 if m.groupdict().get("mon") else _small(m["m"])
    if not 1 <= month <= 12:
        return None
    figures = (m["y"], str(month))
    return [_claim("date", m, text, f"{m['y']}-{month:02d}", figures=figures)]


def _phone(m: re.Match[str], text: str) -> list[Claim]:
    digits = re.sub(r"\D", "", m[0])
    if m["cc"]:
        digits = digits.removeprefix("00").removeprefix("86")
    return [_claim("phone", m, text, digits, figures=(digits,))]


def _time(hour: int, minute: int, m: re.Match[str], text: str) -> list[Claim] | None:
    if not (0 <= hour <= 24 and 0 <= minute < 60):
        return None
    return [_claim("time", m, text, f"{hour:02d}:{minute:02d}", figures=(str(hour),))]


def _clock(m: re.Match[str], text: str) -> list[Claim] | None:
    hour, minute = int(m["h"]), int(m["m"] or 0)
    if m["ap"]:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if m["ap"] == "p" else 0)
    return _time(hour, minute, m, text)


def _zh_clock(m: re.Match[str], text: str) -> list[Claim] | None:
    if not m["h"][0].isdigit() and not m["q"]:
        return None  # 一点 is "a little" unless a time of day says otherwise
    hour = _small(m["h"])
    minute = 30 if m["half"] else _small(m["m"]) if m["m"] else 0
    if (m["q"] in _EVENING and hour < 12) or (m["q"] == "中午" and hour < 6):
        hour += 12
    return _time(hour, minute, m, text)


def _fraction(m: re.Match[str], text: str) -> list[Claim]:
    return [_claim("number", m, text, m[0], figures=(m[0],))]


def _percent(m: re.Match[str], text: str) -> list[Claim] | None:
    if _numbers(m) is None:
        return None
    return [_ranged("percentage", m, text, lambda vs: "-".join(map(plain, vs)) + "%")]


def _amount(m: re.Match[str], text: str) -> list[Claim] | None:
    currency = _CURRENCIES.get(m["c"], "CNY")
    if _numbers(m) is None or (m["c"].startswith("块") and not m["a"][0].isdigit()):
        return None  # 一块手表 is one watch
    return [_ranged("amount", m, text, lambda vs: f"{currency} " + "-".join(map(plain, vs)))]


def _unit(word: str) -> str:
    word = word.lstrip("个").replace("-", " ")
    for unit, starts in (
        ("working day", ("work", "business", "工作日")),
        ("day", ("day", "calendar", "天", "日", "自然日")),
        ("hour", ("hour", "hr", "h", "小时", "钟头")),
        ("minute", ("min", "分钟")),
        ("week", ("week", "周", "星期", "礼拜")),
        ("month", ("month", "月")),
    ):
        if word.startswith(starts):
            return unit
    return "year"


def _duration(m: re.Match[str], text: str) -> list[Claim] | None:
    if m["hh"]:
        return [_claim("duration", m, text, "30 minutes", figures=("30",))]
    if m["half"]:
        unit = _unit(m["hu"])
        return [_claim("duration", m, text, duration([Decimal("0.5")], unit), figures=("0.5",))]
    values = _numbers(m)
    unit = _unit(m["en"] or m["zh"])
    if values is None or unit not in DURATION_UNITS:
        return None
    if m["zh"] == "年" and values[0] >= 1900 and values[0] == int(values[0]):
        return None  # 2027年 is a year, not 2027 years
    return [_ranged("duration", m, text, lambda vs: duration(vs, unit))]


def _identifier(m: re.Match[str], text: str) -> list[Claim]:
    return [_claim("number", m, text, m[0].upper())]


def _bare(m: re.Match[str], text: str) -> list[Claim] | None:
    value = value_of(re.sub(r"(st|nd|rd|th)$", "", m[0]))
    if value is None:
        return None
    return [_claim("number", m, text, plain(value), figures=(plain(value),))]


def _zh_bare(m: re.Match[str], text: str) -> list[Claim] | None:
    numeral = m[0]
    if len(numeral) < 2 or not any(ch in "十百千万" for ch in numeral):
        return None  # 一下, 一一, 十全十美: words, not figures
    if numeral[0] not in CN_DIGITS and numeral[0] != "十":
        return None
    return _bare(m, text)


def _nothing(m: re.Match[str], text: str) -> list[Claim]:
    return []


# In order: what an earlier pattern took (a URL's digits, a date's day) no later one sees.
_PASSES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str], str], list[Claim] | None]], ...] = (
    (_NOT_CLAIMS, _nothing),
    (_EMAIL, _email),
    (_URL, _url),
    (_ISO_DATE, _dates),
    (_ZH_DATE, _dates),
    (_EN_DAY_MONTH, _en_dates),
    (_EN_MONTH_DAY, _en_dates),
    (_ZH_MONTH, _year_month),
    (_EN_MONTH_YEAR, _year_month),
    (_PHONE, _phone),
    (_CLOCK, _clock),
    (_AM_PM, _clock),
    (_ZH_CLOCK, _zh_clock),
    (_FRACTION, _fraction),
    (_PERCENT, _percent),
    (_ZH_PERCENT, _percent),
    (_AMOUNT_BEFORE, _amount),
    (_AMOUNT_AFTER, _amount),
    (_DURATION, _duration),
    (_IDENTIFIER, _identifier),
    (_BARE, _bare),
    (_ZH_BARE, _zh_bare),
)


def claims(text: str) -> list[Claim]:
    """The figures `text` states, in reading order."""
    found: list[Claim] = []
    seen = fold(text)
    for pattern, read in _PASSES:
        taken: list[tuple[int, int]] = []
        for m in pattern.finditer(seen):
            got = read(m, text)
            if got is None:
                continue
            found.extend(got)
            end = max([m.end(), *(c.end for c in got)])
            taken.append((m.start(), end))
        for start, end in taken:  # what is taken is out of every later pattern's sight
            seen = seen[:start] + "\x00" * (end - start) + seen[end:]
    return sorted(found, key=lambda c: (c.start, c.end))


def _needs(claim: Claim) -> set[tuple[str, str]]:
    """What a source must state for the claim to stand; any one will do."""
    if claim.kind in ("number", "phone"):
        return {("num", claim.value)}
    if claim.kind == "amount" and len(claim.figures) == 1:
        return {("amount", claim.value), ("bare", claim.figures[0])}
    return {(claim.kind, claim.value)}


def _gives(claim: Claim) -> set[tuple[str, str]]:
    """What a source's claim supports."""
    out: set[tuple[str, str]] = {(claim.kind, value) for value in (claim.value, *claim.also)}
    out |= {("num", figure) for figure in claim.figures}
    if claim.kind in ("number", "phone"):
        out |= {("num", claim.value), ("bare", claim.value)}
    return out


def unsupported(reply: str, sources: Iterable[str]) -> list[Claim]:
    """The claims of `reply` that no source states (passages, tool results, the customer's
    words): [] when every figure is grounded."""
    made = claims(reply)
    if not made:
        return []  # nothing to support: the sources need not be read
    stated: set[tuple[str, str]] = set()
    for source in sources:
        stated |= _stated(source)
    return [claim for claim in made if not _needs(claim) & stated]


@lru_cache(maxsize=4096)
def _stated(source: str) -> frozenset[tuple[str, str]]:
    """What a source supports. Kept per text: the same passages come back turn after turn."""
    return frozenset(given for claim in claims(source) for given in _gives(claim))
