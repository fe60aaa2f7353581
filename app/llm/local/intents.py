"""What each intent needs and which tool call serves it (the tool contract in code).

`plan` looks at what the user has said so far (`Memory`) and answers either "ask for this slot"
(`Need`) or "make this call" (`Call`). It never fills a value the user or a tool did not give.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.llm.local.conversation import Outcome
from app.llm.local.templates import ASK
from app.text.tokens import estimate_tokens

TOOL_OF = {
    "order_status": "query_order_status",
    "track_shipment": "track_shipment",
    "refund_request": "request_refund",
    "return_request": "request_return",
    "password_reset": "reset_password",
    "complaint": "create_ticket",
    "update_contact": "update_contact_info",
    "email_request": "send_email",  # planned in mail.py: it needs the conversation's facts
}
INTENT_OF_TOOL = {tool: intent for intent, tool in TOOL_OF.items()}
TOOL_INTENTS = frozenset(TOOL_OF)

# Asked slots answered by whatever the user writes next, rather than by an extracted slot.
FREE_TEXT = frozenset({"address", "summary"})
_DETAILED = 12  # estimated tokens: about 12 Chinese characters or 9 English words
# What the tool contract reserves priority "high" for: lost goods, safety issues, repeated
# failures ("显示已经签收了，可我根本没收到，东西丢了"). "差点丢了" (nearly lost) is not lost.
_URGENT = re.compile(
    r"(?<!差点)(?<!差一点)丢了|丢失|弄丢|根本没收到|一直没收到|从没收到|没有收到货|"
    r"起火|冒烟|爆炸|触电|漏电|烫伤|受伤|第三次|好几次|一次又一次|"
    r"\b(?:lost|never (?:arrived|came|received)|went missing|fire|smok(?:e|ing)|explod\w*|"
    r"electric shock|injur\w*|third time|again and again|repeatedly)\b",
    re.I,
)

_FIELD_WORDS = (  # order matters: "邮箱地址" / "email address" is an email
    ("email", re.compile(r"邮箱|邮件|e-?mail", re.I)),
    ("phone", re.compile(r"手机|电话|号码|phone|mobile", re.I)),
    ("address", re.compile(r"地址|住址|address", re.I)),
)
_ASKED_WORDS = (  # for questions the offline model did not write itself (a remote model did)
    ("tracking_or_order", re.compile(r"运单号|快递单号|物流单号|tracking number", re.I)),
    ("order_id", re.compile(r"订单号|订单编号|order (number|id)", re.I)),
    ("phone", re.compile(r"手机号|电话号码|phone number|mobile number", re.I)),
    ("email", re.compile(r"邮箱|e-?mail address", re.I)),
    ("amount", re.compile(r"金额|多少钱|how much|what (smaller )?amount", re.I)),
)
_QUESTION = re.compile(
    r"[?？]|请提供|请告诉|请输入|请核对|请确认|could you|can you|please (give|provide|send|check)",
    re.I,
)
_OWN_QUESTIONS = {
    text.strip(): slot
    for by_slot in ASK.values()
    for slot, texts in by_slot.items()
    for text in texts.values()
}


@dataclass(frozen=True)
class Need:
    slot: str


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]


@dataclass
class Memory:
    """What the user has told us: slots across the conversation, and the current thread."""

    slots: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (value, turn)
    thread: dict[str, str] = field(default_factory=dict)  # slots since the intent began
    texts: list[str] = field(default_factory=list)  # user texts since the intent began
    # This request only: the message that began it and the answers to its questions. A thread
    # spans requests with the same intent ("email it to a@x.com" ... "email me that too").
    request: dict[str, str] = field(default_factory=dict)
    request_texts: list[str] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)  # free-text answers (address, ...)

    def new_thread(self) -> None:
        self.thread, self.texts = {}, []

    def new_request(self) -> None:
        self.request, self.request_texts, self.answers = {}, [], {}

    def add(self, slots: Mapping[str, str], turn: int, text: str) -> None:
        for name, value in slots.items():
            self.slots[name] = (value, turn)
            self.thread[name] = value
            self.request[name] = value
        self.texts.append(text)
        self.request_texts.append(text)

    def get(self, name: str) -> str | None:
        found = self.slots.get(name)
        return found[0] if found else None

    def latest(self, *names: str) -> tuple[str, str] | None:
        """The most recently given of several slots, as (name, value)."""
        given = [(self.slots[n][1], n) for n in names if n in self.slots]
        if not given:
            return None
        _, name = max(given)
        return name, self.slots[name][0]


def asked_slot(assistant_text: str) -> str | None:
    """Which slot the assistant's last message asked for, if it asked for one."""
    own = _OWN_QUESTIONS.get(assistant_text.strip())
    if own is not None:
        return own
    if not _QUESTION.search(assistant_text):
        return None
    return next((slot for slot, words in _ASKED_WORDS if words.search(assistant_text)), None)


def answers(asked: str, slots: Mapping[str, str], text: str) -> bool:
    """Whether a user message carries what `asked` asked for."""
    if asked in FREE_TEXT:
        return bool(text.strip())
    if asked == "tracking_or_order":
        return "tracking_number" in slots or "order_id" in slots
    if asked == "contact_field":
        return "phone" in slots or "email" in slots or contact_field_in(text) is not None
    return asked in slots


def contact_field_in(text: str) -> str | None:
    return next((name for name, words in _FIELD_WORDS if words.search(text)), None)


Done = Callable[[str, dict[str, Any]], Outcome | None]


def plan(intent: str, memory: Memory, done: Done) -> Need | Call:
    """The next step for a tool intent; `done` gives results of calls made this turn."""
    match intent:
        case "order_status":
            return _with_order("query_order_status", memory, {})
        case "track_shipment":
            return _track(memory, done)
        case "refund_request":
            return _refund(memory, done)
        case "return_request":
            return _with_order("request_return", memory, {})
        case "password_reset":
            phone = memory.get("phone")
            return Call("reset_password", {"phone": _phone(phone)}) if phone else Need("phone")
        case "complaint":
            return _complaint(memory)
        case "update_contact":
            return _update_contact(memory)
    raise ValueError(f"{intent} has no plan here")


def _with_order(tool: str, memory: Memory, extra: dict[str, Any]) -> Need | Call:
    order_id = memory.get("order_id")
    return Call(tool, {"order_id": order_id, **extra}) if order_id else Need("order_id")


def _refund(memory: Memory, done: Done) -> Need | Call:
    amount = _amount(memory.request.get("amount"))  # only if given in this request
    first = _with_order("request_refund", memory, {"amount": amount} if amount else {})
    if amount or not isinstance(first, Call):
        return first
    # Without an amount the whole order is refunded, but above 500 the tool wants the amount
    # stated (so the approval rule sees it): take it from the order itself.
    refused = done(first.name, first.arguments)
    if refused is None or refused.error_code != "amount_required":
        return first
    lookup = Call("query_order_status", {"order_id": first.arguments["order_id"]})
    order = done(lookup.name, lookup.arguments)
    if order is None:
        return lookup
    total = order.data.get("total_amount") if isinstance(order.data, dict) else None
    if order.status == "success" and isinstance(total, int | float) and total > 0:
        return Call("request_refund", {**first.arguments, "amount": float(total)})
    return first  # answered from the refusal: it asks the user for the amount


def _track(memory: Memory, done: Done) -> Need | Call:
    latest = memory.latest("tracking_number", "order_id")
    if latest is None:
        return Need("tracking_or_order")
    name, value = latest
    if name == "tracking_number":
        return Call("track_shipment", {"tracking_number": value})
    # Only an order id: look the order up first; its tracking number leads to the shipment.
    lookup = Call("query_order_status", {"order_id": value})
    order = done(lookup.name, lookup.arguments)
    if order is not None and order.status == "success" and isinstance(order.data, dict):
        tracking = order.data.get("tracking_number")
        if isinstance(tracking, str) and tracking:
            return Call("track_shipment", {"tracking_number": tracking})
    return lookup


def _complaint(memory: Memory) -> Need | Call:
    summary = " ".join(t for t in memory.texts if t)[:500].strip()
    # "我要投诉" / "I want to complain" says nothing a ticket could use: ask once for details.
    vague = estimate_tokens(summary) < _DETAILED and "summary" not in memory.answers
    if len(summary) < 5 or vague:
        return Need("summary")
    args: dict[str, Any] = {"category": "complaint", "summary": summary}
    order_id = memory.get("order_id")
    if order_id:
        args["order_id"] = order_id
    if _URGENT.search(summary):
        args["priority"] = "high"
    return Call("create_ticket", args)


def _update_contact(memory: Memory) -> Need | Call:
    # The new value must come from this request, never from an older turn's slots, nor from
    # an earlier change in the same thread ("change my email to …", then "and my phone to …").
    fields = [name for name in ("email", "phone") if name in memory.request]
    if fields:
        name = fields[0]
        return Call("update_contact_info", {"field": name, "value": memory.request[name]})
    texts = reversed(memory.request_texts)
    wanted = next((f for f in map(contact_field_in, texts) if f is not None), None)
    if wanted is None:
        return Need("contact_field")
    if wanted == "address" and memory.answers.get("address"):
        return Call("update_contact_info", {"field": "address", "value": memory.answers["address"]})
    return Need(wanted)


def _phone(value: str) -> str:
    digits = value[1:] if value.startswith("+") else value
    if digits.isdigit() and len(digits) == 13 and digits.startswith("86"):
        return digits[2:]  # +86 13800138000 -> the 11-digit mobile number
    return value


def _amount(value: str | None) -> float | None:
    try:
        amount = round(float(value), 2) if value else None
    except ValueError:
        return None
    return amount if amount and amount > 0 else None
