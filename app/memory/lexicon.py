"""Words the memory rules know: entities (couriers, formats, languages, channels), the keys
they belong to, the words that describe each key, and how a query is cut into search terms.

Chinese has no spaces and the FTS index is trigram-based, so a query is split on stop words
into chunks: chunks of three or more characters search the index; two-character chunks (most
Chinese words) are matched as substrings over the user's own rows.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from app.text.script import HAN

# category -> canonical value -> aliases (lower case). Longer aliases are tried first.
ENTITIES: dict[str, dict[str, tuple[str, ...]]] = {
    "courier": {
        "顺丰": ("顺丰速运", "顺丰快递", "顺丰", "sf express", "sf-express", "sfexpress"),
        "京东物流": ("京东物流", "京东快递", "jd logistics"),
        "中通": ("中通快递", "中通", "zto"),
        "圆通": ("圆通快递", "圆通", "yto"),
        "申通": ("申通快递", "申通"),
        "韵达": ("韵达快递", "韵达", "yunda"),
        "EMS": ("中国邮政", "ems"),
        "DHL": ("dhl",),
        "FedEx": ("fedex", "联邦快递"),
        "UPS": ("ups",),
    },
    "invoice_format": {
        "PDF": ("pdf",),
        "纸质": ("纸质", "paper", "printed"),
        "电子": ("电子版", "电子", "electronic", "e-invoice"),
    },
    "language": {
        "简体中文": ("简体中文", "简体字", "简体", "简中", "simplified chinese"),
        "繁体中文": ("繁体中文", "繁體中文", "繁体", "繁體", "traditional chinese"),
        "English": ("英文", "英语", "english"),
        "中文": ("中文", "普通话", "chinese", "mandarin"),
    },
    "channel": {
        "email": ("电子邮件", "邮件", "email", "e-mail"),
        "短信": ("短信", "sms", "text message"),
        "电话": ("打电话", "电话", "phone call", "call me"),
        "微信": ("微信", "wechat"),
    },
}

CATEGORY_KEYS = {
    "courier": "preference.courier",
    "invoice_format": "preference.invoice_format",
    "language": "preference.language",
    "channel": "preference.contact_channel",
}

# Words indexed with a keyed fact's value, so "快递" or "courier" finds preference.courier.
KEY_LABELS = {
    "preference.courier": "快递偏好 courier 快递 物流 寄件 delivery",
    "preference.invoice_format": "发票格式 invoice format 发票",
    "preference.language": "语言偏好 language 回复语言",
    "preference.contact_channel": "联系方式偏好 contact channel 联系方式",
    "contact.email": "邮箱 email 电子邮件",
    "contact.phone": "手机号 phone 电话 手机 号码 mobile",
    "contact.address": "地址 address 收货地址",
}

# Query words that point at a key, in either language.
KEY_CUES: dict[str, tuple[str, ...]] = {
    "preference.courier": ("快递", "物流", "寄", "发货", "courier", "ship", "deliver"),
    "preference.invoice_format": ("发票", "invoice"),
    "preference.language": ("语言", "中文", "英文", "language", "chinese", "english"),
    "preference.contact_channel": ("联系我", "通知我", "contact me", "notify"),
    "contact.email": ("邮箱", "邮件", "email", "e-mail"),
    "contact.phone": ("手机", "电话", "号码", "phone", "mobile"),
    "contact.address": ("地址", "address"),
}

# Keys and fact types a turn points at without naming them: by intent, or by a type word.
INTENT_KEYS: dict[str, tuple[str, ...]] = {
    "update_contact": (
        "contact.email",
        "contact.phone",
        "contact.address",
        "preference.contact_channel",
    ),
    "return_request": ("preference.courier",),
    "refund_request": ("preference.invoice_format",),
    "track_shipment": ("preference.courier",),
    "human_handoff": ("preference.language", "preference.contact_channel"),
}
INTENT_KINDS: dict[str, tuple[str, ...]] = {
    "update_contact": ("contact",),
    "return_request": ("decision",),
    "refund_request": ("decision",),
    "complaint": ("decision", "note"),
}
TYPE_CUES: dict[str, tuple[str, ...]] = {
    "decision": ("方案", "决定", "办法", "安排", "plan", "option", "decid", "agreed"),
    "preference": ("偏好", "习惯", "老样子", "照旧", "usual", "prefer"),
    "contact": ("联系方式", "contact details"),
}
# "还记得我什么时候方便接电话吗", "do you remember where …": the customer asks what they told us
# to remember, so their notes are what the question is about (scored like an implied key).
ASKED_CUES: dict[str, tuple[str, ...]] = {
    "note": ("还记得", "记不记得", "你记得", "do you remember", "you still remember"),
}

_CJK_RUN = re.compile(f"[{HAN}]+")
_LATIN = re.compile(r"[a-z0-9][a-z0-9@._+\-]*")
_CJK_STOP = (
    "上一次 上次 上回 之前 以前 原来 那个 这个 那些 这些 还是 一样 照旧 老样子 帮我 给我 我的 "
    "你们 我们 一下 请问 可以 记得 是不是 什么 怎么 多少 的 了 吗 呢 吧 啊 呀 我 你 他 她 它 是 "
    "在 要 把 给 和 跟 用 请 都 也 就 还 再 又 很 会 能 想 去 来 个 一 按 同"
).split()
_CJK_STOP_RE = re.compile("|".join(sorted(map(re.escape, _CJK_STOP), key=len, reverse=True)))
_LATIN_STOP = frozenset(
    "the a an and or my me i you to of for in on as with is was be it that this last time "
    "before like same please can could would use used again what which remember do did does "
    "how when where why are were we our your us usual just also not no yes ok from at by".split()
)


@dataclass(frozen=True)
class Entity:
    category: str
    value: str


@dataclass(frozen=True)
class QueryTerms:
    fts: tuple[str, ...]  # terms of 3+ characters for the trigram index
    short: tuple[str, ...]  # 2-character CJK words, matched as substrings
    units: tuple[str, ...]  # scoring units: latin words and CJK bigrams

    @property
    def empty(self) -> bool:
        return not (self.fts or self.short)


def normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def _alias_pattern(alias: str) -> re.Pattern[str]:
    if alias.isascii():
        return re.compile(rf"(?<![a-z0-9]){re.escape(alias)}(?![a-z0-9])")
    return re.compile(re.escape(alias))


_ALIASES: list[tuple[re.Pattern[str], Entity]] = sorted(
    (
        (_alias_pattern(alias), Entity(category, value))
        for category, values in ENTITIES.items()
        for value, aliases in values.items()
        for alias in aliases
    ),
    key=lambda pair: -len(pair[0].pattern),
)


def find_entities(text: str) -> list[Entity]:
    """Entities named in `text`, first mention first, each once (longest alias wins)."""
    lowered = normalize(text)
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, Entity]] = []
    for pattern, entity in _ALIASES:
        for match in pattern.finditer(lowered):
            span = match.span()
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue
            taken.append(span)
            found.append((span[0], entity))
    seen: set[Entity] = set()
    out = []
    for _, entity in sorted(found, key=lambda pair: pair[0]):
        if entity not in seen:
            seen.add(entity)
            out.append(entity)
    return out


def keys_cued(text: str) -> set[str]:
    lowered = normalize(text)
    return {key for key, cues in KEY_CUES.items() if any(cue in lowered for cue in cues)}


def kinds_cued(text: str, intent: str | None = None) -> set[str]:
    """Fact types the wording ("方案", "plan", "do you remember") or the intent points at."""
    lowered = normalize(text)
    found = {kind for kind, cues in TYPE_CUES.items() if any(cue in lowered for cue in cues)}
    return found | kinds_asked(text) | set(INTENT_KINDS.get(intent or "", ()))


def kinds_asked(text: str) -> set[str]:
    """Fact types a question asks to be recalled ("do you remember …?" -> note)."""
    lowered = normalize(text)
    return {kind for kind, cues in ASKED_CUES.items() if any(cue in lowered for cue in cues)}


def intent_keys(intent: str | None) -> set[str]:
    return set(INTENT_KEYS.get(intent or "", ()))


def query_terms(text: str, max_terms: int = 24) -> QueryTerms:
    lowered = normalize(text)
    fts: list[str] = []
    short: list[str] = []
    units: list[str] = []
    for word in _LATIN.findall(lowered):
        word = word.strip("._+-@")
        if len(word) < 2 or word in _LATIN_STOP:
            continue
        units.append(word)
        if len(word) >= 3:
            fts.append(word)
    for run in _CJK_RUN.findall(lowered):
        for chunk in _CJK_STOP_RE.split(run):
            if len(chunk) == 2:
                short.append(chunk)
            # Trigram tokens of the chunk: any one of them can find a memory.
            fts.extend(chunk[i : i + 3] for i in range(len(chunk) - 2))
            units.extend(chunk[i : i + 2] for i in range(len(chunk) - 1))
    return QueryTerms(
        fts=tuple(dict.fromkeys(fts))[:max_terms],
        short=tuple(dict.fromkeys(short))[:max_terms],
        units=tuple(dict.fromkeys(units))[:max_terms],
    )


def fts_query(terms: tuple[str, ...]) -> str:
    """An FTS5 MATCH expression that ORs the terms as quoted strings (no operators leak)."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


def describe(key: str, value: str, entity: str | None) -> str:
    """The text the index holds for a memory: the key's words, the value, the entity."""
    parts = [KEY_LABELS.get(key, ""), value]
    if entity and entity.lower() not in value.lower():
        parts.append(entity)
    return " ".join(part for part in parts if part).strip()
