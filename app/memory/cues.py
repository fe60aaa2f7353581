"""When a turn needs memory, and when the user asks to forget. Rules, both languages.

Recall costs a query and adds prompt tokens, so it runs only when the turn points back in
time ("上次", "那个方案", "as before"), names something memory holds ("my email", "快递"),
or has an intent that usually depends on what we know about the user.
"""

from __future__ import annotations

import re

from app.memory.lexicon import keys_cued, normalize

# Intents whose handling usually depends on stored facts (contact details, courier,
# decisions taken earlier). Greetings and goodbyes never recall on their own.
RECALL_INTENTS = frozenset(
    {
        "update_contact",
        "refund_request",
        "return_request",
        "track_shipment",
        "complaint",
        "human_handoff",
    }
)

_REFERENCE = re.compile(
    r"上一?次|上回|之前|以前|原来的|老样子|照旧|跟上次|和上次|同上次|还是按|还是用|"
    r"那个(方案|地址|快递|订单|发票|号码|邮箱|办法|安排)|那家|你(还)?记得|我(说|提|讲)过|"
    r"我(的|之前的)(邮箱|手机|电话|地址|偏好|习惯)|"
    r"\bas before\b|\blike last time\b|\blast time\b|\bpreviously\b|\bsame as (before|last)|"
    r"\bthe usual\b|\bas usual\b|\byou remember\b|\bi (told|mentioned)\b|\bwe agreed\b|"
    r"\bmy (usual|email|phone|number|address|preference)"
)

_FORGET = re.compile(
    r"(忘掉|忘记|删掉|删除)(这个|那个|这条|那条|它|刚才(说的|那个|那条)?)|"
    r"把(这个|那个|它|这条|那条|刚才的?)(忘掉|忘了|删了|删掉)|"
    r"(别|不要|不用)(再)?记(住)?(这个|那个|它|这条|那条|了)|"
    r"(删掉|删除)(这条|这个|那条)?记忆|"
    r"\bforget (that|this|it|about (it|that))\b|"
    r"\b(don't|do not|dont) (remember|store|save|keep) (that|this|it)\b|"
    r"\bdelete (that|this) (memory|from (your )?memory)\b|\bremove that from memory\b"
)

_DENIAL = re.compile(
    r"不对|不是的|不是这个|错了|搞错|弄错|\bthat'?s (wrong|not right|incorrect)\b|\bincorrect\b|"
    r"\bnot (right|correct|mine)\b|\bwrong\b"
)


def recall_reason(text: str, intent: str | None = None) -> str | None:
    """Why this turn should recall ("reference", "intent", "topic"), or None."""
    lowered = normalize(text)
    if _REFERENCE.search(lowered):
        return "reference"
    if intent in RECALL_INTENTS:
        return "intent"
    if keys_cued(lowered):
        return "topic"
    return None


def needs_recall(text: str, intent: str | None = None) -> bool:
    return recall_reason(text, intent) is not None


def is_forget_command(text: str) -> bool:
    return _FORGET.search(normalize(text)) is not None


def is_denial(text: str) -> bool:
    """The user says what was just said about them is wrong."""
    return _DENIAL.search(normalize(text)) is not None
