"""The grounding check on the demo documents' own sentences: a reply that restates a figure in
other words or the other language passes, a changed number, unit, phone, URL, email or date is
caught, and a reply with no figures is never flagged."""

from __future__ import annotations

import json
import time

import pytest

from app.knowledge.grounding import claims, unsupported
from tests.knowledge.demo import passage

REFUNDS_EN = passage("refunds.en.md", "How long until the money arrives")
REFUNDS_ZH = passage("refunds.zh.md", "退款多久到账")
HOURS_EN = passage("opening-hours.en.md", "Service hotline")
HOURS_ZH = passage("opening-hours.zh.md", "客服热线")
SHIPPING_ZH = passage("shipping-costs.zh.md", "标准运费")
RETURNS_ZH = passage("returns.zh.md", "七天无理由退货")
HOW_TO_RETURN_EN = passage("returns.en.md", "How to start a return")
POINTS_EN = passage("points.en.md", "When points expire")
POINTS_ZH = passage("points.zh.md", "如何使用积分")
CONTACT_EN = passage("contact-channels.en.md", "Channels")
INVOICES_ZH = passage("invoices.zh.md", "电子普通发票")
SPRING = passage("spring-festival-2027.en.md", "Shipping pause")
PRIVACY_ZH = passage("account-deletion.zh.md", "隐私保护")


def kinds_and_values(text: str) -> list[tuple[str, str]]:
    return [(c.kind, c.value) for c in claims(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("七天", [("duration", "7 days")]),
        ("两个工作日", [("duration", "2 working days")]),
        ("十五天", [("duration", "15 days")]),
        ("十五", [("number", "15")]),
        ("１５个工作日", [("duration", "15 working days")]),
        ("24 hours", [("duration", "1 day")]),
        ("24小时", [("duration", "1 day")]),
        ("two working days", [("duration", "2 working days")]),
        ("a seven-day return window", [("duration", "7 days")]),
        ("半小时", [("duration", "30 minutes")]),
        ("1.5 hours", [("duration", "90 minutes")]),
        ("半个月", [("duration", "0.5 months")]),
        ("3-7 working days", [("duration", "3-7 working days")]),
        ("3至7个工作日", [("duration", "3-7 working days")]),
        ("3 to 7 working days", [("duration", "3-7 working days")]),
        ("between 3 and 7 working days", [("duration", "3-7 working days")]),
        ("12个月", [("duration", "1 year")]),
        ("CNY 99", [("amount", "CNY 99")]),
        ("99元", [("amount", "CNY 99")]),
        ("¥99", [("amount", "CNY 99")]),
        ("￥99", [("amount", "CNY 99")]),
        ("99 yuan", [("amount", "CNY 99")]),
        ("RMB 99", [("amount", "CNY 99")]),
        ("CNY 2,000", [("amount", "CNY 2000")]),
        ("30%", [("percentage", "30%")]),
        ("３０％", [("percentage", "30%")]),
        ("百分之三十", [("percentage", "30%")]),
        ("30 percent", [("percentage", "30%")]),
        ("400-820-1234", [("phone", "4008201234")]),
        ("4008201234", [("phone", "4008201234")]),
        ("400 820 1234", [("phone", "4008201234")]),
        ("+86 400 820 1234", [("phone", "4008201234")]),
        ("138 1234 5678", [("phone", "13812345678")]),
        ("https://help.example.com/en/refunds/", [("url", "help.example.com/en/refunds")]),
        ("help.example.com/en/refunds", [("url", "help.example.com/en/refunds")]),
        ("Support@Example.COM", [("email", "support@example.com")]),
        ("2027-01-20", [("date", "2027-01-20")]),
        ("2027年1月20日", [("date", "2027-01-20")]),
        ("January 20 2027", [("date", "2027-01-20")]),
        ("20 January, 2027", [("date", "2027-01-20")]),
        ("1月20日", [("date", "--01-20")]),
        ("20 Jan", [("date", "--01-20")]),
        ("Jan. 20th", [("date", "--01-20")]),
        ("2月3日至11日", [("date", "--02-03"), ("date", "--02-11")]),
        ("9:00-21:00", [("time", "09:00"), ("time", "21:00")]),
        ("9am to 9pm", [("time", "09:00"), ("time", "21:00")]),
        ("早上9点到晚上9点", [("time", "09:00"), ("time", "21:00")]),
        ("24/7", [("number", "24/7")]),
        ("order SF123456789CN", [("number", "SF123456789CN")]),
        ("order 202611280001", [("number", "202611280001")]),
        ("1,000 points", [("number", "1000")]),
    ],
)
def test_a_figure_is_found_with_one_value_for_every_wording(
    text: str, expected: list[tuple[str, str]]
) -> None:
    assert kinds_and_values(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Sorry, I can't help with that. Would you like to talk to one of our agents?",
        "One moment please, I'm checking that for you.",
        "抱歉，这个问题我需要请人工客服帮您看一下，请稍等。",
        "十分抱歉给您带来不便，我们会尽快处理。",
        "统一由EMS配送，一律原路退回。",
        "1. Open the app\n2. Go to My orders\n3. Choose Apply for return [1]",
        "1、打开App\n2、进入我的订单【1】",
        "Step 1: open the app. Step 2: tap Refunds. 第一步：打开App；第2步：点击退款。",
    ],
)
def test_text_without_figures_has_no_claims(text: str) -> None:
    assert claims(text) == []


def test_a_claim_carries_its_span_as_the_customer_wrote_it() -> None:
    text = "退款在１５个工作日内到账，详见 https://help.example.com/zh/refunds。"

    found = claims(text)

    assert [(c.raw, text[c.start : c.end]) for c in found] == [
        ("１５个工作日", "１５个工作日"),
        ("https://help.example.com/zh/refunds", "https://help.example.com/zh/refunds"),
    ]


def test_digits_inside_a_url_or_an_email_belong_to_it() -> None:
    assert kinds_and_values("see example.com/promotions/double11-2025 or cs2027@example.com") == [
        ("url", "example.com/promotions/double11-2025"),
        ("email", "cs2027@example.com"),
    ]


@pytest.mark.parametrize(
    ("reply", "sources"),
    [
        ("A refund to a credit card takes 7 to 15 working days.", [REFUNDS_EN]),
        ("信用卡退款需要7至15个工作日到账。", [REFUNDS_EN]),  # the other language
        ("Refunds to Alipay or WeChat Pay arrive within 24 hours.", [REFUNDS_ZH]),
        ("A debit card refund can take up to 7 working days.", [REFUNDS_EN]),  # a range's end
        ("Refunds to a credit card take 7 working days or more.", [REFUNDS_ZH]),
        ("You can return most items within seven days of delivery.", [RETURNS_ZH]),
        ("请在申请后五天内寄出包裹。", [HOW_TO_RETURN_EN]),
        ("Call us on 4008201234 from 9am to 9pm, or 10am-6pm on public holidays.", [HOURS_EN]),
        ("客服热线 400 820 1234，每天早上9点到晚上9点服务。", [HOURS_EN]),
        ("The hotline 400-820-1234 is open 9:00-21:00 every day.", [HOURS_ZH]),
        ("Orders of ¥99 or more ship free; otherwise shipping is 8 yuan.", [SHIPPING_ZH]),
        ("Points earned in 2026 expire on December 31, 2027.", [POINTS_EN]),
        ("积分最多可抵订单金额的百分之三十，100积分抵1元。", [POINTS_ZH]),
        ("Write to SUPPORT@example.com or chat on https://www.example.com/.", [CONTACT_EN]),
        ("发票在确认收货后三个工作日内开出，签收后90天内可以申请。", [INVOICES_ZH]),
        ("Orders placed from 3 to 11 February ship from February 12.", [SPRING]),
        ("如需导出个人数据，请发邮件至privacy@example.com，十五个工作日内处理。", [PRIVACY_ZH]),
    ],
)
def test_a_paraphrase_of_the_passage_is_supported(reply: str, sources: list[str]) -> None:
    assert claims(reply), "a reply with figures, or the test proves nothing"
    assert unsupported(reply, sources) == []


@pytest.mark.parametrize(
    ("reply", "sources", "caught"),
    [
        ("Refunds take 3 days.", [REFUNDS_EN], ["3 days"]),  # the document says 7 (and 3-7 wd)
        ("退款需要3天到账。", [REFUNDS_ZH], ["3天"]),
        ("A credit card refund takes 7-14 working days.", [REFUNDS_EN], ["7-14 working days"]),
        ("A credit card refund takes 7-15 days.", [REFUNDS_EN], ["7-15 days"]),  # unit changed
        ("Alipay refunds arrive within 24 working days.", [REFUNDS_EN], ["24 working days"]),
        ("Alipay refunds arrive within 2 days.", [REFUNDS_EN], ["2 days"]),  # 2 working days only
        ("Call 400-820-1235 for help.", [HOURS_EN], ["400-820-1235"]),
        ("The hotline is open from 9am to 8pm.", [HOURS_EN], ["8pm"]),
        ("We are here for you 24/7.", [HOURS_EN], ["24/7"]),
        ("Free shipping from CNY 89.", [SHIPPING_ZH], ["CNY 89"]),
        ("满99美元包邮。", [SHIPPING_ZH], ["99美元"]),  # the currency changed
        ("Use points for up to 50% of an order.", [POINTS_ZH], ["50%"]),
        ("Points earned in 2026 expire on 31 December 2026.", [POINTS_EN], ["31 December 2026"]),
        ("2027年1月20日起停止发货。", [SPRING], ["2027年1月20日"]),
        (
            "Details: https://help.example.com/en/refund",
            [REFUNDS_EN],
            ["https://help.example.com/en/refund"],
        ),
        ("Write to help@example.com.", [CONTACT_EN], ["help@example.com"]),
        ("Reply within 36 hours, with 3 links.", [CONTACT_EN], ["36 hours", "3"]),
    ],
)
def test_a_changed_figure_is_caught(reply: str, sources: list[str], caught: list[str]) -> None:
    assert [c.raw for c in unsupported(reply, sources)] == caught


def test_the_customers_words_and_a_tool_result_are_sources_too() -> None:
    customer = "My order 202611280001 was 109 yuan, when does the refund of SF123456789CN arrive?"
    tool_result = json.dumps(
        {"order_id": "202611280001", "total_amount": 109.0, "currency": "CNY",
         "created_at": "2026-11-28T10:15:00+08:00"}
    )  # fmt: skip
    reply = (
        "Your order 202611280001 of CNY 109 (placed on 28 November 2026 at 10:15, parcel"
        " SF123456789CN) will be refunded to your credit card within 7-15 working days."
    )

    assert unsupported(reply, [REFUNDS_EN, customer, tool_result]) == []
    assert [c.raw for c in unsupported(reply, [REFUNDS_EN])] == [
        "202611280001",
        "CNY 109",
        "28 November 2026",
        "10:15",
        "SF123456789CN",
    ]


def test_a_bare_number_in_a_source_does_not_lend_a_unit_to_the_reply() -> None:
    assert [c.raw for c in unsupported("Refunds take 5 days.", ["Press 5 for refunds."])] == [
        "5 days"
    ]
    assert unsupported("Press 5 for refunds.", ["Refunds take 5 days."]) == []


def test_a_date_with_a_year_needs_the_year_and_one_without_needs_the_day() -> None:
    assert unsupported("Shipping resumes on 12 February.", ["ships from 2027-02-12"]) == []
    assert [c.raw for c in unsupported("on 2027-02-12", ["ships from 12 February"])] == [
        "2027-02-12"
    ]


def test_a_plain_reply_is_never_flagged_and_with_no_source_every_figure_is() -> None:
    assert unsupported("Sorry, I don't know. Shall I put you through to a colleague?", []) == []
    assert unsupported("抱歉，这个问题我不太清楚，需要为您转人工客服吗？", [REFUNDS_ZH]) == []
    assert [c.kind for c in unsupported("Refunds take 3-7 working days, CNY 10 fee.", [])] == [
        "duration",
        "amount",
    ]


def test_a_long_run_of_digits_letters_or_numerals_is_read_in_linear_time() -> None:
    # A tool result or a pasted text can be long: no pattern may try a run at every place.
    text = " ".join(["1" * 5000, "a1" * 3000, "一二三" * 2000, "a." * 3000, "x@" * 2000])
    started = time.perf_counter()

    claims(text)

    assert time.perf_counter() - started < 5  # 25 s when a pattern lacked its look-behind
