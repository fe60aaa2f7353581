"""A synthetic knowledge base for the knowledge bench: policy documents in Chinese and English
made by recombining the demo documents' own pieces (data/knowledge/*.md).

Each generated document is a variant of one demo document under a subject of its own ("生鲜 ·
华南", "Furniture for business customers"): 3-9 of that document's sections, their sentences
shuffled, a few sentences borrowed from the other documents of its language, and every number
given a new value. A document is therefore about one topic, in the words policies use, and a
topic's words are about as common across the corpus as they are across the demo shop's policies
("refund" in the refund pages and in some others, "工作日" in many); the subjects add the rarer
words a large knowledge base has besides (product lines, channels, regions). Sections stay under
the chunker's 600 characters, so a section is about one chunk. Seeded: the same seed gives the
same corpus.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from app.knowledge.parsing import split_front_matter

DEMO = Path(__file__).resolve().parents[1] / "data" / "knowledge"
SECTION_CHARS = 520  # under the chunker's 600, so a section is one chunk
_NUMBER = re.compile(r"\d+")
_ZH_SENTENCE = re.compile(r"(?<=[。！？])")
_EN_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")

SUBJECTS = {
    "zh": (
        ["家电", "手机数码", "生鲜", "图书", "母婴", "美妆", "家具", "运动户外", "宠物用品", "珠宝",
         "汽车用品", "酒水", "医药保健", "办公用品", "二手良品", "定制商品"],
        ["华东", "华南", "华北", "西南", "西北", "东北", "海外仓", "企业客户", "会员", "门店自提",
         "直播间", "小程序", "预售", "以旧换新"],
    ),
    "en": (
        ["Appliances", "Phones and tablets", "Fresh food", "Books", "Baby products", "Beauty",
         "Furniture", "Outdoor gear", "Pet supplies", "Jewellery", "Car accessories", "Wine",
         "Pharmacy", "Office supplies", "Refurbished items", "Custom orders"],
        ["East China", "South China", "North China", "the southwest", "the northwest",
         "the northeast", "overseas warehouses", "business customers", "members",
         "store pick-up", "live-stream sales", "the mini program", "pre-orders", "trade-ins"],
    ),
}  # fmt: skip


@dataclass
class Section:
    heading: str
    sentences: list[str] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)  # lists and tables, kept whole


@dataclass(frozen=True)
class Source:
    """One demo document, taken apart."""

    title: str
    language: str
    tags: tuple[str, ...]
    sections: list[Section]


@dataclass(frozen=True)
class Doc:
    source: str
    title: str
    language: str
    tags: tuple[str, ...]
    markdown: str


def demo_sources(folder: Path = DEMO) -> list[Source]:
    out = []
    for path in sorted(folder.glob("*.md")):
        meta, body = split_front_matter(path.read_text(encoding="utf-8"))
        language = str(meta.get("language", "en"))
        splitter = _ZH_SENTENCE if language == "zh" else _EN_SENTENCE
        sections: list[Section] = []
        for block in re.split(r"\n\s*\n", body):
            block = block.strip()
            if block.startswith("## "):
                sections.append(Section(block[3:].strip()))
            elif not block or block.startswith("#") or not sections:
                continue
            elif block.startswith(("|", "- ", "1. ")):
                sections[-1].blocks.append(block)
            else:
                text = "".join(block.split()) if language == "zh" else " ".join(block.split())
                sections[-1].sentences.extend(s.strip() for s in splitter.split(text) if s.strip())
        tags = tuple(str(t) for t in meta.get("tags") or [])
        out.append(Source(str(meta.get("title", path.stem)), language, tags, sections))
    return out


def _renumber(text: str, rng: random.Random) -> str:
    def new(match: re.Match[str]) -> str:
        digits = len(match.group())
        return str(rng.randint(10 ** (digits - 1) if digits > 1 else 1, 10**digits - 1))

    return _NUMBER.sub(new, text)


def _section(section: Section, borrowed: list[str], language: str, rng: random.Random) -> str:
    """The section's sentences shuffled, now and then one from another document, its lists and
    tables after them; under SECTION_CHARS unless a table alone is longer."""
    glue = "" if language == "zh" else " "
    sentences = rng.sample(section.sentences, len(section.sentences))
    if borrowed and rng.random() < 0.3:
        sentences.insert(rng.randint(0, len(sentences)), rng.choice(borrowed))
    kept: list[str] = []
    for sentence in sentences:
        if kept and len(glue.join([*kept, sentence])) > SECTION_CHARS:
            break
        kept.append(sentence)
    return _renumber("\n\n".join([glue.join(kept), *section.blocks]).strip(), rng)


def documents(seed: int) -> Iterator[Doc]:
    """Generated documents without end, alternating zh and en, each a variant of one demo
    document."""
    rng = random.Random(seed)
    sources = demo_sources()
    by_language = {lang: [s for s in sources if s.language == lang] for lang in ("zh", "en")}
    pool = {
        lang: [t for s in of for sec in s.sections for t in sec.sentences]
        for lang, of in by_language.items()
    }
    for n in range(10**9):
        language = "zh" if n % 2 == 0 else "en"
        base = rng.choice(by_language[language])
        products, channels = SUBJECTS[language]
        subject = (
            f"{rng.choice(products)} · {rng.choice(channels)}"
            if language == "zh"
            else f"{rng.choice(products)} for {rng.choice(channels)}"
        )
        title = f"{subject}: {base.title}"
        parts = [f"# {title}"]
        count = min(len(base.sections), rng.randint(3, 9))
        for section in rng.sample(base.sections, count):
            parts.append(f"## {_renumber(section.heading, rng)}")
            parts.append(_section(section, pool[language], language, rng))
        yield Doc(
            source=f"bench/{n:06d}.{language}.md",
            title=title,
            language=language,
            tags=base.tags,
            markdown="\n\n".join(parts) + "\n",
        )
