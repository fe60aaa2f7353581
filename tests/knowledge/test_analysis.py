"""The units knowledge search compares: what a question keeps and what it leaves out."""

from __future__ import annotations

from app.knowledge.analysis import question_units, stem, text_units


def test_english_words_are_stemmed_and_function_words_left_out() -> None:
    assert question_units("How long does shipping take?") == ["long", "ship", "take"]
    assert stem("returns") == stem("returned") == "return"


def test_light_words_say_nothing_of_what_is_asked() -> None:
    assert question_units("How do I make a complaint?") == ["complaint"]
    assert question_units("Is there someone to chat with?") == ["chat"]


def test_a_chinese_question_keeps_its_content_pairs_and_characters() -> None:
    assert question_units("退款多久到账") == [
        "退款", "款多", "多久", "久到", "到账", "退", "款", "久", "到", "账",
    ]  # fmt: skip


def test_chinese_function_words_and_the_pairs_across_them_are_left_out() -> None:
    # 以后 ("afterwards") says when, not what: neither it nor 户以 / 以还 across its edges.
    units = question_units("注销账户以后还能反悔吗？")
    assert "以后" not in units and "户以" not in units and "以" not in units
    assert {"注销", "账户", "反悔"} <= set(units)


def test_a_stored_text_keeps_every_unit() -> None:
    units = text_units("注销以后")
    assert "以后" in units and "以" in units
