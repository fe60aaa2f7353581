"""Quality on the held-out set, and the metric arithmetic itself."""

from __future__ import annotations

import pytest

from app.nlu.dataset import EvalSet, Example, Span
from app.nlu.evaluate import PRF, evaluate, format_report
from app.nlu.pipeline import NLUPipeline
from app.nlu.testing import ScriptedParser


def test_the_committed_model_meets_the_quality_bar(nlu: NLUPipeline, held_out: EvalSet) -> None:
    report = evaluate(nlu, held_out.examples)
    assert report.macro_f1 >= 0.90, format_report(report, show_misses=True)
    assert report.slot_f1.f1 >= 0.90, format_report(report, show_misses=True)
    for name in ("order_id", "tracking_number", "phone", "email", "date"):
        assert report.slots[name].f1 >= 0.95, (name, report.slots[name])
    assert min(m.f1 for m in report.intents.values()) >= 0.85


def test_metrics_count_exact_span_and_value_matches() -> None:
    examples = [
        Example("订单202405201234", "order_status", (Span("order_id", 2, 14, "202405201234"),)),
        Example("hi", "greeting"),
        Example("bye", "goodbye"),
        Example("refund 5 yuan", "refund_request", (Span("amount", 7, 13, "5.00"),)),
    ]
    parser = ScriptedParser()
    parser.on("订单202405201234", "order_status", slots={"order_id": "202405201234"})
    parser.on("hi", "greeting")
    parser.on("bye", "greeting")  # wrong intent
    parser.on("refund 5 yuan", "refund_request", slots={"amount": "5"})  # right span, wrong value
    report = evaluate(parser, examples)

    assert report.accuracy == 0.75
    assert report.intents["greeting"] == PRF(0.5, 1.0, pytest.approx(2 / 3), 1)
    assert report.intents["goodbye"] == PRF(0.0, 0.0, 0.0, 1)
    assert report.slots["order_id"] == PRF(1.0, 1.0, 1.0, 1)
    assert report.slots["amount"] == PRF(0.0, 0.0, 0.0, 1)
    assert report.slot_f1 == PRF(0.5, 0.5, 0.5, 2)
    assert report.confusions == {("goodbye", "greeting"): 1}
    text = format_report(report, show_misses=True)
    assert "goodbye -> greeting: 1" in text
    assert "'bye': intent goodbye -> greeting" in text
