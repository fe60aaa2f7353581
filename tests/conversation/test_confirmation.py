"""Reading the customer's answer to a confirmation: yes or no only when nothing else is said."""

from __future__ import annotations

import pytest

from app.conversation.confirmation import Answer, classify


@pytest.mark.parametrize(
    "text",
    ["yes", "Yes please", "yes, go ahead", "OK", "that's right", "是", "是的", "好的，改吧", "确认",
     "是的，确认修改", "嗯"],
)  # fmt: skip
def test_yes(text: str) -> None:
    assert classify(text) is Answer.YES


@pytest.mark.parametrize(
    "text",
    ["no", "No.", "no thanks", "cancel", "don't change it", "不", "不是", "取消", "不要改了"],
)
def test_no(text: str) -> None:
    assert classify(text) is Answer.NO


@pytest.mark.parametrize(
    "text",
    [
        "yes and check my order 202405201234",
        "please change my email",
        "13800138000",
        "是的，另外帮我查一下订单",
        "yesterday",
        "nobody asked",
        "",
        "yes " * 20,
    ],
)
def test_anything_else_is_not_an_answer(text: str) -> None:
    assert classify(text) is Answer.OTHER
