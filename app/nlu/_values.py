"""Slot values for the training-data generator: each renderer picks a value and writes it the
way a customer might, returning (text before the span, the span, the normalised value).

The values are computed here from what was chosen, not by the normalisers, so a test can
check the normalisers against every generated example.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

Rendered = tuple[str, str, str]  # (prefix outside the span, surface, value)

_CN = "零一二三四五六七八九"
_ZH_WEEKDAY = "一二三四五六日"
_ZH_WEEK_LEADS = [("下", 1), ("下个", 1), ("上", -1), ("上个", -1), ("这", 0),
                  ("本", 0), ("", 0), ("", 0), ("下下", 2), ("这个", 0)]  # fmt: skip
_EN_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_EN_MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
              "september", "october", "november", "december"]  # fmt: skip
_EN_SMALL = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
             "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
             "eighteen", "nineteen"]  # fmt: skip
_EN_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def cn_number(n: int, rng: random.Random) -> str:
    """0 < n < 10000 in Chinese numerals, sometimes in the spoken short form ("三百五")."""
    if n < 10:
        return _CN[n]
    if n < 20:
        return "十" + (_CN[n % 10] if n % 10 else "")
    parts = []
    units = [(1000, "千"), (100, "百"), (10, "十")]
    zero_pending = False
    rest = n
    for size, name in units:
        digit, rest = divmod(rest, size)
        if digit:
            if zero_pending:
                parts.append("零")
            lead = "两" if digit == 2 and size >= 100 and rng.random() < 0.5 else _CN[digit]
            parts.append(lead + name)
            zero_pending = False
        elif parts:
            zero_pending = True
    if rest:
        if zero_pending:
            parts.append("零")
        parts.append(_CN[rest])
    text = "".join(parts)
    # Spoken short form: 350 -> 三百五, 2500 -> 两千五.
    if len(parts) >= 2 and parts[-1].endswith(("十", "百")) and rng.random() < 0.3:
        text = text[:-1]
    return text


def en_number(n: int) -> str:
    if n < 20:
        return _EN_SMALL[n]
    if n < 100:
        return _EN_TENS[n // 10] + ("-" + _EN_SMALL[n % 10] if n % 10 else "")
    head = _EN_SMALL[n // 100] + " hundred"
    return head if n % 100 == 0 else head + " and " + en_number(n % 100)


def _digits(rng: random.Random, k: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(k))


def order_id(rng: random.Random, lang: str, _pools: dict[str, Any]) -> Rendered:
    value = f"20{rng.randint(22, 25)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    value += _digits(rng, 4)
    if rng.random() < 0.05:
        sep = rng.choice([" ", "-"])
        return "", value[:4] + sep + value[4:8] + sep + value[8:], value
    return "", value, value


def tracking_number(rng: random.Random, lang: str, pools: dict[str, Any]) -> Rendered:
    value = rng.choice(pools["tracking_prefixes"]) + _digits(rng, rng.randint(9, 12))
    value += rng.choice(["", "", "", "CN", "US", "HK"])
    return "", value.lower() if rng.random() < 0.1 else value, value


def phone(rng: random.Random, lang: str, _pools: dict[str, Any]) -> Rendered:
    if rng.random() < (0.3 if lang == "en" else 0.08):
        country, body = rng.choice(
            [("44", "7" + _digits(rng, 9)), ("1", str(rng.randint(201, 989)) + _digits(rng, 7)),
             ("49", "15" + _digits(rng, 9)), ("65", rng.choice("89") + _digits(rng, 7)),
             ("852", rng.choice("569") + _digits(rng, 7)), ("81", "90" + _digits(rng, 8))]
        )  # fmt: skip
        spaced = " ".join(body[i : i + 4] for i in range(0, len(body), 4))
        surface = rng.choice([f"+{country}{body}", f"+{country} {spaced}", f"+{country}-{body}"])
        return "", surface, f"+{country}{body}"
    value = "1" + rng.choice("3456789") + _digits(rng, 9)
    a, b, c = value[:3], value[3:7], value[7:]
    surface = rng.choice(
        [value, value, value, f"{a} {b} {c}", f"{a}-{b}-{c}", f"+86 {a} {b} {c}",
         f"+86{value}", f"+86-{a}-{b}-{c}", f"0086 {value}"]
    )  # fmt: skip
    return "", surface, value


def email(rng: random.Random, lang: str, pools: dict[str, Any]) -> Rendered:
    name = rng.choice(pools["email_names"]) + rng.choice(["", "", str(rng.randint(1, 2025))])
    value = f"{name}@{rng.choice(pools['email_domains'])}"
    surface = value.title() if rng.random() < 0.08 else value
    return "", surface, value


def product(rng: random.Random, lang: str, pools: dict[str, Any]) -> Rendered:
    value = rng.choice(pools["products"][lang])
    return "", value, value


def amount(rng: random.Random, lang: str, _pools: dict[str, Any]) -> Rendered:
    whole = rng.choice([rng.randint(1, 99), rng.randint(100, 999), rng.randint(1000, 5000)])
    if rng.random() < 0.2:
        whole = round(whole, -1) or 10
    cents = rng.choice([0, 0, 0, 0, 50, 90, 99, 80])
    value = Decimal(whole) + Decimal(cents) / 100
    if not cents:
        num = f"{whole:,}" if whole >= 1000 and rng.random() < 0.4 else str(whole)
    else:
        num = f"{value:.1f}" if cents % 10 == 0 and rng.random() < 0.5 else f"{value:.2f}"
    if lang == "zh":
        forms = [f"{num}元", f"{num}块", f"{num}块钱", f"¥{num}", f"￥{num}", f"人民币{num}元",
                 f"{num}RMB", f"{num}"]  # fmt: skip
        if not cents and whole < 10000:
            cn = cn_number(whole, rng)
            forms += [f"{cn}元", f"{cn}块", f"{cn}块钱", cn]
        if cents and cents % 10 == 0 and whole < 10000:
            forms += [f"{cn_number(whole, rng)}块{_CN[cents // 10]}", f"{whole}块{cents // 10}"]
    else:
        forms = [f"{num} yuan", f"{num} RMB", f"RMB {num}", f"RMB{num}", f"¥{num}", f"${num}",
                 f"{num} dollars", f"CNY {num}", f"{num}"]  # fmt: skip
        if not cents:
            forms += [f"{num} bucks"]
            if whole < 1000:
                forms += [f"{en_number(whole)} dollars", f"{en_number(whole)} yuan"]
    return "", rng.choice(forms), f"{value:.2f}"


def _zh_date(rng: random.Random, today: date) -> Rendered:
    kind = rng.choice(["rel", "rel", "week", "week", "count", "abs", "abs", "numeric"])
    monday = today - timedelta(days=today.weekday())
    if kind == "rel":
        word, shift = rng.choice(
            [("今天", 0), ("明天", 1), ("后天", 2), ("大后天", 3), ("昨天", -1), ("前天", -2),
             ("大前天", -3), ("今儿", 0), ("明儿", 1), ("昨儿", -1), ("明日", 1)]
        )  # fmt: skip
        return "", word, (today + timedelta(days=shift)).isoformat()
    if kind == "week":
        lead, weeks = rng.choice(_ZH_WEEK_LEADS)
        unit = rng.choice(["周", "星期", "礼拜"])
        idx = rng.randrange(7)
        day = "天" if idx == 6 and unit != "周" and rng.random() < 0.5 else _ZH_WEEKDAY[idx]
        found = monday + timedelta(weeks=weeks, days=idx)
        return "", f"{lead}{unit}{day}", found.isoformat()
    if kind == "count":
        n = rng.randint(1, 10)
        weeks = rng.random() < 0.25
        n = min(n, 3) if weeks else n
        shown = str(n) if rng.random() < 0.4 else ("两" if n == 2 else cn_number(n, rng))
        unit = rng.choice(["周", "个星期"]) if weeks else "天"
        ahead = rng.random() < 0.5
        word = rng.choice(["后", "以后", "之后"]) if ahead else rng.choice(["前", "以前", "之前"])
        days = n * (7 if weeks else 1) * (1 if ahead else -1)
        return "", f"{shown}{unit}{word}", (today + timedelta(days=days)).isoformat()
    found = date(2024, rng.randint(1, 8), rng.randint(1, 28))
    if kind == "numeric":
        surface = rng.choice([found.isoformat(), f"{found.year}/{found.month}/{found.day}",
                              f"{found.month}/{found.day}"])  # fmt: skip
        return "", surface, found.isoformat()
    if rng.random() < 0.2:
        found = found.replace(month=today.month)
        return "", f"{found.day}{rng.choice('号日')}", found.isoformat()
    m, d = (str(found.month), str(found.day))
    if rng.random() < 0.3:
        m, d = cn_number(found.month, rng), cn_number(found.day, rng)
    year = f"{found.year}年" if rng.random() < 0.25 else ""
    return "", f"{year}{m}月{d}{rng.choice(['日', '号', '号', ''])}", found.isoformat()


def _en_date(rng: random.Random, today: date) -> Rendered:
    kind = rng.choice(["rel", "rel", "week", "week", "count", "abs", "abs", "numeric"])
    monday = today - timedelta(days=today.weekday())
    if kind == "rel":
        word, shift = rng.choice(
            [("today", 0), ("tomorrow", 1), ("yesterday", -1), ("tmrw", 1), ("tonight", 0),
             ("the day after tomorrow", 2), ("the day before yesterday", -2)]
        )  # fmt: skip
        return "", word, (today + timedelta(days=shift)).isoformat()
    if kind == "week":
        idx = rng.randrange(7)
        name = _EN_WEEKDAYS[idx] if rng.random() < 0.8 else _EN_WEEKDAYS[idx][:3]
        name = name.title() if rng.random() < 0.6 else name
        lead = rng.choice(["next", "last", "this", "", "", "this coming"])
        if lead == "this coming":
            ahead = (idx - today.weekday() - 1) % 7 + 1
            return "", f"{lead} {name}", (today + timedelta(days=ahead)).isoformat()
        weeks = {"next": 1, "last": -1}.get(lead, 0)
        found = monday + timedelta(weeks=weeks, days=idx)
        return ("on " if not lead else ""), f"{lead} {name}".strip(), found.isoformat()
    if kind == "count":
        n = rng.randint(1, 10)
        shown = str(n) if rng.random() < 0.5 else en_number(n)
        weeks = rng.random() < 0.25
        unit = ("week" if weeks else "day") + ("s" if n > 1 else "")
        if n == 1 and rng.random() < 0.5:
            shown = "a"
        ahead = rng.random() < 0.5
        surface = f"in {shown} {unit}" if ahead else f"{shown} {unit} ago"
        days = n * (7 if weeks else 1) * (1 if ahead else -1)
        return "", surface, (today + timedelta(days=days)).isoformat()
    found = date(2024, rng.randint(1, 8), rng.randint(1, 28))
    if kind == "numeric":
        surface = rng.choice([found.isoformat(), f"{found.month:02d}/{found.day:02d}/{found.year}"])
        return "on ", surface, found.isoformat()
    month = _EN_MONTHS[found.month - 1]
    month = month[:3] if rng.random() < 0.3 else month
    month = month.title() if rng.random() < 0.7 else month
    suffix = {1: "st", 2: "nd", 3: "rd", 21: "st", 22: "nd", 23: "rd"}.get(found.day, "th")
    day = f"{found.day}{suffix}" if rng.random() < 0.4 else str(found.day)
    surface = rng.choice([f"{month} {day}", f"{day} {month}", f"{month} {day}, {found.year}",
                          f"the {found.day}{suffix} of {month}"])  # fmt: skip
    return "on ", surface, found.isoformat()


def date_value(rng: random.Random, lang: str, pools: dict[str, Any]) -> Rendered:
    today: date = pools["today"]
    return _zh_date(rng, today) if lang == "zh" else _en_date(rng, today)


RENDERERS = {
    "order_id": order_id,
    "tracking_number": tracking_number,
    "phone": phone,
    "email": email,
    "date": date_value,
    "amount": amount,
    "product": product,
}
