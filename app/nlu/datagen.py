"""Deterministic generator of the training set: templates x value pools x noise.

`python -m app.nlu.datagen` (or `hermes nlu datagen`) rewrites data/nlu/train.jsonl from
data/nlu/templates.yaml with the seed stored there. Training reads the JSONL only, so the
committed data, not this script, is what the models are built from.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import yaml

from app.nlu._values import RENDERERS
from app.nlu.dataset import TRAIN_FILE, Example, Span, check, write_jsonl
from app.nlu.types import INTENTS
from app.settings import PROJECT_ROOT

DATA_DIR = PROJECT_ROOT / "data" / "nlu"
TEMPLATES_FILE = "templates.yaml"
_ALTERNATION = re.compile(r"\(([^()]*)\)")
_SLOT = re.compile(r"\{(\w+)\}")
_ZH_END = ["", "", "", "。", "？", "！", "~", "啊"]
_EN_END = ["", "", "", ".", "?", "!", " pls", " please"]


def load_spec(path: Path) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    missing = set(INTENTS) - set(spec["templates"])
    if missing:
        raise ValueError(f"{path}: no templates for {sorted(missing)}")
    return spec


def _expand(template: str, rng: random.Random) -> str:
    """Resolve (a|b) choices innermost first, then tidy the spaces they leave behind."""
    while True:
        m = _ALTERNATION.search(template)
        if m is None:
            break
        template = template[: m.start()] + rng.choice(m.group(1).split("|")) + template[m.end() :]
    template = re.sub(r"\s+", " ", template).strip()
    return re.sub(r"\s+([,.?!])", r"\1", template)


def _typo_en(text: str, rng: random.Random) -> str:
    words = list(re.finditer(r"[a-z]{4,}", text))
    if not words:
        return text
    m = rng.choice(words)
    w = m.group()
    i = rng.randrange(1, len(w) - 1)
    op = rng.choice(["drop", "swap", "double"])
    if op == "drop":
        w = w[:i] + w[i + 1 :]
    elif op == "swap":
        w = w[: i - 1] + w[i] + w[i - 1] + w[i + 1 :]
    else:
        w = w[:i] + w[i] + w[i:]
    return text[: m.start()] + w + text[m.end() :]


def _typo_zh(text: str, rng: random.Random, typos: dict[str, list[str]]) -> str:
    present = [word for word in typos if word in text]
    if not present:
        return text
    word = rng.choice(present)
    return text.replace(word, rng.choice(typos[word]), 1)


def _noisy(literal: str, lang: str, rng: random.Random, spec: dict[str, Any], typo: bool) -> str:
    if not typo:
        return literal
    return _typo_zh(literal, rng, spec["typos"]["zh"]) if lang == "zh" else _typo_en(literal, rng)


def render(template: str, lang: str, rng: random.Random, spec: dict[str, Any]) -> Example:
    """One utterance from one template: slots filled, then fillers, typos and punctuation on
    the literal text only, so every span still covers exactly its value."""
    expanded = _expand(template, rng)
    typo_part = rng.randrange(len(_SLOT.split(expanded))) if rng.random() < 0.15 else -1
    pieces: list[str] = []
    spans: list[Span] = []
    length = 0
    for index, part in enumerate(_SLOT.split(expanded)):
        if index % 2 == 0:
            literal = _noisy(part, lang, rng, spec, typo=index == typo_part)
            pieces.append(literal)
            length += len(literal)
            continue
        prefix, surface, value = RENDERERS[part](rng, lang, spec)
        if prefix and pieces and pieces[-1].rstrip().endswith(("on", "since", "by")):
            prefix = ""  # the template already has a preposition
        pieces.append(prefix)
        length += len(prefix)
        spans.append(Span(part, length, length + len(surface), value))
        pieces.append(surface)
        length += len(surface)
    text = "".join(pieces)
    head = ""
    if rng.random() < 0.2:
        head = rng.choice(spec["fillers"][lang])
    elif lang == "en" and rng.random() < 0.4:
        text = text[:1].upper() + text[1:] if not spans or spans[0].start > 0 else text
    if not text or text[-1] not in "。？！?!.~":
        text += rng.choice(_ZH_END if lang == "zh" else _EN_END)
    shifted = tuple(Span(s.name, s.start + len(head), s.end + len(head), s.value) for s in spans)
    return Example(head + text, "", shifted)


def generate(spec: dict[str, Any], seed: int | None = None) -> list[Example]:
    rng = random.Random(spec["seed"] if seed is None else seed)
    pools = {
        "products": spec["products"],
        "email_names": spec["email_names"],
        "email_domains": spec["email_domains"],
        "tracking_prefixes": spec["tracking_prefixes"],
        "today": spec["today"],
        "typos": spec["typos"],
        "fillers": spec["fillers"],
    }
    examples: list[Example] = []
    for intent in INTENTS:
        by_lang = spec["templates"][intent]
        seen: set[str] = set()
        attempts = 0
        # An intent with many topics (policy_question) can ask for more examples than the rest.
        wanted = spec.get("per_intent_of", {}).get(intent, spec["per_intent"])
        while len(seen) < wanted and attempts < wanted * 50:
            attempts += 1
            lang = "en" if rng.random() < spec["en_share"] else "zh"
            example = render(rng.choice(by_lang[lang]), lang, rng, pools)
            if example.text in seen:
                continue
            seen.add(example.text)
            examples.append(check(Example(example.text, intent, example.slots)))
    return examples


def main(data_dir: Path = DATA_DIR) -> Path:
    spec = load_spec(data_dir / TEMPLATES_FILE)
    out = data_dir / TRAIN_FILE
    write_jsonl(out, generate(spec))
    return out


if __name__ == "__main__":
    print(main())
