"""Held-out evaluation: per-intent precision/recall/F1, macro-F1, slot F1, confusions.

A slot counts as correct only when its name, character span and normalised value all match
the annotation exactly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.nlu.dataset import Example
from app.nlu.types import INTENTS, SLOTS, Parser


@dataclass(frozen=True)
class PRF:
    precision: float
    recall: float
    f1: float
    support: int

    @classmethod
    def of(cls, tp: int, fp: int, fn: int) -> PRF:
        p = tp / (tp + fp) if tp + fp else 0.0
        r = tp / (tp + fn) if tp + fn else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        return cls(p, r, f, tp + fn)


@dataclass
class Report:
    intents: dict[str, PRF]
    macro_f1: float
    accuracy: float
    slots: dict[str, PRF]
    slot_f1: PRF  # micro over all slots
    confusions: Counter[tuple[str, str]] = field(default_factory=Counter)
    misses: list[str] = field(default_factory=list)


def _intent_prf(pairs: list[tuple[str, str]]) -> dict[str, PRF]:
    out = {}
    for label in INTENTS:
        tp = sum(1 for g, p in pairs if g == label and p == label)
        fp = sum(1 for g, p in pairs if g != label and p == label)
        fn = sum(1 for g, p in pairs if g == label and p != label)
        out[label] = PRF.of(tp, fp, fn)
    return out


def evaluate(parser: Parser, examples: Iterable[Example]) -> Report:
    pairs: list[tuple[str, str]] = []
    counts = {name: [0, 0, 0] for name in SLOTS}  # tp, fp, fn
    misses: list[str] = []
    for example in examples:
        result = parser.parse(example.text)
        pairs.append((example.intent, result.intent))
        gold = {(s.name, s.start, s.end, s.value) for s in example.slots}
        found = {(s.name, s.start, s.end, s.value) for s in result.slots}
        for name, *_ in gold & found:
            counts[name][0] += 1
        for name, *_ in found - gold:
            counts[name][1] += 1
        for name, *_ in gold - found:
            counts[name][2] += 1
        if result.intent != example.intent or gold != found:
            misses.append(
                f"{example.text!r}: intent {example.intent} -> {result.intent} "
                f"({result.confidence:.2f}); slots missed {sorted(gold - found)} "
                f"extra {sorted(found - gold)}"
            )
    intents = _intent_prf(pairs)
    slots = {name: PRF.of(*c) for name, c in counts.items()}
    total = [sum(c[i] for c in counts.values()) for i in range(3)]
    return Report(
        intents=intents,
        macro_f1=sum(m.f1 for m in intents.values()) / len(intents),
        accuracy=sum(1 for g, p in pairs if g == p) / max(len(pairs), 1),
        slots=slots,
        slot_f1=PRF.of(*total),
        confusions=Counter((g, p) for g, p in pairs if g != p),
        misses=misses,
    )


def format_report(report: Report, *, show_misses: bool = False) -> str:
    lines = [f"{'intent':<16}{'prec':>7}{'recall':>8}{'f1':>7}{'n':>5}"]
    for name, m in report.intents.items():
        lines.append(f"{name:<16}{m.precision:>7.3f}{m.recall:>8.3f}{m.f1:>7.3f}{m.support:>5}")
    lines.append(f"intent macro-F1 {report.macro_f1:.4f}   accuracy {report.accuracy:.4f}")
    lines.append("")
    lines.append(f"{'slot':<16}{'prec':>7}{'recall':>8}{'f1':>7}{'n':>5}")
    for name, m in report.slots.items():
        lines.append(f"{name:<16}{m.precision:>7.3f}{m.recall:>8.3f}{m.f1:>7.3f}{m.support:>5}")
    s = report.slot_f1
    lines.append(f"slot F1 (exact span + value) {s.f1:.4f}   P {s.precision:.4f}  R {s.recall:.4f}")
    lines.append("")
    if report.confusions:
        lines.append("confusions (gold -> predicted: count)")
        for (gold, pred), n in report.confusions.most_common(10):
            lines.append(f"  {gold} -> {pred}: {n}")
    else:
        lines.append("confusions: none")
    if show_misses and report.misses:
        lines.append("")
        lines.append("errors")
        lines.extend("  " + m for m in report.misses)
    return "\n".join(lines)
