"""Everyday language: how much a question word says, where Chinese words end, what sounds alike."""

from __future__ import annotations

from app.knowledge.lexicon import (
    LEAST,
    is_word,
    segment,
    sounds_like,
    specificity,
    straddling,
)


def test_words_said_about_everything_weigh_less_than_words_about_one_thing() -> None:
    assert specificity("time") == LEAST and specificity("take") < 0.3
    assert specificity("refund") == specificity("paypal") == 1.0
    assert LEAST < specificity("holiday") < 1.0
    assert specificity("公司") < specificity("发票") == 1.0
    assert specificity("zzyzxq") == 1.0  # not in the list: a name or a trade word, in full


def test_a_chinese_run_is_cut_into_its_words() -> None:
    words = ["钱", "可以", "退", "到", "我", "朋友", "的", "账户"]
    assert segment("钱可以退到我朋友的账户") == words
    assert "".join(segment("退款多久到账")) == "退款多久到账"
    assert is_word("朋友") and not is_word("我朋") and not is_word("朋")


def test_pairs_across_a_words_edge_are_not_words_of_the_question() -> None:
    across = straddling("钱可以退到我朋友的账户")
    assert {"我朋", "友的", "的账"} <= across
    assert not {"朋友", "账户", "退到"} & across  # 退到: two characters no word holds


def test_a_miswritten_word_sounds_like_the_one_meant() -> None:
    assert sounds_like("积份", "积分") and sounds_like("多旧", "多久")
    assert sounds_like("到帐", "到账")
    assert not sounds_like("发票", "发货")
    assert not sounds_like("积分", "积分多")
