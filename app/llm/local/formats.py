"""Dates, times and money the way the customer's language writes them.

Tool results carry ISO timestamps ("2024-05-21T21:15:00+08:00"), ISO dates and bare numbers
with a currency code; a reply says "2024年5月21日 21:15" / "May 21, 2024, 9:15 PM" and
"948.00元" / "CNY 948.00". A timestamp keeps its own offset: the demo's times are the
customer's local time. Anything that does not parse is shown as it came.
"""

from __future__ import annotations

from datetime import date, datetime

from app.llm.local.templates import Lang

_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
_YUAN = {"CNY", "RMB"}


def money(value: float, currency: str, lang: Lang) -> str:
    amount = f"{value:,.2f}" if lang == "en" else f"{value:.2f}"
    code = currency.strip().upper()
    if lang == "zh":
        return f"{amount}元" if code in _YUAN or not code else f"{amount} {code}"
    return f"{code} {amount}" if code else amount


def when(text: str, lang: Lang) -> str:
    """An ISO date or date-time as the language writes it; other text unchanged."""
    raw = text.strip()
    try:
        if len(raw) == 10:
            return _day(date.fromisoformat(raw), lang)
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return text
    if lang == "zh":
        return f"{_day(moment.date(), lang)} {moment:%H:%M}"
    hour = moment.hour % 12 or 12
    noon = "AM" if moment.hour < 12 else "PM"
    return f"{_day(moment.date(), lang)}, {hour}:{moment.minute:02d} {noon}"


def _day(day: date, lang: Lang) -> str:
    if lang == "zh":
        return f"{day.year}年{day.month}月{day.day}日"
    return f"{_MONTHS[day.month - 1]} {day.day}, {day.year}"
