"""The offline model's answer to a policy question: the passage's own sentences (or rows, or
list items) that answer it, not the whole passage, on the demo documents in both languages."""

from __future__ import annotations

import json

import pytest

from app.knowledge.extractive import answer
from app.knowledge.grounding import unsupported
from app.knowledge.passages import SECTION_SEPARATOR
from tests.knowledge.demo import KNOWLEDGE, passage, sections


@pytest.mark.parametrize(
    ("question", "document", "section", "expected", "left_out"),
    [
        (
            "How long does a refund to a credit card take?",
            "refunds.en.md",
            "How long until the money arrives",
            "Credit card: 7-15 working days",
            "Debit card",
        ),
        (
            "信用卡退款多久到账",
            "refunds.zh.md",
            "退款多久到账",
            "信用卡：7-15个工作日",
            "借记卡",
        ),
        (
            "how long is the refnd to my creditcard",  # a typo, two words run together
            "refunds.en.md",
            "How long until the money arrives",
            "Credit card: 7-15 working days",
            "Alipay",
        ),
        (
            "退货运费谁承担",
            "return-shipping.zh.md",
            "无理由退货",
            "因个人原因退货（例如尺码不合适、不想要了），退货运费由顾客承担。",
            "自行选择快递",
        ),
        (
            "Who pays for return shipping if I changed my mind?",
            "return-shipping.en.md",
            "Change of mind",
            "you pay the return shipping",
            "carrier of your choice",
        ),
        (
            "新疆多久能到",
            "delivery-times.zh.md",
            "配送时效",
            "新疆、西藏、青海：5-8天",
            "其他省份",
        ),
        (
            "What are the hotline hours on public holidays?",
            "opening-hours.en.md",
            "Service hotline",
            "On public holidays it is open from 10:00 to 18:00.",
            "weekends included",
        ),
        (
            "你们的营业时间是几点到几点",
            "opening-hours.zh.md",
            "客服热线",
            "客服热线400-820-1234每天9:00至21:00服务，周末照常。",
            "",
        ),
        (
            "How much does shipping to Tibet cost?",
            "shipping-costs.en.md",
            "Remote regions",
            "shipping costs CNY 20 per order",
            "",
        ),
        (
            "电动牙刷保修多久",
            "warranty.zh.md",
            "保修期",
            "电动牙刷、空气炸锅）：签收后1年",
            "充电线",
        ),
        (
            "注销后多久删除个人信息",
            "account-deletion.zh.md",
            "冷静期",
            "冷静期结束后，我们在30天内删除您的个人信息。",
            "重新登录",
        ),
        (
            "Do you ship to Hong Kong?",
            "shipping-regions.en.md",
            "Regions we do not serve",
            "Regions we do not serve: Hong Kong",  # a list item read under its heading
            "Taiwan",
        ),
        (
            "秒杀商品可以保价吗",
            "price-protection.zh.md",
            "不参与保价的情况",
            "不参与保价的情况：限时秒杀",
            "直播专享价",
        ),
        (
            "When do my points expire?",
            "points.en.md",
            "When points expire",
            "Points expire on 31 December of the year after the year you earned them.",
            "",
        ),
        (
            "发票多久能开出来",
            "invoices.zh.md",
            "电子普通发票",
            "发票在确认收货后3个工作日内开出",
            "签收后90天内",
        ),
    ],
)
def test_the_answer_is_the_part_of_the_passage_that_answers(
    question: str, document: str, section: str, expected: str, left_out: str
) -> None:
    text = passage(document, section)
    language = document.split(".")[-2]

    said = answer(question, text, language, section=f"Title{SECTION_SEPARATOR}{section}")

    assert expected in said
    assert not left_out or left_out not in said, "more of the passage than the answer"
    assert len(said) < len(text) or "\n" not in text
    assert unsupported(said, [text]) == []


def test_markdown_goes_and_a_table_row_keeps_its_header() -> None:
    text = (
        "## Refund times\n"
        "Refunds to **cards** take a while; see [the help page](https://help.example.com/en).\n"
        "| Payment method | Time to arrive |\n"
        "|---|:---:|\n"
        "| `Gift card` | immediately |\n"
        "\n"
        "| Method | Standard | Express |\n"
        "| Bank transfer | 2 days | 1 day |\n"
        "| Cheque | 5 days | |\n"
    )

    assert answer("gift card", text, "en") == "Gift card: immediately"
    assert answer("bank transfer", text, "en") == ("Bank transfer: Standard 2 days, Express 1 day")
    assert answer("cheque", text, "en") == "Cheque: Standard 5 days"
    assert answer("refunds to cards", text, "en", max_sentences=1) == (
        "Refunds to cards take a while; see the help page (https://help.example.com/en)."
    )


def test_an_empty_question_gets_the_first_pieces_and_a_short_passage_itself() -> None:
    text = passage("refunds.en.md", "When a refund starts")

    assert answer("", text, "en") == (
        "For a return, the refund starts after your parcel reaches our returns centre and passes"
        " inspection. We inspect returns within 2 working days of their arrival."
    )
    assert answer("", text, "en", max_sentences=1).startswith("For a return")
    assert answer("anything", "Seven days.", "en") == "Seven days."
    assert answer("退货", "大部分商品在签收后7天内可以无理由退货。", "zh") == (
        "大部分商品在签收后7天内可以无理由退货。"
    )
    assert answer("refund", "", "en") == ""
    assert answer("refund", text, "en", max_sentences=0) == ""


def test_two_pieces_of_a_chinese_passage_are_joined_as_chinese() -> None:
    text = "| 地区 | 标准配送 |\n| 江苏 | 1-2天 |\n| 新疆 | 5-8天 |\n| 其他省份 | 2-4天 |"

    assert answer("江苏和新疆多久到", text, "zh") == "江苏：1-2天。新疆：5-8天。"


def test_every_labelled_question_gets_a_grounded_answer_shorter_than_its_passage() -> None:
    lines = (KNOWLEDGE / "eval" / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line) for line in lines if line.strip()]
    answered = 0
    for q in questions:
        if q["document"] is None:
            continue
        text = sections(q["document"])[q["section"]]
        said = answer(q["q"], text, q["document"].split(".")[-2], section=q["section"])
        assert said, q
        assert unsupported(said, [text]) == [], (q, said)
        assert not said.startswith(("|", "- ", "#")), (q, said)
        answered += 1
    assert answered >= 200
