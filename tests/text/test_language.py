"""Language: one utterance by majority, a conversation by its latest message with a script."""

from __future__ import annotations

from app.text.language import detect_language, latest_language
from app.text.script import has_cjk, is_han


def test_an_utterance_is_chinese_when_han_characters_carry_it() -> None:
    assert detect_language("我的订单到哪了") == "zh"
    assert detect_language("订单 202405201234") == "zh"
    assert detect_language("iPhone 15 手机壳坏了") == "zh"
    assert detect_language("where is my parcel SF123456789CN") == "en"
    assert detect_language("202405201234") == "en"
    assert detect_language("I want to 退款 please") == "en"


def test_a_conversation_takes_the_latest_message_that_shows_a_script() -> None:
    assert latest_language(["202405201234", "我的快递到哪了"]) == "zh"  # a bare number says nothing
    assert latest_language(["202405201234", "where is my parcel", "你好"]) == "en"
    assert latest_language(["I want to 退款 please"]) == "zh"  # any CJK script decides
    assert latest_language(["123？"]) == "zh"  # typed with a Chinese input method
    assert latest_language(["12345", ""]) == "en"
    assert latest_language([]) == "en"


def test_han_is_ideographs_only_and_cjk_script_is_wider() -> None:
    assert is_han("订") and not is_han("。") and not is_han("か") and not is_han("a")
    assert has_cjk("。") and has_cjk("か") and has_cjk("한") and has_cjk("ＡＢ")
    assert not has_cjk("plain ascii") and not has_cjk(None) and not has_cjk("")
