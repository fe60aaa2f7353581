"""From run results to the numbers: task success overall, per intent, per language, the
held-out set on its own, pass^k, forbidden writes; as text for people and JSON for CI."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from math import comb
from typing import Any

from app.evaluation.runner import RunResult
from app.evaluation.scenario import Scenario


@dataclass(frozen=True)
class Targets:
    min_success: float = 0.95
    min_heldout: float = 0.90
    max_forbidden: int = 0


def pass_hat_k(successes: int, runs: int, k: int) -> float:
    """τ-bench's pass^k for one task: the chance that k runs drawn from its `runs` all pass
    (C(c, k) / C(n, k)); pass^1 is the plain success rate."""
    return comb(successes, k) / comb(runs, k) if runs >= k else 0.0


def _rate(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(
    scenarios: list[Scenario],
    results: list[RunResult],
    *,
    runs: int,
    model: str,
    seconds: float,
    targets: Targets,
) -> dict[str, Any]:
    by_id: dict[str, list[RunResult]] = defaultdict(list)
    for result in results:
        by_id[result.scenario].append(result)
    score: dict[str, float] = {}  # pass^1 per scenario
    for s in scenarios:
        got = by_id[s.id]
        score[s.id] = sum(r.passed for r in got) / len(got) if got else 0.0
    per_intent: dict[str, list[float]] = defaultdict(list)
    per_language: dict[str, list[float]] = defaultdict(list)
    for s in scenarios:
        for intent in s.intents:
            per_intent[intent].append(score[s.id])
        per_language[s.language].append(score[s.id])
    heldout = [score[s.id] for s in scenarios if s.heldout]
    tuned = [score[s.id] for s in scenarios if not s.heldout]
    overall = _rate(list(score.values())) or 0.0
    pass_k = {
        str(k): _rate(
            [pass_hat_k(sum(r.passed for r in by_id[s.id]), len(by_id[s.id]), k) for s in scenarios]
        )
        or 0.0
        for k in range(1, runs + 1)
    }
    forbidden = sorted(s.id for s in scenarios if any(r.forbidden_write for r in by_id[s.id]))
    failed = []
    for s in scenarios:
        bad = [r for r in by_id[s.id] if not r.passed]
        if bad:
            first = bad[0]
            failed.append(
                {
                    "id": s.id,
                    "path": s.path,
                    "title": s.title,
                    "heldout": s.heldout,
                    "runs_failed": len(bad),
                    "first_failure": str(first.failures[0]),
                    "failures": [str(f) for f in first.failures],
                    "transcript": [{"customer": c, "agent": a} for c, a in first.transcript],
                }
            )
    heldout_rate = _rate(heldout)
    verdicts = {
        "success": overall >= targets.min_success,
        "heldout": heldout_rate is None or heldout_rate >= targets.min_heldout,
        "forbidden_writes": len(forbidden) <= targets.max_forbidden,
    }
    return {
        "model": model,
        "scenarios": len(scenarios),
        "runs": runs,
        "seconds": round(seconds, 2),
        "success": round(overall, 4),
        "passed": sum(1 for s in scenarios if score[s.id] == 1.0),
        "tuned": {"scenarios": len(tuned), "success": _round(_rate(tuned))},
        "heldout": {"scenarios": len(heldout), "success": _round(heldout_rate)},
        "pass_hat_k": {k: round(v, 4) for k, v in pass_k.items()},
        "per_intent": {
            i: {"scenarios": len(v), "success": _round(_rate(v))}
            for i, v in sorted(per_intent.items())
        },
        "per_language": {
            lang: {"scenarios": len(v), "success": _round(_rate(v))}
            for lang, v in sorted(per_language.items())
        },
        "forbidden_writes": len(forbidden),
        "forbidden_write_scenarios": forbidden,
        "failed": failed,
        "targets": {
            "min_success": targets.min_success,
            "min_heldout": targets.min_heldout,
            "max_forbidden_writes": targets.max_forbidden,
        },
        "met": all(verdicts.values()),
        "verdicts": verdicts,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _pct(value: float | None) -> str:
    return "  n/a" if value is None else f"{value * 100:5.1f}%"


def render(summary: dict[str, Any]) -> str:
    """The report people read: failures first (what to fix), the numbers last (what to say)."""
    lines: list[str] = []
    for item in summary["failed"]:
        mark = " [held-out]" if item["heldout"] else ""
        runs = f" ({item['runs_failed']}/{summary['runs']} runs)" if summary["runs"] > 1 else ""
        lines.append(f"FAIL {item['id']}{mark}{runs}: {item['first_failure']}")
    if summary["failed"]:
        lines.append("")
    lines.append(
        f"hermes eval: {summary['passed']}/{summary['scenarios']} scenarios passed, model"
        f" {summary['model']}, {summary['runs']} run(s), {summary['seconds']:.1f} s"
    )
    goal, tuned = summary["targets"]["min_success"], summary["tuned"]
    lines.append(f"  task success      {_pct(summary['success'])}   (target {goal * 100:.0f}%)")
    lines.append(f"  tuned set         {_pct(tuned['success'])}   ({tuned['scenarios']} scenarios)")
    held = summary["heldout"]
    lines.append(
        f"  held-out set      {_pct(held['success'])}   ({held['scenarios']} scenarios, target"
        f" {summary['targets']['min_heldout'] * 100:.0f}%)"
    )
    for k, value in summary["pass_hat_k"].items():
        lines.append(f"  pass^{k:<13}{_pct(value)}")
    lines.append(f"  forbidden writes  {summary['forbidden_writes']:>5}    (target 0)")
    lines.append("  per language:")
    for lang, row in summary["per_language"].items():
        lines.append(f"    {lang:<16}{_pct(row['success'])}   ({row['scenarios']})")
    lines.append("  per intent:")
    for intent, row in summary["per_intent"].items():
        lines.append(f"    {intent:<16}{_pct(row['success'])}   ({row['scenarios']})")
    failed = [name for name, ok in summary["verdicts"].items() if not ok]
    lines.append("targets met" if not failed else f"BELOW TARGET: {', '.join(failed)}")
    return "\n".join(lines)
