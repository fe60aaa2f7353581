"""The simulated customer's ears: which slot a question asks for, in both languages, for the
offline model's own questions and for a remote model's free wording."""

from __future__ import annotations

import pytest

from app.evaluation.slots import asked_slot, phrase
from app.llm.local.templates import ASK


@pytest.mark.parametrize(
    ("intent", "slot", "expected"),
    [
        ("order_status", "order_id", "order_id"),
        ("track_shipment", "tracking_or_order", "tracking"),
        ("refund_request", "order_id", "order_id"),
        ("return_request", "order_id", "order_id"),
        ("password_reset", "phone", "phone"),
        ("complaint", "summary", "summary"),
        ("update_contact", "contact_field", "field"),
        ("update_contact", "phone", "phone"),
        ("update_contact", "email", "email"),
        ("update_contact", "address", "address"),
        ("email_request", "email", "email"),
    ],
)
@pytest.mark.parametrize("language", ["zh", "en"])
def test_every_question_of_the_offline_model_is_recognised(
    intent: str, slot: str, expected: str, language: str
) -> None:
    assert asked_slot(ASK[intent][slot][language]) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("请确认：将您账户的邮箱改为 a@example.com。请回复“是”或“不”：现在为您办理吗？", "confirm"),
        ("Please confirm: change the email. Reply yes or no: shall I go ahead?", "confirm"),
        ("订单 202403022315 金额超过500，需要人工审核。请告诉我需要退款的具体金额。", "amount"),
        ("How much would you like refunded?", "amount"),
        ("I couldn't find order 202405201299. Could you check the order number?", "order_id"),
        ("Your order 202405201234 is shipped.", None),  # a statement asks nothing
        ("已为您登记工单 TK00000073。还有什么可以帮您？", None),  # a question about nothing known
    ],
)
def test_the_last_question_decides(reply: str, expected: str | None) -> None:
    assert asked_slot(reply) == expected


def test_styles_of_answer() -> None:
    assert phrase("amount", "948", "bare", "zh") == "948"
    assert phrase("amount", "948", "unit", "zh") == "948元"
    assert phrase("amount", "948", "unit", "en") == "948.00 CNY"
    assert phrase("order_id", "202405201234", "unit", "en") == "202405201234"
    assert phrase("order_id", "202405201234", "sentence", "zh") == "订单号是 202405201234"
    assert phrase("field", "email", "bare", "zh") == "邮箱"
    assert phrase("confirm", "no", "bare", "en") == "No, thanks"
    assert phrase("confirm", "yes", "sentence", "zh") == "是的，确认"
