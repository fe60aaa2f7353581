"""Slot values: validate and normalise the surface text the tagger found.

A span whose text does not validate (an 11-digit "order id", a phone that is neither a CN
mobile nor E.164) is dropped rather than passed on: the caller then asks for the slot again
instead of calling a tool with a value that will be refused.
"""

from __future__ import annotations

import re
from datetime import date

from app.nlu.amounts import normalise_amount
from app.nlu.dates import normalise_date
from app.text.fold import fold

ORDER_ID = re.compile(r"[0-9]{12}")
TRACKING_NUMBER = re.compile(r"[A-Z]{2}[0-9]{9,12}[A-Z]{0,2}")
CN_MOBILE = re.compile(r"1[3-9][0-9]{9}")
E164 = re.compile(r"\+[1-9][0-9]{7,14}")
EMAIL = re.compile(r"[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}")
_SEPARATORS = re.compile(r"[\s\-_.()/]")
_EDGES = " \t\r\n,.;:!?'\"，。；：！？、“”‘’（）()《》「」"


def normalise_order_id(text: str) -> str | None:
    digits = _SEPARATORS.sub("", fold(text).strip(_EDGES))
    return digits if ORDER_ID.fullmatch(digits) else None


def normalise_tracking(text: str) -> str | None:
    value = _SEPARATORS.sub("", fold(text).strip(_EDGES)).upper()
    return value if TRACKING_NUMBER.fullmatch(value) else None


def normalise_phone(text: str) -> str | None:
    """A CN mobile becomes its 11 digits (with or without +86/0086); anything else must be
    E.164 and keeps its "+"."""
    raw = _SEPARATORS.sub("", fold(text).strip(_EDGES))
    if raw.startswith("00"):
        raw = "+" + raw[2:]
    for prefix in ("+86", "86"):
        rest = raw.removeprefix(prefix)
        if rest != raw and CN_MOBILE.fullmatch(rest):
            return rest
    if CN_MOBILE.fullmatch(raw):
        return raw
    return raw if E164.fullmatch(raw) else None


def normalise_email(text: str) -> str | None:
    value = fold(text).strip(_EDGES)
    return value if EMAIL.fullmatch(value) else None


# What the tagger sometimes marks as a product but never is one: pronouns, and the verbs of
# "tell me / let me know" that follow an address ("发邮件到 a@b.com 告诉我退款进度").
_NOT_PRODUCT = frozenset(
    {"我", "你", "您", "他", "她", "它", "我们", "你们", "i", "me", "you", "it", "my", "we"}
)
_NOT_PRODUCT_START = ("告诉", "告知", "通知", "提醒", "tell ", "let ", "notify ")


def normalise_product(text: str) -> str | None:
    value = " ".join(text.strip(_EDGES).split())
    lowered = value.lower()
    if lowered in _NOT_PRODUCT or lowered.startswith(_NOT_PRODUCT_START):
        return None
    return value or None


def normalise(slot: str, text: str, today: date) -> str | None:
    """The normalised value of one slot, or None when `text` is not a valid value for it."""
    match slot:
        case "order_id":
            return normalise_order_id(text)
        case "tracking_number":
            return normalise_tracking(text)
        case "phone":
            return normalise_phone(text)
        case "email":
            return normalise_email(text)
        case "date":
            return normalise_date(text, today)
        case "amount":
            return normalise_amount(text)
        case "product":
            return normalise_product(text)
    raise ValueError(f"unknown slot {slot!r}")
