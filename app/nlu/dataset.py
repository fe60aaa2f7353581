"""Labelled utterances: the training JSONL, the hand-written test YAML, and their markup.

Training data is JSONL, one `{"text", "intent", "slots": [{"name", "start", "end", "value"}]}`
per line. The test set is YAML, one utterance per line under its intent, with slots marked
inline as `[surface](slot)` or `[surface](slot=value)`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from app.errors import DatasetError
from app.nlu.types import INTENTS, SLOTS

TRAIN_FILE = "train.jsonl"
TEST_FILE = "test.yaml"
_MARK = re.compile(r"\[([^\]]+)\]\((\w+)(?:=([^)]*))?\)")


@dataclass(frozen=True, slots=True)
class Span:
    name: str
    start: int
    end: int
    value: str


@dataclass(frozen=True, slots=True)
class Example:
    text: str
    intent: str
    slots: tuple[Span, ...] = ()

    def to_json(self) -> str:
        slots = [
            {"name": s.name, "start": s.start, "end": s.end, "value": s.value} for s in self.slots
        ]
        return json.dumps(
            {"text": self.text, "intent": self.intent, "slots": slots}, ensure_ascii=False
        )


def check(example: Example) -> Example:
    if example.intent not in INTENTS:
        raise DatasetError(f"unknown intent {example.intent!r} in {example.text!r}")
    last_end = 0
    for span in example.slots:
        if span.name not in SLOTS:
            raise DatasetError(f"unknown slot {span.name!r} in {example.text!r}")
        if not (last_end <= span.start < span.end <= len(example.text)):
            raise DatasetError(f"bad or overlapping span {span} in {example.text!r}")
        if example.text[span.start : span.end].strip() != example.text[span.start : span.end]:
            raise DatasetError(f"span {span} has surrounding spaces in {example.text!r}")
        last_end = span.end
    return example


def parse_markup(line: str, intent: str) -> Example:
    """`订单[202405201234](order_id)` -> text and spans; the value defaults to the surface."""
    parts: list[str] = []
    spans: list[Span] = []
    cursor = length = 0
    for m in _MARK.finditer(line):
        plain = line[cursor : m.start()]
        parts.append(plain)
        length += len(plain)
        surface, name, value = m.group(1), m.group(2), m.group(3)
        spans.append(Span(name, length, length + len(surface), surface if value is None else value))
        parts.append(surface)
        length += len(surface)
        cursor = m.end()
    parts.append(line[cursor:])
    return check(Example("".join(parts), intent, tuple(spans)))


def read_jsonl(path: Path) -> list[Example]:
    examples = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                raw: dict[str, Any] = json.loads(line)
                spans = tuple(
                    Span(s["name"], s["start"], s["end"], s["value"]) for s in raw["slots"]
                )
                examples.append(check(Example(raw["text"], raw["intent"], spans)))
            except (KeyError, TypeError, json.JSONDecodeError, DatasetError) as exc:
                raise DatasetError(f"{path}:{number}: {exc}") from exc
    return examples


def write_jsonl(path: Path, examples: Iterable[Example]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(ex.to_json() + "\n" for ex in examples)
    path.write_text(text, encoding="utf-8", newline="\n")


@dataclass(frozen=True)
class EvalSet:
    today: date
    examples: list[Example]


def read_test_set(path: Path) -> EvalSet:
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(raw, dict) or not isinstance(raw.get("today"), date):
        raise DatasetError(f"{path}: expected a mapping with `today: YYYY-MM-DD`")
    examples = []
    for intent, block in raw.items():
        if intent == "today":
            continue
        if not isinstance(block, str):
            raise DatasetError(f"{path}: {intent}: expected a block of lines")
        for line in block.splitlines():
            if line.strip():
                examples.append(parse_markup(line.strip(), intent))
    return EvalSet(raw["today"], examples)
