"""The customer's answer to "please confirm: …", read by the runtime, not by the model.

A tool marked `confirm` ends the turn that proposed it with a read-back question (see
app/tools/policy/confirm.py). The next message decides: a plain yes runs exactly the call
that was read back; a plain no cancels it; anything else leaves it unconfirmed (superseded)
and the conversation goes on as usual. A yes after the deadline changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from app.llm.gateway import RequestedToolCall
from app.storage.confirmations import ConfirmationStatus, ConfirmationStore, confirmed_call_id
from app.storage.records import Turn
from app.storage.session_writer import SessionWriter


class Answer(Enum):
    YES = "yes"
    NO = "no"
    OTHER = "other"


def _phrases(*words: str) -> re.Pattern[str]:
    # Longest first, so "不是" is read before "是" and "yes please" before "yes".
    ordered = sorted(words, key=len, reverse=True)
    return re.compile("|".join(re.escape(w) for w in ordered))


_YES = _phrases(
    "是的", "是", "对的", "对", "确认", "确定", "好的", "好", "可以", "行", "没问题", "嗯", "同意",
    "办吧", "改吧", "发吧", "yes", "yeah", "yep", "yup", "y", "confirm", "confirmed", "correct",
    "right", "ok", "okay", "sure", "go ahead", "please do", "do it", "that's right",
    "that is right",
)  # fmt: skip
_NO = _phrases(
    "不是", "不对", "不用", "不要", "不", "取消", "算了", "别", "否", "先不", "no", "nope", "nah",
    "cancel", "don't", "do not", "stop", "wrong", "not now", "never mind",
)  # fmt: skip
_FILLER = _phrases(
    "please", "thanks", "thank you", "谢谢", "请", "吧", "了", "啊", "呀", "的", "呢", "哦", "嗯嗯",
    "修改", "更改", "发送", "重置", "办理", "改", "发", "办", "it", "that", "change", "send",
    "reset",
)  # fmt: skip
_SEPARATORS = re.compile(r"[\s,，.。!！~～、;；:：]+")


def _only(pattern: re.Pattern[str], text: str) -> bool:
    if not pattern.search(text):
        return False
    rest = _FILLER.sub(" ", pattern.sub(" ", text))
    return not _SEPARATORS.sub("", rest)


def classify(text: str) -> Answer:
    """Yes or no only when the message says nothing else; otherwise `OTHER`."""
    plain = text.strip().lower()
    if len(plain) > 40:
        return Answer.OTHER
    if _only(_NO, plain):
        return Answer.NO
    if _only(_YES, plain):
        return Answer.YES
    return Answer.OTHER


REPLIES = {
    "declined": {
        "en": "OK, I have not changed anything. Is there anything else I can help with?",
        "zh": "好的，已取消，没有做任何修改。还有什么可以帮您的吗？",
    },
    "expired": {
        "en": "That confirmation has expired, so nothing was changed. "
        "Please tell me again what you would like me to do.",
        "zh": "该确认已超时，没有做任何修改。如需办理，请重新告诉我。",
    },
}


@dataclass(frozen=True)
class Resolution:
    """What the turn does about a pending confirmation: run the confirmed call, or answer
    without the model (`reply_kind`), or nothing (`None` from `resolve`)."""

    call: RequestedToolCall | None = None
    reply_kind: Literal["declined", "expired"] | None = None


async def resolve(
    store: ConfirmationStore,
    writer: SessionWriter,
    turn: Turn,
    user_text: str,
    before_writing: Callable[[], object] = lambda: None,
) -> Resolution | None:
    """The pending confirmation resolved by `turn`, written with the turn's `writer`.
    `before_writing` runs before a confirmation is resolved (a write with its event): the
    turn sends what it deferred, so its events keep their order."""
    pending = await store.pending(turn.session_id)
    if pending is None:
        return None
    before_writing()
    answer = classify(user_text)
    if answer is Answer.OTHER:
        await store.resolve(writer, pending.id, "superseded", turn.id)
        return None
    status: ConfirmationStatus = "confirmed" if answer is Answer.YES else "declined"
    done = await store.resolve(writer, pending.id, status, turn.id)
    if done is None:  # resolved meanwhile by another path: treat the message as new
        return None
    if done.status == "expired":
        return Resolution(reply_kind="expired")
    if done.status == "declined":
        return Resolution(reply_kind="declined")
    call = RequestedToolCall(
        id=confirmed_call_id(done.id),
        name=done.tool,
        arguments=json.dumps(done.arguments, ensure_ascii=False),
    )
    return Resolution(call=call)
