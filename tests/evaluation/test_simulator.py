"""The simulated customer answers what the agent asked from its fact sheet, fires its
reactions once each in order, and knows when to stop."""

from __future__ import annotations

from app.evaluation.scenario import Reaction, Simulation
from app.evaluation.simulator import SimulatedCustomer

ASK_ORDER = "请提供需要退款的订单号（12位数字）。"
ASK_AMOUNT = "订单金额超过500，需要人工审核。请告诉我需要退款的具体金额。"
DONE = "已为订单 202403022315 提交退款申请。"


def customer(**plan: object) -> SimulatedCustomer:
    facts = {"order_id": "202403022315", "amount": "948"}
    return SimulatedCustomer(Simulation(opening="我要退款", **plan), facts, "zh")  # type: ignore[arg-type]


def test_answers_from_the_fact_sheet_in_its_style_then_stops() -> None:
    sim = customer(style="bare")
    assert sim.first() == "我要退款"
    assert sim.answer(ASK_ORDER) == "202403022315"
    assert sim.answer(ASK_AMOUNT) == "948"
    assert sim.answer(DONE) is None
    assert sim.said == ["我要退款", "202403022315", "948"]


def test_a_closing_line_is_said_once() -> None:
    sim = customer(closing="谢谢")
    sim.first()
    assert sim.answer(DONE) == "谢谢"
    assert sim.answer("不客气，再见。还有什么问题吗？") is None


def test_reactions_fire_in_order_each_once() -> None:
    plan = (
        Reaction("order_id", "202403022399"),  # a wrong number first
        Reaction("any", "不好意思说错了，是 202403022315"),  # then the correction
        Reaction("done", "对了，SF123456789CN 到哪了"),  # a topic switch at the end
    )
    sim = customer(style="unit", reactions=plan)
    sim.first()
    assert sim.answer(ASK_AMOUNT) == "948元"  # the first reaction waits for its slot
    assert sim.answer(ASK_ORDER) == "202403022399"
    assert (
        sim.answer("没有找到订单 202403022399，请核对订单号后再告诉我。")
        == "不好意思说错了，是 202403022315"
    )
    assert sim.answer(ASK_ORDER) == "202403022315"
    assert sim.answer(DONE) == "对了，SF123456789CN 到哪了"
    assert sim.answer(DONE) is None


def test_a_slot_without_a_fact_ends_the_conversation_and_the_cap_holds() -> None:
    sim = SimulatedCustomer(Simulation(opening="我要退款", max_turns=2), {}, "zh")
    sim.first()
    assert sim.answer(ASK_ORDER) is None
    capped = customer(max_turns=2)
    capped.first()
    assert capped.answer(ASK_ORDER) is not None
    assert capped.answer(ASK_AMOUNT) is None


def test_contact_questions_prefer_the_new_value_when_asked_for_a_new_one() -> None:
    facts = {"phone": "13800138000", "new_phone": "13700137000", "field": "phone"}
    sim = SimulatedCustomer(Simulation(opening="改手机号", style="bare"), facts, "zh")
    sim.first()
    assert sim.answer("您想更新哪项联系方式：手机号、邮箱还是地址？") == "手机号"
    assert sim.answer("请提供新的手机号。") == "13700137000"
    assert sim.answer("请提供您账户绑定的手机号，我会把重置链接发送到这个号码。") == "13800138000"
