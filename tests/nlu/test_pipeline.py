"""The loaded pipeline: intents and slots in both languages, with a fixed today."""

from __future__ import annotations

import pytest

from app.nlu.pipeline import NLUPipeline
from app.nlu.slot_features import decode
from app.nlu.types import INTENTS
from app.text.fold import tokenize


def _slots(nlu: NLUPipeline, text: str) -> list[tuple[str, str, str]]:
    return [(s.name, s.value, text[s.start : s.end]) for s in nlu.parse(text).slots]


def test_demo_fixtures(nlu: NLUPipeline) -> None:
    result = nlu.parse("我的订单到哪了")
    assert (result.intent, result.slots, result.language) == ("order_status", [], "zh")

    result = nlu.parse("202405201234")
    assert result.slot("order_id") == "202405201234"

    result = nlu.parse("where is my parcel SF123456789CN")
    assert (result.intent, result.language) == ("track_shipment", "en")
    assert _slots(nlu, "where is my parcel SF123456789CN") == [
        ("tracking_number", "SF123456789CN", "SF123456789CN")
    ]

    text = "I want a refund of 120 yuan for order 202405201235"
    result = nlu.parse(text)
    assert result.intent == "refund_request"
    assert _slots(nlu, text) == [
        ("amount", "120.00", "120 yuan"),
        ("order_id", "202405201235", "202405201235"),
    ]


def test_chinese_slots_with_offsets(nlu: NLUPipeline) -> None:
    text = "帮我退八十九块，订单号202405201235，下周一之前处理好"
    assert _slots(nlu, text) == [
        ("amount", "89.00", "八十九块"),
        ("order_id", "202405201235", "202405201235"),
        ("date", "2024-05-27", "下周一"),
    ]
    assert nlu.parse(text).intent == "refund_request"

    text = "密码忘了，手机号是138 0013 8000"
    assert _slots(nlu, text) == [("phone", "13800138000", "138 0013 8000")]
    assert nlu.parse(text).intent == "password_reset"

    text = "把邮箱改成li.lei@example.com"
    assert _slots(nlu, text) == [("email", "li.lei@example.com", "li.lei@example.com")]
    assert nlu.parse(text).intent == "update_contact"


def test_english_slots_with_offsets(nlu: NLUPipeline) -> None:
    text = "please change my number to +86 139 0013 9000"
    assert _slots(nlu, text) == [("phone", "13900139000", "+86 139 0013 9000")]
    assert nlu.parse(text).intent == "update_contact"

    text = "my package was supposed to arrive yesterday, tracking YT1234567890"
    assert _slots(nlu, text) == [
        ("date", "2024-05-21", "yesterday"),
        ("tracking_number", "YT1234567890", "YT1234567890"),
    ]


def test_a_span_that_does_not_validate_is_dropped(nlu: NLUPipeline) -> None:
    # Eleven digits after "order" look like an order id to the tagger, but are not one.
    result = nlu.parse("check order 20240520123 please")
    assert result.slot("order_id") is None


def test_ranking_and_confidence(nlu: NLUPipeline) -> None:
    result = nlu.parse("转人工")
    assert result.intent == "human_handoff"
    assert len(result.ranking) == 3
    assert result.ranking[0].intent == result.intent
    assert result.ranking[0].confidence == result.confidence
    assert all(r.intent in INTENTS for r in result.ranking)
    assert result.to_dict()["ranking"][0]["intent"] == "human_handoff"


def test_classify_and_extract_are_the_two_halves_of_parse(nlu: NLUPipeline) -> None:
    text = "订单202405201234明天能到吗"
    parsed = nlu.parse(text)
    assert nlu.classify(text) == parsed.ranking
    assert nlu.extract(text) == parsed.slots


def test_empty_and_overlong_input(nlu: NLUPipeline) -> None:
    assert nlu.parse("   ").slots == []
    long = "where is my order " * 200
    result = nlu.parse(long)
    assert len(result.text) == 2000
    assert result.intent == "order_status"


def test_bare_slot_answers(nlu: NLUPipeline) -> None:
    # What a customer types when asked "which order / parcel / phone / email?"
    assert nlu.parse("SF123456789CN").slot("tracking_number") == "SF123456789CN"
    assert nlu.parse("sf123456789cn").slot("tracking_number") == "SF123456789CN"
    assert nlu.parse("202405201234").slot("order_id") == "202405201234"
    assert nlu.parse("13800138000").slot("phone") == "13800138000"
    assert nlu.parse("Li.Lei@Example.com").slot("email") == "li.lei@example.com"


def test_unmistakable_forms_are_kept_in_any_context(nlu: NLUPipeline) -> None:
    text = "嗯 EA987654321CN 还有 zz.top@mail.example.org 哈"
    assert [(s.name, s.value) for s in nlu.parse(text).slots] == [
        ("tracking_number", "EA987654321CN"),
        ("email", "zz.top@mail.example.org"),
    ]


def _crf_emails(nlu: NLUPipeline, text: str) -> list[str]:
    """Addresses the CRF itself tags (not the by-form rule that catches what it leaves out)."""
    tokens = tokenize(text)
    labels = nlu.tagger.labels(text, tokens)
    return [text[s:e] for name, s, e in decode(tokens, labels) if name == "email"]


@pytest.mark.parametrize(
    ("text", "email"),
    [
        ("Please email me the receipt at han.work@example.com", "han.work@example.com"),
        ("请把发票发到我的邮箱 lin.xiao@qq.com", "lin.xiao@qq.com"),
        ("could you send the order confirmation to han.work@example.com?", "han.work@example.com"),
        ("把订单详情发到 zhou_ming@163.com 吧", "zhou_ming@163.com"),
        ("can you send the order confirmation to my email", None),
        ("把订单详情发邮件给我", None),
        ("I never got the receipt email, can you resend it", None),
        ("电子发票能发我邮箱吗", None),
    ],
)
def test_asking_to_be_sent_something_by_email_is_an_email_request(
    nlu: NLUPipeline, text: str, email: str | None
) -> None:
    result = nlu.parse(text)
    assert result.intent == "email_request", result.ranking
    assert result.confidence >= 0.5
    assert result.slot("email") == email
    if email is not None:
        assert _crf_emails(nlu, text) == [email]


@pytest.mark.parametrize(
    "text",
    [
        "change my email to han.work@example.com",
        "把我的邮箱改成 han.work@example.com",
        "my new email is han.work@example.com",
        "update my email address to han.work@example.com",
        "以后的邮件都发到 han.work@example.com",
        "han.work@example.com",
    ],
)
def test_changing_the_address_on_the_account_stays_update_contact(
    nlu: NLUPipeline, text: str
) -> None:
    result = nlu.parse(text)
    assert result.intent == "update_contact", result.ranking
    assert result.slot("email") == "han.work@example.com"
    assert _crf_emails(nlu, text) == ["han.work@example.com"]


def test_tell_me_after_an_address_is_not_a_product(nlu: NLUPipeline) -> None:
    for text in (
        "请发一封邮件到 a@example.com 告诉我退款进度",
        "请发邮件到a@example.com告诉我订单状态",
    ):
        assert [s.name for s in nlu.parse(text).slots] == ["email"], text
    assert _slots(nlu, "我买的无线蓝牙耳机坏了") == [("product", "无线蓝牙耳机", "无线蓝牙耳机")]
