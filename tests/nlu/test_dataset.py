"""Markup and checks on labelled utterances."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.errors import DatasetError
from app.nlu.dataset import (
    Example,
    Span,
    check,
    parse_markup,
    read_jsonl,
    write_jsonl,
)


def test_markup_gives_text_spans_and_values() -> None:
    example = parse_markup(
        "退[120元](amount=120.00)，订单[202405201235](order_id)", "refund_request"
    )
    assert example.text == "退120元，订单202405201235"
    assert example.slots == (
        Span("amount", 1, 5, "120.00"),
        Span("order_id", 8, 20, "202405201235"),
    )


@pytest.mark.parametrize(
    "example",
    [
        Example("hi", "chit_chat"),
        Example("hi", "greeting", (Span("colour", 0, 2, "x"),)),
        Example("hi", "greeting", (Span("product", 0, 3, "x"),)),
        Example("a b", "greeting", (Span("product", 0, 2, "a"),)),
        Example("ab", "greeting", (Span("product", 0, 2, "ab"), Span("product", 1, 2, "b"))),
    ],
)
def test_bad_examples_are_refused(example: Example) -> None:
    with pytest.raises(DatasetError):
        check(example)


def test_jsonl_round_trip_and_errors_name_the_line(tmp_path: Path) -> None:
    examples = [
        parse_markup("订单[202405201234](order_id)", "order_status"),
        Example("hi", "greeting"),
    ]
    path = tmp_path / "train.jsonl"
    write_jsonl(path, examples)
    assert read_jsonl(path) == examples
    path.write_text(path.read_text() + '{"text": "x"}\n')
    with pytest.raises(DatasetError, match=r"train.jsonl:3"):
        read_jsonl(path)
