"""Which slot an agent's question asks for, and how a customer says a value: the
simulated customer's ears and mouth, keyword rules in Chinese and English.

Keyed on what the agent asked, not on which model asked it: the offline model's questions
(app/llm/local/templates.py `ASK`) and a remote model's free wording both name the thing they
want ("订单号", "order number", "how much").
"""

from __future__ import annotations

import re

# Slots the simulator can answer, in the order they are tried on one question: the more
# specific first ("快递单号或订单号" is a tracking question; "邮箱地址" is not an address).
SLOTS = (
    "confirm",
    "field",
    "tracking",
    "order_id",
    "phone",
    "email",
    "address",
    "amount",
    "summary",
)

_KEYWORDS: dict[str, tuple[str, ...]] = {
    "confirm": ("请确认", "确认一下", "是否确认", "请回复“是”", "为您办理吗", "对吗", "可以吗",
                "please confirm", "yes or no", "shall i",
                "should i go ahead", "is that right", "is that correct", "do you want me to",
                "confirm"),
    "field": ("哪项联系方式", "哪个联系方式", "which contact detail", "which detail"),
    "tracking": ("快递单号", "运单号", "物流单号", "tracking number"),
    "order_id": ("订单号", "order number", "order id"),
    "phone": ("手机号", "电话号码", "手机号码", "phone", "mobile number"),
    "email": ("邮箱", "email", "e-mail"),
    "address": ("地址", "address"),
    "amount": ("金额", "多少钱", "退多少", "amount", "how much"),
    "summary": ("具体描述", "描述一下", "什么问题", "发生了什么", "详细说明", "describe",
                "what happened", "tell me more", "more details"),
}  # fmt: skip

_QUESTION_END = re.compile(r"(?<=[。！？?!])\s*|(?<=[.])\s+")
_ASKING = ("?", "？", "请提供", "请告诉", "请问", "请具体", "请确认", "告诉我", "please",
           "could you", "can you", "which", "what", "how much")  # fmt: skip


def sentences(text: str) -> list[str]:
    return [s for s in _QUESTION_END.split(text) if s.strip()]


def asked_slot(reply: str) -> str | None:
    """The slot the reply's last question asks for, or None when it asks nothing the
    simulator knows (a statement, a goodbye, a question about something else)."""
    for sentence in reversed(sentences(reply)):
        lowered = sentence.lower()
        if not any(marker in lowered for marker in _ASKING):
            continue
        return _slot_in(lowered)
    return None


def _slot_in(sentence: str) -> str | None:
    for slot in SLOTS:
        words = _KEYWORDS[slot]
        if slot == "address":
            sentence = sentence.replace("邮箱地址", "").replace("email address", "")
        if any(word in sentence for word in words):
            return slot
    return None


def asks_for_new(reply: str) -> bool:
    lowered = reply.lower()
    return "新" in reply or "new " in lowered


_FIELD_WORDS = {
    "phone": {"zh": "手机号", "en": "phone number"},
    "email": {"zh": "邮箱", "en": "email"},
    "address": {"zh": "地址", "en": "address"},
}
_SENTENCE = {
    "order_id": {"zh": "订单号是 {v}", "en": "The order number is {v}"},
    "tracking": {"zh": "单号是 {v}", "en": "The tracking number is {v}"},
    "phone": {"zh": "手机号是 {v}", "en": "My number is {v}"},
    "email": {"zh": "邮箱是 {v}", "en": "It's {v}"},
    "address": {"zh": "新地址是 {v}", "en": "The new address is {v}"},
    "amount": {"zh": "退 {v} 元", "en": "Please refund {v} CNY"},
    "field": {"zh": "我要改{v}", "en": "My {v}"},
}
_YES = {"zh": "是的，确认", "en": "Yes, please go ahead"}
_NO = {"zh": "不用了", "en": "No, thanks"}


def phrase(slot: str, value: str, style: str, language: str) -> str:
    """How the customer gives `value` for `slot`: bare, with a unit (money), or in a sentence."""
    if slot == "confirm":
        return (_NO if value.strip().lower() in ("no", "否", "不") else _YES)[language]
    if slot == "summary":
        return value
    if slot == "field":
        value = _FIELD_WORDS.get(value, {}).get(language, value)
    if style == "bare":
        return value
    if style == "unit":
        if slot != "amount":
            return value
        return f"{value}元" if language == "zh" else f"{_money(value)} CNY"
    return _SENTENCE[slot][language].format(v=value)


def _money(value: str) -> str:
    try:
        return f"{float(value):.2f}"
    except ValueError:
        return value
