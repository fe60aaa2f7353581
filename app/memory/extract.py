"""What a finished turn teaches us about the user: rules over the user's words and tool results.

Only key facts are written: explicit preferences ("以后都用简体中文", "send invoices as PDF",
"我喜欢顺丰"), "remember this", contact details the user states or a tool verifies, and decisions
the user confirms. Small talk and transient states ("今天想吃面") are not memories. Facts the
model proposes without evidence become `pending` drafts; see `proposals_to_drafts`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.memory.cues import is_forget_command
from app.memory.lexicon import CATEGORY_KEYS, find_entities, normalize
from app.memory.records import Draft

USER_CONFIDENCE = 0.9  # the user said it in so many words
STATED_CONTACT_CONFIDENCE = 0.8  # typed or dictated, not verified yet
TOOL_CONFIDENCE = 1.0

_SENTENCE = re.compile(r"[^。！!？?；;\n]+[。！!？?；;]?")
_CLAUSE = re.compile(r"[^，,、]+")
_DURABLE = re.compile(
    r"以后|今后|往后|从今|从现在(开始|起)|一直|总是|每次|默认|长期|永远|始终|一律|都用|都要|都发|都走|"
    r"\bfrom now on\b|\balways\b|\bevery time\b|\bby default\b|\bin (the )?future\b|"
    r"\bgoing forward\b|\bfrom here on\b"
)
_TRANSIENT = re.compile(
    r"今天|今晚|今早|现在|刚才|刚刚|此刻|这会儿|马上|一会儿|待会|中午|\btoday\b|\btonight\b|"
    r"\bright now\b|\bat the moment\b|\bcurrently\b|\bjust now\b|"
    r"\bthis (morning|afternoon|evening)\b"
)
_SMALL_TALK = re.compile(
    r"^(你好|您好|谢谢|多谢|哈哈|嗯嗯|好的谢谢|再见|拜拜)|天气|好累|好饿|饿了|无聊|"
    r"^(hi|hello|hey|thanks|thank you|lol|bye)\b|\bweather\b|\bhungry\b|\btired\b|\bbored\b"
)
_STRONG_PREF = re.compile(r"偏好|倾向|习惯|更喜欢|\bprefer|\bi'?d rather\b")
_LIKE = re.compile(r"喜欢|希望|\blike\b|\blove\b|\bwant\b")
_CONTACT_VERB = re.compile(
    r"联系|通知|\bcontact(ed|ing)?\b|\breach(ed|ing)?\b|\bnotif(y|ied|ying)\b"
)
_NEGATED = re.compile(
    r"不要|别|不用|不想|不喜欢|讨厌|拒绝|\bdon'?t\b|\bdo not\b|\bnever\b|\bno more\b|"
    r"\bstop\b|\bhate\b"
)
_QUESTION = re.compile(r"[?？]\s*$|[吗呢]\s*[。.]?$|^(can|could|do|does|did|is|are|what|how|why)\b")
_REMEMBER = re.compile(
    r"(?<![别不没用还])(请|帮我)?(记住|记一下|记下来|记下|记好)(一下)?[:：,，]?\s*(?P<zh>.*)|"
    r"^(please\s+)?(remember|note|keep in mind|make a note)( that| this)?[:,]?\s*(?P<en>.*)"
)
_DECISION = re.compile(
    r"(我|我们)(已经)?(决定|确定|选择|选定)|就(按|用|选)[^，,。！!]+?(吧|办|来)|"
    r"\b(i'?ll|i will|let'?s|we'?ll) go with\b|\bi(?:'ve| have)? (decided|chosen)\b|\bi choose\b"
)
_CONFIRM_REPLY = re.compile(
    r"^(好的?|可以|行|没问题|同意|确认|就这么办|就这样|对|是的|嗯|ok(ay)?|yes|yep|sure|"
    r"go ahead|sounds good|confirmed|do it|deal)"
    r"([\s,，!！。.]*(就这么办|吧|please|thanks))*[\s!！。.]*$"
)
_PROPOSAL = re.compile(
    r"要不要|是否|可以吗|好吗|建议|方案|\bshall i\b|\bshould i\b|\bwould you like\b|"
    r"\bdo you want\b|\bi suggest\b|\bi can\b"
)
_EMAIL = re.compile(r"[a-z0-9._%+\-]+@[a-z0-9.\-]+\.[a-z]{2,}")
_PHONE = re.compile(
    r"(?<!\d)(\+?86[\s-]?)?1[3-9]\d(?:[\s-]?\d{4}){2}(?!\d)|(?<!\d)\+\d[\d\s-]{7,14}\d(?!\d)"
)
_STATES_CONTACT = re.compile(r"我的|是|改成|换成|更新|\bmy\b|\bis\b|\bchange|\bupdate")
_VERIFIED_FLAGS = ("verified", "confirmed", "updated")


@dataclass(frozen=True)
class ToolEvidence:
    """One tool call of the turn, as memory sees it: its arguments, the data of a successful
    result, the error code of a failed one."""

    tool: str
    ok: bool
    data: Any = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    error_code: str = ""

    @classmethod
    def of(cls, tool: str, result: Any, arguments: str | Mapping[str, Any] = "") -> ToolEvidence:
        """From an `app.tools.results.ToolResult` (duck-typed: `status`, `data`, `error`) and
        the call's arguments (the model's JSON text, or already parsed)."""
        error = getattr(result, "error", None)
        return cls(
            tool,
            getattr(result, "status", "") == "success",
            getattr(result, "data", None),
            _parsed(arguments),
            str(getattr(error, "code", "") or ""),
        )


def _parsed(arguments: str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(arguments, Mapping):
        return arguments
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class TurnFacts:
    """What a turn offers the extractor."""

    user_text: str
    final_text: str = ""
    previous_assistant: str = ""
    tool_results: tuple[ToolEvidence, ...] = ()


@dataclass(frozen=True)
class Proposal:
    """A fact the model proposed (e.g. through a tool call); it needs evidence to be active."""

    key: str
    value: str
    entity: str | None = None


@dataclass
class Extraction:
    drafts: list[Draft] = field(default_factory=list)
    evidence: set[str] = field(default_factory=set)  # normalised values tools returned
    refuted: set[str] = field(default_factory=set)  # values a tool refused (phone_mismatch)


def text_key(fact_type: str, text: str) -> str:
    """A stable key for a node, so the same sentence remembered twice updates one memory."""
    digest = hashlib.sha256(normalize(text).strip(" 。.!！").encode()).hexdigest()[:12]
    return f"{fact_type}:{digest}"


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def _node(fact_type: str, text: str, source: str = "user") -> Draft:
    text = text.strip().rstrip("。.!！")[:500]
    entities = find_entities(text)
    return Draft(
        key=text_key(fact_type, text),
        value=text,
        tier="node",
        fact_type=fact_type,
        entity=entities[0].value if entities else None,
        confidence=USER_CONFIDENCE,
        source=source,  # type: ignore[arg-type]
    )


def _keyed(key: str, value: str, confidence: float, source: str = "user") -> Draft:
    return Draft(
        key=key,
        value=value,
        entity=value if key.startswith("preference.") else None,
        confidence=confidence,
        source=source,  # type: ignore[arg-type]
    )


def _transient(lowered: str) -> bool:
    return bool(_TRANSIENT.search(lowered) or _SMALL_TALK.search(lowered))


def _contacts(sentence: str, confidence: float) -> list[Draft]:
    lowered = normalize(sentence)
    if not _STATES_CONTACT.search(lowered):
        return []
    out = [_keyed("contact.email", m.group(0), confidence) for m in _EMAIL.finditer(lowered)]
    for match in _PHONE.finditer(lowered):
        out.append(_keyed("contact.phone", re.sub(r"[\s-]", "", match.group(0)), confidence))
    return out


# "还是按我之前的偏好来", "same as last time": pointing back at a stored preference is a cue to
# recall it, not a new preference to store.
_POINTS_BACK = re.compile(
    r"上一?次|上回|之前|以前|原来的|老样子|照旧|跟上次|和上次|同上次|"
    r"\bas before\b|\blike last time\b|\blast time\b|\bpreviously\b|\bsame as (before|last)|"
    r"\bthe usual\b|\bas usual\b"
)


def _preferences(sentence: str, durable: bool = False) -> list[Draft]:
    lowered = normalize(sentence)
    if _POINTS_BACK.search(lowered):
        return []
    durable = durable or bool(_DURABLE.search(lowered))
    strong = bool(_STRONG_PREF.search(lowered))
    liked = bool(_LIKE.search(lowered))
    entities = find_entities(lowered)
    if _NEGATED.search(lowered) and (durable or strong or entities):
        return [_node("preference", sentence)]  # a constraint: keep the user's own words
    out: list[Draft] = []
    for entity in entities:
        key = CATEGORY_KEYS[entity.category]
        if entity.category == "invoice_format":
            generic = durable or strong or re.search(r"\binvoices\b|发票(都|一律)", lowered)
            ok = bool(generic) and ("发票" in lowered or "invoice" in lowered)
        elif entity.category == "channel":
            ok = bool(_CONTACT_VERB.search(lowered)) and (durable or strong or liked)
        else:
            ok = durable or strong or liked
        if ok and not any(d.key == key for d in out):
            out.append(_keyed(key, entity.value, USER_CONFIDENCE))
    if not out and (durable or strong) and not _EMAIL.search(lowered):
        out.append(_node("preference", sentence))
    return out


def _remember_body(sentence: str) -> str | None:
    """What a "remember ..." / "记住…" sentence asks to keep ("" when it names nothing), or
    None when the sentence is not such a request."""
    lowered = normalize(sentence)
    match = _REMEMBER.search(lowered)
    if match is None:
        return None
    group = "zh" if match.group("zh") is not None else "en"
    # Keep the user's own spelling when normalising kept offsets (it nearly always does).
    source = sentence if len(sentence) == len(lowered) else lowered
    body = source[match.start(group) : match.end(group)].strip(" ：:，,。.")
    return "" if body.lower() in {"", "这个", "这", "this", "that", "it"} else body


def remember_request(text: str) -> str | None:
    """The note a message asks to be remembered, as `extract` stores it ("我喜欢顺丰。记住这个"
    -> "我喜欢顺丰"; "" when it names nothing), or None when it asks nothing of the kind: what
    a reply acknowledges."""
    parts = sentences(text)
    for i, sentence in enumerate(parts):
        body = _remember_body(sentence)
        if body is not None:
            return body or "；".join(p for j, p in enumerate(parts) if j != i).strip()
    return None


def _remembered(sentence: str, others: list[str]) -> list[Draft]:
    body = _remember_body(sentence)
    if body is None:
        return []
    if not body:
        body = "；".join(others).strip()
    if not body:
        return []
    keyed = _contacts(body, USER_CONFIDENCE) + [d for d in _preferences(body) if d.tier == "fact"]
    return keyed or [_node("note", body)]


# The runtime's own confirmation question (app/tools/policy/confirm.py QUESTION): a "yes" to
# it runs the tool, whose result is the evidence; the question itself (masked values, "shall
# I go ahead?") is not a decision worth remembering.
_READBACK = re.compile(r"^\s*(please confirm:|请确认：)", re.I)


def _confirmed_proposal(facts: TurnFacts) -> list[Draft]:
    if not facts.previous_assistant or not _CONFIRM_REPLY.match(normalize(facts.user_text).strip()):
        return []
    if _READBACK.match(facts.previous_assistant):
        return []
    for sentence in reversed(sentences(facts.previous_assistant)):
        if _PROPOSAL.search(normalize(sentence)):
            return [_node("decision", "已确认 / confirmed: " + sentence[:300])]
    return []


def _leaves(data: Any, depth: int = 0) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """(field name, value, the dict holding it) for every scalar in a tool result."""
    if depth > 4:
        return
    if isinstance(data, dict):
        for name, value in data.items():
            if isinstance(value, dict | list):
                yield from _leaves(value, depth + 1)
            else:
                yield str(name).lower(), value, data
    elif isinstance(data, list):
        for value in data[:50]:
            yield from _leaves(value, depth + 1)


def _verified(owner: dict[str, Any], name: str) -> bool:
    flags = [f"{name}_{flag}" for flag in _VERIFIED_FLAGS] + list(_VERIFIED_FLAGS)
    return any(owner.get(flag) is True for flag in flags) or name.startswith("verified_")


# A tool that refuses a value says the value is wrong: "that number doesn't match the account".
_REFUSES_VALUE = re.compile(r"_mismatch$|^value_not_allowed$|^invalid_(value|arguments)$")
# A contact change a tool reports as done: the value it was given is now the customer's.
_CHANGED = frozenset({"updated", "verified", "confirmed"})


def _contact_values(arguments: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(contact field, value) named by a call's arguments: `phone=…`, `email=…`, or
    `field=phone, value=…` (update_contact_info's shape)."""
    for name in ("phone", "email"):
        value = arguments.get(name)
        if isinstance(value, str) and value.strip():
            yield name, value
    named, value = arguments.get("field"), arguments.get("value")
    if named in ("phone", "email") and isinstance(value, str) and value.strip():
        yield str(named), value


def _clean_contact(name: str, value: str) -> str:
    value = value.strip()
    if name == "email":
        return value
    digits = re.sub(r"[\s-]", "", value)
    return digits[3:] if digits.startswith("+86") and len(digits) == 14 else digits


def from_tools(results: Iterable[ToolEvidence]) -> Extraction:
    out = Extraction()
    for result in results:
        if not result.ok:
            if _REFUSES_VALUE.search(result.error_code):
                out.refuted.update(
                    normalize(_clean_contact(n, v)) for n, v in _contact_values(result.arguments)
                )
            continue
        data = result.data if isinstance(result.data, dict) else {}
        if data.get("status") in _CHANGED:
            for name, value in _contact_values(result.arguments):
                if data.get("field") in (None, name):
                    clean = _clean_contact(name, value)
                    out.drafts.append(_keyed(f"contact.{name}", clean, TOOL_CONFIDENCE, "tool"))
        for name, value, owner in _leaves(result.data):
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                seen = normalize(str(value)).strip()
                out.evidence.update({seen, re.sub(r"[\s-]", "", seen)})
            field_name = name.removeprefix("verified_")
            if field_name not in {"email", "phone"} or not isinstance(value, str):
                continue
            if _verified(owner, name):
                clean = value if field_name == "email" else re.sub(r"[\s-]", "", value)
                out.drafts.append(_keyed(f"contact.{field_name}", clean, TOOL_CONFIDENCE, "tool"))
    return out


def extract(facts: TurnFacts) -> Extraction:
    """Drafts to write after a turn, and the evidence its tool results carry."""
    out = from_tools(facts.tool_results)
    if is_forget_command(facts.user_text):
        return Extraction([], out.evidence, out.refuted)  # "别记这个" teaches nothing new
    parts = sentences(facts.user_text)
    for i, sentence in enumerate(parts):
        lowered = normalize(sentence)
        remembered = _remembered(sentence, [p for j, p in enumerate(parts) if j != i])
        if remembered:
            out.drafts.extend(remembered)
            continue
        if _QUESTION.search(lowered):
            continue
        out.drafts.extend(_contacts(sentence, STATED_CONTACT_CONFIDENCE))
        if _DECISION.search(lowered):
            out.drafts.append(_node("decision", sentence))
            continue
        # Clause by clause: "我喜欢顺丰，今天想吃面" keeps the first and drops the second;
        # "从现在开始，请用简体中文" carries "from now on" into the clauses after it.
        durable = False
        for clause in _CLAUSE.findall(sentence):
            lowered_clause = normalize(clause)
            durable = durable or bool(_DURABLE.search(lowered_clause))
            if not durable and _transient(lowered_clause):
                continue
            out.drafts.extend(_preferences(clause, durable))
    out.drafts.extend(_confirmed_proposal(facts))
    kept = [
        d
        for d in out.drafts
        if not (
            d.key.startswith("contact.")
            and d.source != "tool"
            and normalize(d.value) in out.refuted
        )
    ]
    return Extraction(_dedupe(kept), out.evidence, out.refuted)


def proposals_to_drafts(
    proposals: Iterable[Proposal], user_text: str, evidence: set[str]
) -> list[Draft]:
    """Active when the user's words or a tool result carry the value; pending otherwise."""
    said = normalize(user_text)
    out = []
    for p in proposals:
        value = normalize(p.value).strip()
        proven = bool(value) and (value in said or value in evidence)
        out.append(
            Draft(
                key=p.key,
                value=p.value,
                entity=p.entity,
                confidence=USER_CONFIDENCE if proven else 0.6,
                status="active" if proven else "pending",
                source="rule" if proven else "model",
            )
        )
    return out


def _dedupe(drafts: list[Draft]) -> list[Draft]:
    best: dict[str, Draft] = {}
    for draft in drafts:
        kept = best.get(draft.key)
        if kept is None or draft.confidence > kept.confidence:
            best[draft.key] = draft
    return list(best.values())
