"""Text cut into the units knowledge search compares: Latin word stems and Chinese bigrams.

One analyser for both engines and for both sides (the chunk when it is stored, the question
when it is asked), so a unit either engine finds is a unit the scorer counts. Chinese has no
spaces: a run of Han characters gives its overlapping character pairs ("退款到账" -> 退款, 款到,
到账), which holds the two-character words most Chinese words are without a dictionary. A
question's runs are first cut at function words ("的", "吗", "怎么"), so its pairs are content.
Latin words are lower-cased, folded (NFKC) and stemmed lightly ("returns", "returned" ->
"return"); function words are dropped from questions only.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from app.text.script import HAN

_LATIN = re.compile(r"[a-z0-9]+")
_TOKEN = re.compile(f"[a-z0-9]+|[{HAN}]+")

LATIN_STOP = frozenset(
    """a about after again all also am an and any are as at be been before being both but by
    can could did do does doing done don during each either else ever for from get gets got
    had has have having he her here hers him his how i if in into is it its just let like me
    might more most much must my myself need now of off on once only or other our ours out
    over own please same shall she should so some such than that the their them then there
    these they this those through to too under until up us very was we were what whatever
    when where whether which while who whom whose why will with would yes you your yours
    ve ll re s t d m i'm hi hello thanks thank tell know want wanted
    another anybody anyone anything anyway anywhere somebody someone something somewhere
    everybody everyone everything nobody nothing still whole go goes going gone getting
    really quite rather maybe make makes made""".split()
)

# Chinese function and question words: a question's bigram that is one of them is not searched
# for, nor a bigram that overlaps one ("可以寄到" gives 寄到, not 以寄: a pair across a word's edge
# is not a word), nor a character of theirs standing alone. A run is not cut at the single
# characters below ("请" is in "申请", "会" in "会员"), only at sentence-final particles.
_HAN_STOP_WORDS = frozenset(
    """请问 你们 我们 您们 还是 或者 可以 能否 能不 不能 怎么 怎样 如何 什么 是否 是不 不是
    有没 没有 一下 这个 那个 麻烦 帮我 告诉 知道 为什 么时 时候 多少 要不 需要 应该 还能 还可
    的话 一般 以后 之后 以前 之前 然后 已经 现在 还有 有人 有的""".split()
)
HAN_STOP_CHARS = frozenset(
    "的地得了吗呢吧啊呀哦嘛么是在我你您他她它和跟与及或都也就还再又很会能想要把给请一个这那谁嗯么怎样何哪几多少有"
)
_HAN_INTERROGATIVES = frozenset("哪几")
_HAN_PARTICLES = re.compile("[吗呢吧啊呀哦嘛]+")


def normalize(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def stem(word: str) -> str:
    """A light English stemmer: plural, -ing and -ed forms meet their base ("shipping",
    "shipped", "ships" -> "ship"; "charges", "charged", "charge" -> "charg")."""
    if word.isdigit() or len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix, keep in (("ing", 4), ("ed", 4)):
        if word.endswith(suffix) and len(word) - len(suffix) >= keep - 1:
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # "shipp" -> "ship"
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def text_units(text: str) -> list[str]:
    """Every unit of a stored text (function words kept: a question drops its own)."""
    out: list[str] = []
    for token in _TOKEN.findall(normalize(text)):
        if token[0].isascii():
            out.append(stem(token))
        else:
            out.extend(bigrams(token))
            out.extend(token)  # single characters: a misspelt word still shares them
    return out


def terms_column(*texts: str) -> str:
    """The `terms` column of a chunk: its distinct units, space separated."""
    units: dict[str, None] = {}
    for text in texts:
        units.update(dict.fromkeys(text_units(text)))
    return " ".join(units)


def question_units(text: str) -> list[str]:
    """The content units of a question, first mention first, each once: Latin stems, and of
    each Chinese run its bigrams, then its single characters (function words left out)."""
    out: dict[str, None] = {}
    for token in _TOKEN.findall(normalize(text)):
        if token[0].isascii():
            if token not in LATIN_STOP and (len(token) > 1 or token.isdigit()):
                out[stem(token)] = None
            continue
        for run in _HAN_PARTICLES.split(token):
            out.update(dict.fromkeys(_han_question_units(run)))
    return list(out)


def _stop_pair(pair: str) -> bool:
    """A function word, or an interrogative with its measure word or ending: 哪个, 哪里, 哪家,
    几个, 几次 ask which, where or how many of something."""
    return pair in _HAN_STOP_WORDS or pair[0] in _HAN_INTERROGATIVES


def _han_question_units(run: str) -> list[str]:
    pairs = bigrams(run)
    stopped = {i + k for i, b in enumerate(pairs) if _stop_pair(b) for k in (0, 1)}
    kept = [b for i, b in enumerate(pairs) if i not in stopped and i + 1 not in stopped]
    return kept + [c for i, c in enumerate(run) if c not in HAN_STOP_CHARS and i not in stopped]


def latin_words(text: str) -> list[str]:
    """The stemmed Latin words of a text, in order (the glossary matches phrases on them)."""
    return [stem(w) for w in _LATIN.findall(normalize(text))]


class Units:
    """A chunk's units as its `terms` column holds them, and its heading's (title, tags and
    section path): what the scorer asks "has it this unit?" of. A search scores up to 100
    candidates of hundreds of units each; building a set of each one's units for every search
    was a fifth of a search's time (bench/knowledge.py), so a unit is looked for in the column's
    text instead, and a set built only when the scorer wants every unit (a misspelt word's
    near matches)."""

    __slots__ = ("heading", "padded")

    def __init__(self, terms: str, heading: frozenset[str] = frozenset()) -> None:
        self.padded = f" {terms} "
        self.heading = heading

    def __contains__(self, unit: object) -> bool:
        return unit in self.heading or f" {unit} " in self.padded

    def __iter__(self) -> Iterator[str]:
        yield from self.padded.split()
        yield from self.heading
