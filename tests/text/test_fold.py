"""Folding keeps offsets; tokens carry them."""

from __future__ import annotations

from app.text.fold import fold, tokenize


def test_fold_is_half_width_lower_case_and_keeps_every_offset() -> None:
    text = "ＳＦ１２３ 订单Ｎｏ．５，Hello"
    folded = fold(text)
    assert folded == "sf123 订单no.5,hello"
    assert len(folded) == len(text)


def test_tokens_point_back_into_the_original_text() -> None:
    text = "订单202405201234，退¥89.90 to li.lei@example.com, SF123456789CN!"
    tokens = tokenize(text)
    assert [(t.text, t.kind) for t in tokens] == [
        ("订", "cjk"), ("单", "cjk"), ("202405201234", "num"), (",", "other"), ("退", "cjk"),
        ("¥", "other"), ("89.90", "num"), ("to", "word"), ("li.lei@example.com", "email"),
        (",", "other"), ("sf123456789cn", "word"), ("!", "other"),
    ]  # fmt: skip
    for token in tokens:
        assert fold(text[token.start : token.end]) == token.text


def test_numbers_glued_to_letters_stay_one_token() -> None:
    assert [t.text for t in tokenize("300rmb 1,200 don't")] == ["300rmb", "1,200", "don't"]
