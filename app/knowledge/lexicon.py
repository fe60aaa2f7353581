"""Everyday language, apart from the tenant's documents: how common a word is, and where the
words of a Chinese run begin and end.

A call centre's documents are a few hundred passages: in them "many" or "take" may occur once
and so weigh as much as "PayPal" by the documents' own counts. How often a word occurs in
everyday English or Chinese (wordfreq's word lists, in the wheel) says what the documents are
too few to say: "time", "take" and "公司" are said about everything, "refund" and "发票" about
one thing. `specificity` turns it into a factor on a question word's weight.

Chinese has no spaces; the index keeps every character pair of a text, and a question asked
pairs straddling its words too ("钱可以退到我朋友的账户" has 我朋 and 友的). `segment` cuts a run
into its most likely words (a unigram model over the word list); a pair is a word when the
dictionary says so, or when it stands between two characters the dictionary leaves alone
(金卡 in 金卡会员: a word of the trade the list does not have). A pair across a dictionary
word's edge is not.
"""

from __future__ import annotations

import gzip
import importlib.util
import math
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import msgpack

from app.knowledge.analysis import stem

# Zipf frequency (log10 of occurrences per billion words) at and above which a word says
# least, at and below which it weighs in full; between, linearly. "time" is 6.3, "take" 5.9,
# "holiday" 4.7, "refund" 3.9.
EVERYDAY = 6.5
SPECIFIC = 4.5
LEAST = 0.15  # what the commonest words keep of their weight
LONGEST = 4  # characters of the longest Chinese word looked for
_UNSEEN = 0.0  # Zipf of a character the list does not have as a word


def _package_file(package: str, name: str) -> Path:
    """A data file shipped in an installed package's wheel, found without importing the
    package (wordfreq's import pulls in its text tools: ~2 s; pypinyin's its phrase tables:
    ~50 MB)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{package} is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / name


def _word_list(language: str) -> Iterator[tuple[str, float]]:
    """wordfreq's small word list of a language as (word, Zipf frequency). The file is a
    gzipped msgpack list: a header, then the words of each frequency band, the band's index
    being minus its frequency in centibels (wordfreq's "cBpack"). Read a band at a time: the
    whole list at once left its few megabytes in the process's resident memory."""
    path = _package_file("wordfreq", f"data/small_{language}.msgpack.gz")
    with gzip.open(path) as f:
        unpacker = msgpack.Unpacker(f, raw=False)
        bands = unpacker.read_array_header() - 1
        header = unpacker.unpack()
        if header != {"format": "cB", "version": 1}:
            raise RuntimeError(f"{path}: not a word list this code reads ({header})")
        for centibels in range(bands):
            for word in unpacker.unpack():
                yield word, 9 - centibels / 100


@dataclass(frozen=True)
class _Tables:
    zipf: dict[str, int]  # tenths of a Zipf frequency (small ints are shared objects)
    readings: dict[str, frozenset[str]]


_tables: _Tables | None = None
_lock = threading.Lock()


def _read() -> _Tables:
    """English stems (their forms together) more common than SPECIFIC, the rest weighing in
    full anyway; every Chinese word of the list up to LONGEST characters, the segmentation's
    dictionary; the readings of the characters those words are written with."""
    per_billion: dict[str, float] = {}
    for word, frequency in _word_list("en"):
        if word.isascii() and word.isalpha():
            key = stem(word)
            per_billion[key] = per_billion.get(key, 0.0) + 10**frequency
    english = {k: n for k, n in per_billion.items() if math.log10(n) > SPECIFIC}
    chinese: dict[str, float] = {}
    for word, frequency in _word_list("zh"):
        if not word.isascii() and len(word) <= LONGEST:
            chinese[word] = chinese.get(word, 0.0) + 10**frequency
    zipf = {k: round(10 * math.log10(n)) for k, n in (english | chinese).items() if n >= 1}
    characters = {ch for word in chinese for ch in word}
    return _Tables(zipf, _readings(characters))


def load() -> None:
    """Read the word lists and readings, once (~0.1 s, ~10 MB resident): the first search of
    a process does it in a worker thread (`KnowledgeBase.rank`), so a process that answers no
    policy question never pays for them, and anything else asking first reads them then."""
    _get()


def loaded() -> bool:
    return _tables is not None


def _get() -> _Tables:
    global _tables
    if _tables is None:
        with _lock:
            if _tables is None:
                _tables = _read()
    return _tables


def specificity(unit: str) -> float:
    """What of its weight a question unit keeps for how common it is in everyday language:
    1 for a word that is rare or not in the list (a name, a trade word), LEAST for the
    commonest."""
    tenths = _get().zipf.get(unit)
    if tenths is None:
        return 1.0
    return max(LEAST, min(1.0, (EVERYDAY - tenths / 10) / (EVERYDAY - SPECIFIC)))


def is_word(text: str) -> bool:
    return len(text) > 1 and text in _get().zipf


def segment(run: str) -> list[str]:
    """A Chinese run cut into its most likely words (single characters where no word fits)."""
    zipf = _get().zipf
    n = len(run)
    best: list[tuple[float, int]] = [(0.0, 0)] + [(-math.inf, 0)] * n
    for end in range(1, n + 1):
        for start in range(max(0, end - LONGEST), end):
            piece = run[start:end]
            z = zipf.get(piece)
            if z is None and len(piece) > 1:
                continue
            # log10 probability of the piece: its Zipf less the 9 of "per billion"
            value = best[start][0] + (z / 10 if z is not None else _UNSEEN) - 9
            if value > best[end][0]:
                best[end] = (value, start)
    words: list[str] = []
    end = n
    while end > 0:
        start = best[end][1]
        words.append(run[start:end])
        end = start
    return words[::-1]


def straddling(run: str) -> set[str]:
    """The character pairs of a Chinese run that cross a dictionary word's edge: a pair with
    one character in a word of two or more and the other outside it."""
    out: set[str] = set()
    words = segment(run)
    at = 0
    for left, right in pairwise(words):
        at += len(left)
        if len(left) > 1 or len(right) > 1:
            out.add(run[at - 1 : at + 1])
    return out


_READING = re.compile(r'^"(\d+)": "([^"]+)"')


def _readings(characters: set[str]) -> dict[str, frozenset[str]]:
    """The readings of `characters` without tones (pypinyin's table: 和 -> he, huo, hu). Its
    JSON has a character a line, read a line at a time for the same reason as the words."""
    shared: dict[str, frozenset[str]] = {}  # most characters share a reading with others
    out: dict[str, frozenset[str]] = {}
    with _package_file("pypinyin", "pinyin_dict.json").open(encoding="utf-8") as lines:
        for line in lines:
            entry = _READING.match(line)
            if entry is None or chr(int(entry[1])) not in characters:
                continue
            toneless = entry[2].translate(_TONE_MARKS)
            out[chr(int(entry[1]))] = shared.setdefault(toneless, frozenset(toneless.split(",")))
    if not out:
        raise RuntimeError("pypinyin's pinyin_dict.json: no reading this code can read")
    return out


_TONE_MARKS = str.maketrans("āáǎàēéěèīíǐìōóǒòūúǔùǖǘǚǜüńňǹḿ", "aaaaeeeeiiiioooouuuuvvvvvnnnm")


def sounds_like(a: str, b: str) -> bool:
    """Whether two Chinese words of the same length can be read alike, tones aside (积份 and
    积分, 多旧 and 多久: what an input method or a speech recogniser writes for the other)."""
    if len(a) != len(b) or a == b:
        return a == b
    readings = _get().readings
    return all(
        x == y or bool(readings.get(x, frozenset()) & readings.get(y, frozenset()))
        for x, y in zip(a, b, strict=True)
    )
