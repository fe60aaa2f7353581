import pytest

from app.memory.extract import (
    Proposal,
    ToolEvidence,
    TurnFacts,
    extract,
    proposals_to_drafts,
    text_key,
)


def drafts(text: str, **kw):
    return [(d.key, d.value, d.tier, d.status) for d in extract(TurnFacts(text, **kw)).drafts]


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("以后都用简体中文", "preference.language", "简体中文"),
        ("我喜欢顺丰", "preference.courier", "顺丰"),
        ("send invoices as PDF", "preference.invoice_format", "PDF"),
        ("From now on, reply in English please.", "preference.language", "English"),
        ("I prefer SF Express for deliveries", "preference.courier", "顺丰"),
        ("以后用邮件联系我", "preference.contact_channel", "email"),
        ("发票一律开电子的", "preference.invoice_format", "电子"),
    ],
)
def test_explicit_preferences_become_keyed_facts(text, key, value):
    assert (key, value, "fact", "active") in drafts(text)


@pytest.mark.parametrize(
    "text",
    [
        "今天想吃面",
        "今天好累啊",
        "你好",
        "谢谢！",
        "I'm so hungry right now",
        "用顺丰寄吧",  # a one-off request, not a standing preference
        "你们支持顺丰吗？",  # a question states nothing
        "请确认一下我的订单",
        "the weather is nice today",
    ],
)
def test_small_talk_transient_states_and_questions_are_not_stored(text):
    assert drafts(text) == []


def test_negative_preferences_are_kept_in_the_users_words():
    assert drafts("以后不要用中通") == [
        (text_key("preference", "以后不要用中通"), "以后不要用中通", "node", "active")
    ]
    (found,) = drafts("I don't want phone calls from now on")
    assert found[2] == "node" and "phone calls" in found[1]


def test_remember_this_stores_the_sentence_or_the_rest_of_the_message():
    assert drafts("记住：我家门口有只狗，送货前先打电话")[0][1:3] == (
        "我家门口有只狗，送货前先打电话",
        "node",
    )
    assert drafts("我家门口有只狗。记住这个。")[0][1] == "我家门口有只狗"
    assert drafts("Remember that my office is closed on Fridays")[0][1] == (
        "my office is closed on Fridays"
    )


def test_remember_with_a_known_fact_becomes_that_fact():
    assert drafts("Please remember that I prefer SF Express.") == [
        ("preference.courier", "顺丰", "fact", "active")
    ]
    assert drafts("记住我的邮箱是 li.lei@example.com")[0][:2] == (
        "contact.email",
        "li.lei@example.com",
    )


def test_the_same_sentence_remembered_twice_has_one_key():
    first = extract(TurnFacts("记住：周末不在家")).drafts[0].key
    assert extract(TurnFacts("请记住周末不在家。")).drafts[0].key == first


def test_contact_details_the_user_states():
    (email,) = extract(TurnFacts("我的邮箱是 Alice@New.com")).drafts
    assert (email.key, email.value, email.confidence) == ("contact.email", "alice@new.com", 0.8)
    (phone,) = extract(TurnFacts("我现在的手机号是 138-1234-5678")).drafts
    assert (phone.key, phone.value) == ("contact.phone", "13812345678")


def test_decisions_the_user_states_or_confirms():
    (decision,) = extract(TurnFacts("我决定选择方案B：先退款后补发")).drafts
    assert decision.fact_type == "decision" and "方案B" in decision.value
    assert extract(TurnFacts("I'll go with the refund option")).drafts[0].fact_type == "decision"
    confirmed = extract(
        TurnFacts("好的，就这么办", previous_assistant="可以退款。要不要我先退款再补发新的？")
    ).drafts
    assert [d.fact_type for d in confirmed] == ["decision"]
    assert "先退款再补发" in confirmed[0].value
    # "ok" after a plain statement confirms nothing
    assert extract(TurnFacts("ok", previous_assistant="Your parcel left the depot.")).drafts == []


def test_verified_contacts_from_successful_tool_results():
    facts = TurnFacts(
        "查一下",
        tool_results=(
            ToolEvidence(
                "crm_lookup", True, {"customer": {"phone": "139 0000 1111", "verified": True}}
            ),
            ToolEvidence("crm_lookup", True, {"verified_email": "z@y.com"}),
            ToolEvidence("crm_lookup", True, {"email": "unverified@y.com"}),
            ToolEvidence("crm_lookup", False, {"phone": "13700000000", "verified": True}),
        ),
    )
    out = extract(facts)
    assert sorted((d.key, d.value, d.source, d.confidence) for d in out.drafts) == [
        ("contact.email", "z@y.com", "tool", 1.0),
        ("contact.phone", "13900001111", "tool", 1.0),
    ]
    assert "13900001111" in out.evidence and "unverified@y.com" in out.evidence
    assert "13700000000" not in out.evidence  # a failed call proves nothing


def test_forget_commands_teach_nothing():
    assert drafts("别记这个，我喜欢顺丰") == []


def test_model_proposals_are_pending_unless_the_turn_proves_them():
    proposals = [Proposal("contact.email", "a@b.com"), Proposal("contact.phone", "13800000000")]
    got = proposals_to_drafts(proposals, "我的手机是13800000000", set())
    assert [(d.key, d.status, d.source) for d in got] == [
        ("contact.email", "pending", "model"),
        ("contact.phone", "active", "rule"),
    ]
    (proven,) = proposals_to_drafts([Proposal("contact.email", "a@b.com")], "", {"a@b.com"})
    assert proven.status == "active"


def test_a_contact_a_tool_updated_is_stored_from_the_calls_arguments():
    # The result masks the value ("139****5678"); the call's arguments carry what was set.
    updated = ToolEvidence(
        "update_contact_info",
        True,
        {"field": "phone", "status": "updated", "masked_value": "139****5678"},
        {"field": "phone", "value": "139 1234 5678"},
    )
    sent = ToolEvidence("reset_password", True, {"status": "reset_link_sent"}, {"phone": "1"})
    out = extract(TurnFacts("是", tool_results=(updated, sent)))
    assert [(d.key, d.value, d.source, d.confidence) for d in out.drafts] == [
        ("contact.phone", "13912345678", "tool", 1.0)
    ]


def test_a_contact_a_tool_refused_is_not_stored():
    refused = ToolEvidence(
        "reset_password", False, None, {"phone": "13700000000"}, "phone_mismatch"
    )
    out = extract(TurnFacts("我的手机号是13700000000", tool_results=(refused,)))
    assert out.drafts == [] and out.refuted == {"13700000000"}
    # Only a refusal of the value refutes it: an outage or a pending confirmation does not.
    waiting = ToolEvidence("reset_password", False, None, {"phone": "13700000000"}, "timeout")
    kept = extract(TurnFacts("我的手机号是13700000000", tool_results=(waiting,)))
    assert [d.value for d in kept.drafts] == ["13700000000"] and kept.refuted == set()


def test_remember_that_i_prefer_to_be_contacted_by_email_is_a_channel_preference():
    stored = extract(TurnFacts("Please remember that I prefer to be contacted by email")).drafts
    assert [(d.key, d.value) for d in stored] == [("preference.contact_channel", "email")]


def test_yes_to_the_runtimes_confirmation_question_is_not_a_decision():
    for question in (
        "Please confirm: change the email on your account to l***@example.net. Reply yes or no: "
        "shall I go ahead?",
        "请确认：将您账户的手机号改为 139****5678。请回复“是”或“不”：现在为您办理吗？",
    ):
        assert extract(TurnFacts("yes", previous_assistant=question)).drafts == []
        assert extract(TurnFacts("是的", previous_assistant=question)).drafts == []
