"""hermes/local's answer to a question about a rule, from what its search found."""

from __future__ import annotations

from typing import Any

from app.llm.local.conversation import earlier_results
from app.llm.local.knowledge import asks, knowledge_answer, last_topic
from app.llm.local.templates import POLICY_UNKNOWN
from tests.llm.local.chat import success, tool_call, tool_result, user


def _passage(section: str, text: str) -> dict[str, Any]:
    return {"title": "Who pays return shipping", "section": section, "text": text, "language": "en"}


FOUND = {
    "passages": [
        _passage(
            "Who pays return shipping › Change of mind",
            "If you change your mind, you pay the return shipping of CNY 10.",
        ),
        _passage(
            "Who pays return shipping › Faulty or damaged items",
            "For faulty or damaged items we pay the return shipping.",
        ),
    ]
}


def test_the_best_passage_answers_a_new_question() -> None:
    reply = knowledge_answer("If I change my mind, who pays for shipping back?", "en", FOUND)
    assert "CNY 10" in reply and "Change of mind" in reply


def test_a_follow_up_is_answered_from_the_passage_on_its_own_case() -> None:
    question = "If I change my mind, who pays for shipping back? And if it arrived broken?"
    reply = knowledge_answer(question, "en", FOUND, focus="And if it arrived broken?")
    assert "we pay" in reply and "Faulty or damaged items" in reply
    # Nothing of the new case in any passage: the search's order decides.
    reply = knowledge_answer(question, "en", FOUND, focus="And on a Sunday?")
    assert "CNY 10" in reply


def test_nothing_found_is_not_to_hand() -> None:
    assert knowledge_answer("Do you sell laptops?", "en", {"passages": []}) == POLICY_UNKNOWN["en"]


def test_a_message_put_as_a_question() -> None:
    assert asks("Is anybody picking up the phone at the weekend?")
    assert asks("周末有人接电话吗")
    assert asks("周末有人接电话吗？")
    assert not asks("Nobody picks up the phone at the weekend.")
    assert not asks("我要投诉你们的客服")


def test_the_topic_of_a_follow_up_is_the_last_search_s_best_document() -> None:
    def search(call_id: str, found: dict[str, Any]) -> list[dict[str, Any]]:
        asked = tool_call("search_knowledge", {"query": "q"}, call_id)
        return [asked, tool_result(call_id, success(found))]

    first = [user("Who pays for return shipping?"), *search("call_1", FOUND)]
    assert last_topic(earlier_results([*first, user("and?")], "search_knowledge")) == (
        "Who pays return shipping"
    )
    # the last search found nothing: no topic, not the one before it
    nothing = [user("Do you sell laptops?"), *search("call_2", {"passages": []})]
    messages = [*first, *nothing, user("and?")]
    assert last_topic(earlier_results(messages, "search_knowledge")) is None
    assert last_topic([]) is None
