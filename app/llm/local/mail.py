"""`email_request`: "email me the receipt at ADDRESS" becomes one `send_email` call.

The recipient is the address given in this request (its first message or the answer to "which
address?"), never one from an earlier request and never the account's address on file: the
offline model does not look that up. The email itself is written here, in the customer's
language: it says what they asked to receive and carries the facts of the most recent
successful tool result in the conversation (an order lookup's status and total, a parcel's
whereabouts), rendered by the same templates as the replies, so nothing is made up. No
customer-written text goes into it: the address is the only thing the customer chooses, so the
call centre's mail cannot be made to carry someone's words to a third party. The operator
approves every email (send_email is `risk: external`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from app.llm.local import templates as t
from app.llm.local.conversation import Exchange, parse_outcome, text_of
from app.llm.local.intents import INTENT_OF_TOOL, Call, Done, Memory, Need
from app.llm.local.replies import result_reply
from app.llm.local.templates import Lang, Text

TOOL = "send_email"
_LOOKUP = "query_order_status"
_ADDRESS = re.compile(r"\S+@\S+")
# 13 or more digits (a card or account number, an ID number with its check letter): whatever
# reached the model was masked already, but an email must never carry one whole.
_LONG_NUMBER = re.compile(r"(?<![\w])(?:\d[ -]?){12,}\d[Xx]?(?![\w])")

# What the customer asked to receive, first match wins (a refund confirmation is about a
# refund, not an order confirmation). The same words in both languages: a Chinese customer
# may well write "invoice".
_WHAT: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"退款|refund", re.I), "refund"),
    (re.compile(r"退货|return", re.I), "return"),
    (re.compile(r"发票|invoice", re.I), "invoice"),
    (re.compile(r"收据|小票|receipt", re.I), "receipt"),
    (re.compile(r"付款(证明|凭证)|支付凭证|proof of payment", re.I), "payment"),
    (re.compile(r"物流|快递|包裹|运单|tracking|shipping|delivery|parcel", re.I), "tracking"),
    (re.compile(r"订单确认|确认单|order confirmation", re.I), "order_confirmation"),
    (re.compile(r"确认|confirmation", re.I), "confirmation"),
    (re.compile(r"工单|投诉|ticket|complaint", re.I), "ticket"),
    (re.compile(r"订单|order", re.I), "order"),
)
# Asked for "that" after a tool answered: the tool says what it was.
_WHAT_OF_TOOL = {
    "query_order_status": "order",
    "track_shipment": "tracking",
    "request_refund": "refund",
    "request_return": "return",
    "create_ticket": "ticket",
}


# The email's own text. What the assistant says about it is in templates.py.
_EMAIL: dict[str, Text] = {
    "subject": {"zh": "您要求的{what}", "en": "Your requested {what}"},
    "for_order": {"zh": "订单 {order_id} 的{what}", "en": "{what} for order {order_id}"},
    "greeting": {"zh": "您好：", "en": "Hello,"},
    "asked": {
        "zh": "您在与客服的对话中请我们通过邮件发送{what}。",
        "en": "In your conversation with our customer service you asked us to email you the "
        "{what}.",
    },
    "facts": {"zh": "我们系统中的记录如下：", "en": "This is what our records show:"},
    "source": {
        "zh": "以上信息来自我们的系统记录。如有疑问，请联系客服。",
        "en": "These details come from our records. If anything looks wrong, please contact "
        "customer service.",
    },
    "no_facts": {
        "zh": "如需进一步的信息，请随时联系客服。",
        "en": "If you need anything further, please contact customer service.",
    },
}
_WHAT_NAME: dict[str, Text] = {
    "refund": {"zh": "退款信息", "en": "refund details"},
    "return": {"zh": "退货信息", "en": "return details"},
    "invoice": {"zh": "发票信息", "en": "invoice details"},
    "receipt": {"zh": "收据", "en": "receipt"},
    "payment": {"zh": "付款凭证", "en": "proof of payment"},
    "tracking": {"zh": "物流信息", "en": "tracking details"},
    "order_confirmation": {"zh": "订单确认", "en": "order confirmation"},
    "confirmation": {"zh": "确认信息", "en": "confirmation"},
    "ticket": {"zh": "工单信息", "en": "ticket details"},
    "order": {"zh": "订单详情", "en": "order details"},
    "information": {"zh": "信息", "en": "information"},
}


def plan_email(
    memory: Memory, done: Done, facts: Exchange | None, lang: Lang, offered: Collection[str]
) -> Need | Call:
    """The send_email call for this request, or the question for its recipient.

    An order named in the request is looked up first when the latest facts are about another
    order and the lookup is offered; otherwise the email names the order without facts."""
    to = memory.request.get("email")
    if not to:
        return Need("email")
    order_id = memory.request.get("order_id")
    if order_id and not _about(facts, order_id):
        facts = None
        lookup = Call(_LOOKUP, {"order_id": order_id})
        if _LOOKUP in offered:
            found = done(lookup.name, lookup.arguments)
            if found is None or found.status != "success":
                return lookup  # made and failed: the reply answers from its result
            facts = Exchange("", lookup.name, lookup.arguments, found)
    subject, body = compose(memory.request_texts, facts, lang, order_id)
    return Call(TOOL, {"to": to, "subject": subject, "body": body})


def compose(
    texts: list[str], facts: Exchange | None, lang: Lang, order_id: str | None = None
) -> tuple[str, str]:
    """Subject and body: what was asked for, and the facts when there are any."""
    what = _WHAT_NAME[_what(texts, facts)][lang]
    if order_id:
        what = _EMAIL["for_order"][lang].format(what=what, order_id=order_id)
    subject = _EMAIL["subject"][lang].format(what=what)
    parts = [_EMAIL["greeting"][lang], _EMAIL["asked"][lang].format(what=what)]
    detail = _facts_text(facts, lang)
    if detail:
        parts += [_EMAIL["facts"][lang], detail, _EMAIL["source"][lang]]
    else:
        parts.append(_EMAIL["no_facts"][lang])
    return subject, "\n\n".join(parts)


def latest_facts(messages: Sequence[Mapping[str, Any]]) -> Exchange | None:
    """The most recent successful result, in the whole conversation, of a tool whose results
    the replies know how to word (results pruned from the context read as unreadable)."""
    calls: dict[str, tuple[str, dict[str, Any] | None]] = {}
    latest: Exchange | None = None
    for message in messages:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or ():
                fn = call.get("function") or {}
                calls[str(call.get("id"))] = (str(fn.get("name") or ""), _arguments(fn))
        elif message.get("role") == "tool":
            call_id = str(message.get("tool_call_id"))
            name, arguments = calls.get(call_id, ("", None))
            if not _worded(name):
                continue
            outcome = parse_outcome(message.get("content"))
            if outcome.status == "success" and isinstance(outcome.data, dict):
                latest = Exchange(call_id, name, arguments, outcome)
    return latest


def _worded(tool: str) -> bool:
    intent = INTENT_OF_TOOL.get(tool)
    return tool != TOOL and intent is not None and "success" in t.RESULT.get(intent, {})


def _about(facts: Exchange | None, order_id: str) -> bool:
    if facts is None:
        return False
    data = facts.outcome.data if facts.outcome is not None else None
    given = (facts.arguments or {}).get("order_id")
    return order_id in (given, data.get("order_id") if isinstance(data, dict) else None)


def _what(texts: list[str], facts: Exchange | None) -> str:
    said = _ADDRESS.sub(" ", " ".join(texts))
    found = next((name for words, name in _WHAT if words.search(said)), None)
    if found is None and facts is not None:
        found = _WHAT_OF_TOOL.get(facts.name)
    return found or "information"


def _facts_text(facts: Exchange | None, lang: Lang) -> str:
    if facts is None:
        return ""
    text = result_reply(INTENT_OF_TOOL[facts.name], facts, lang)
    return _LONG_NUMBER.sub(lambda m: "****" + re.sub(r"\D", "", m[0])[-4:], text)


def _arguments(fn: Mapping[str, Any]) -> dict[str, Any] | None:
    raw = fn.get("arguments")
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(text_of(raw) or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
