"""What the offline model says about memory: it acknowledges "记住…" / "remember …" and
"忘掉这个" / "forget that" (the service stores and forgets; this only answers), and it uses
recalled preferences of a closed vocabulary where they matter (a preferred courier when a
return is created).

Recalled notes arrive as a quoted `user` message named `hermes_memory`. Preferences are read
only from lines of a recorded value (origin `structured`) or an operator's entry whose value is
one of the lexicon's values or aliases, never from free text. The one exception is the answer
to "do you remember …?": the customer's own `note` is read back to that same customer, as
their words in the second person, and nothing is done with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from app.llm.local import templates as t
from app.llm.local.conversation import MEMORY_MESSAGE, text_of
from app.llm.local.templates import Lang
from app.memory.cues import is_forget_command
from app.memory.extract import TurnFacts, extract, remember_request
from app.memory.lexicon import CATEGORY_KEYS, ENTITIES, normalize

# A recorded value or one an operator entered; never the customer's own words.
_LINE = re.compile(
    r'^- (?P<key>[a-z_.]+): (?P<value>"(?:[^"\\]|\\.)*") '
    r"\((?:recorded value|entered by an operator),",
    re.M,
)
# A "remember" note the customer dictated (stored as their own words, fact type `note`).
_NOTE_LINE = re.compile(r'^- note: (?P<value>"(?:[^"\\]|\\.)*") \(customer\'s own words,', re.M)
# "Do you remember …?" / "还记得我…吗": the customer asks what they told us.
_RECALL_QUESTION = re.compile(
    r"还记得|记不记得|你记得|记得我.*[吗么？?]|\bdo you (?:still )?remember\b|"
    r"\bdid i (?:tell|say|mention)\b|\bwhat did i (?:tell|say|ask)\b",
    re.I,
)
_CATEGORY_OF_KEY = {key: category for category, key in CATEGORY_KEYS.items()}
_FORGOT = re.compile(r"The user asked you to forget something\. (\d+) stored item")
# First person to second, so the acknowledgement speaks to the customer.
_EN_PERSON = (
    (re.compile(r"\bI'm\b", re.I), "you're"),
    (re.compile(r"\bI am\b", re.I), "you are"),
    (re.compile(r"\bI\b"), "you"),
    (re.compile(r"\bmy\b", re.I), "your"),
    (re.compile(r"\bme\b", re.I), "you"),
    (re.compile(r"\bmine\b", re.I), "yours"),
)


def memory_reply(
    text: str, parsed_tool_request: bool, messages: Sequence[Mapping[str, Any]], lang: Lang
) -> str | None:
    """The reply to a remember/forget message, or None when the message is something else.
    A "remember" that is also a confident tool request with its details ("记住我的订单号
    202405201234，查一下") is left to that request."""
    if is_forget_command(text):
        deleted = _forgotten(messages)
        return (t.NOTHING_TO_FORGET if deleted == 0 else t.FORGOTTEN)[lang]
    note = remember_request(text)
    if note is None or parsed_tool_request:
        return None
    if not note:
        return t.REMEMBERED_BARE[lang]
    return t.REMEMBERED[lang].format(note=_to_you(note, lang).rstrip("。.!！"))


def preference_reply(text: str, lang: Lang) -> str | None:
    """The acknowledgement of a stated preference the service stores as a keyed fact of the
    closed vocabulary ("我喜欢顺丰，以后寄件都用顺丰" -> preference.courier 顺丰), or None. Only the
    canonical value is repeated, never the customer's words."""
    for draft in extract(TurnFacts(user_text=text)).drafts:
        said = t.PREFERENCE_NOTED.get(draft.key) if draft.tier == "fact" else None
        if said is not None:
            return said[lang].format(value=t.value_name(draft.value, lang))
    return None


def recalled_note_reply(
    text: str, parsed_tool_request: bool, messages: Sequence[Mapping[str, Any]], lang: Lang
) -> str | None:
    """The answer to "do you remember …?" from a note the customer asked us to keep, recalled
    into this conversation (the most relevant first), or None. It is the customer's own note
    read back to the same customer, as their words in the second person; it is never acted on."""
    if parsed_tool_request or not _RECALL_QUESTION.search(text):
        return None
    for message in messages:
        if message.get("role") != "user" or message.get("name") != MEMORY_MESSAGE:
            continue
        match = _NOTE_LINE.search(text_of(message.get("content")))
        if match:
            note = _to_you(json.loads(match.group("value")), lang).rstrip("。.!！")
            return t.NOTE_RECALLED[lang].format(note=note)
    return None


def recalled_preferences(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Recorded preference values recalled into this conversation, as the lexicon's canonical
    value (latest wins): an operator's "SF Express" and a customer's "顺丰" are both 顺丰, which
    the reply then names in the customer's language."""
    found: dict[str, str] = {}
    for message in messages:
        if message.get("role") != "user" or message.get("name") != MEMORY_MESSAGE:
            continue
        for match in _LINE.finditer(text_of(message.get("content"))):
            key, value = match.group("key"), json.loads(match.group("value"))
            canonical = _canonical(key, value)
            if canonical is not None:
                found[key] = canonical
    return found


def _canonical(key: str, value: str) -> str | None:
    """The canonical value when the whole recorded value is a value or alias of the key's
    category ("SF Express" -> 顺丰); None for anything else, so free text is never read."""
    category = _CATEGORY_OF_KEY.get(key)
    if category is None:
        return None
    said = normalize(value).strip()
    for canonical, aliases in ENTITIES[category].items():
        if value == canonical or said in aliases:
            return canonical
    return None


def _forgotten(messages: Sequence[Mapping[str, Any]]) -> int | None:
    for message in reversed(messages):
        if message.get("role") == "system":
            match = _FORGOT.search(text_of(message.get("content")))
            if match:
                return int(match.group(1))
    return None


def _to_you(note: str, lang: Lang) -> str:
    if re.search(r"[\u4e00-\u9fff]", note):
        return note.replace("我们", "您们").replace("我", "您")
    for pattern, repl in _EN_PERSON:
        note = pattern.sub(repl, note)
    return note
