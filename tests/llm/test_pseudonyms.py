"""The tokenizer of the model masking policy: hide on the way out, reveal its own tokens only."""

from __future__ import annotations

import json
import re

import pytest

from app.llm.messages import ChatMessage
from app.llm.pseudonyms import KINDS, MaskingPolicy, Pseudonyms

PHONE, EMAIL = "13812345678", "li.lei@example.com"
ID_CARD, BANK_CARD = "110101199003074518", "6222021234567890123"
PLANTED = (PHONE, EMAIL, ID_CARD, BANK_CARD)
TEXT = f"call {PHONE}, mail {EMAIL}, id {ID_CARD}, card {BANK_CARD}"
TOKEN = re.compile(r"«[A-Z_]+_[A-Z2-9]{4,10}»")


def table(session: str = "s1", mode: str = "pseudonymise") -> Pseudonyms:
    return Pseudonyms.for_session(mode, KINDS, session)  # type: ignore[arg-type]


def test_each_kind_becomes_a_token_and_comes_back() -> None:
    t = table()
    hidden = t.hide(TEXT)
    assert not any(value in hidden for value in PLANTED)
    kinds = [m[0][1:].rsplit("_", 1)[0] for m in TOKEN.finditer(hidden)]
    assert kinds == ["PHONE", "EMAIL", "ID_CARD", "BANK_CARD"]
    assert t.issued == 4
    assert t.reveal(hidden) == TEXT


def test_a_value_is_the_same_token_in_every_request_of_a_session_and_not_in_another() -> None:
    first, again, other = table("s1").hide(PHONE), table("s1").hide(PHONE), table("s2").hide(PHONE)
    assert first == again
    assert first != other
    # One value however it is written.
    assert table("s1").hide("138 1234 5678") == first


def test_two_values_get_two_tokens() -> None:
    t = table()
    hidden = t.hide(f"{PHONE} or 13987654321, again {PHONE}")
    tokens = TOKEN.findall(hidden)
    assert len(tokens) == 3 and tokens[0] == tokens[2] != tokens[1]


def test_unknown_and_forged_tokens_stay_as_they_are() -> None:
    mine = table("s1")
    mine.hide(PHONE)
    theirs = table("s2").hide("13900000000")  # another session's token for another value
    forged = "«PHONE_ABCD» and «EMAIL_2222»"
    assert mine.reveal(theirs) == theirs
    assert mine.reveal(forged) == forged
    # A table that issued nothing reveals nothing, even a token of the same session.
    assert table("s1").reveal(mine.hide(PHONE)) == mine.hide(PHONE)


def test_mask_mode_uses_the_redactors_masks_and_reveals_nothing() -> None:
    t = table(mode="mask")
    hidden = t.hide(TEXT)
    assert "138****5678" in hidden and "l***@example.com" in hidden and "****0123" in hidden
    assert not any(value in hidden for value in PLANTED)
    assert t.issued == 0 and t.reveal(hidden) == hidden


def test_only_the_configured_kinds_are_hidden() -> None:
    t = Pseudonyms.for_session("pseudonymise", ["email"], "s1")
    hidden = t.hide(TEXT)
    assert EMAIL not in hidden and PHONE in hidden and BANK_CARD in hidden


def test_messages_are_copied_with_contents_and_tool_arguments_hidden() -> None:
    t = table()
    args = json.dumps({"body": f"reach me at\n{PHONE}", "n": int(PHONE)})
    messages: list[ChatMessage] = [
        {"role": "system", "content": f"From memory: email {EMAIL}"},
        {"role": "user", "content": TEXT},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "note", "arguments": args}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"card": f"x\t{BANK_CARD}"})},
    ]
    before = json.dumps(messages)
    sent = json.dumps(t.hide_messages(messages), ensure_ascii=False)
    assert json.dumps(messages) == before  # the caller's messages are untouched
    assert not any(value in sent for value in PLANTED)
    assert "«PHONE_" in sent and "«BANK_CARD_" in sent


def test_tool_arguments_come_back_as_valid_json_with_the_real_values() -> None:
    t = table()
    phone, email = t.hide(PHONE), t.hide(EMAIL)
    raw = json.dumps({"to": email, "text": f"call {phone}", "other": "«PHONE_ZZZZ»"})
    assert json.loads(t.reveal_arguments(raw)) == {
        "to": EMAIL,
        "text": f"call {PHONE}",
        "other": "«PHONE_ZZZZ»",
    }


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7])
def test_streamed_text_is_revealed_with_tokens_split_across_pieces(size: int) -> None:
    t = table()
    reply = f"Your number «» is {t.hide(PHONE)}, mail «{t.hide(EMAIL)}» ok «PHONE_ZZZZ»."
    pieces = [reply[i : i + size] for i in range(0, len(reply), size)]
    revealer = t.revealer()
    shown = [revealer.feed(piece) for piece in pieces] + [revealer.flush()]
    assert "".join(shown) == f"Your number «» is {PHONE}, mail «{EMAIL}» ok «PHONE_ZZZZ»."
    # No piece passed on a cut token: its start was held until the rest came.
    issued = (t.hide(PHONE), t.hide(EMAIL))
    for piece in shown:
        assert not any(piece.endswith(tok[:k]) for tok in issued for k in range(2, len(tok)))


def test_only_a_possible_token_start_is_held() -> None:
    revealer = table().revealer()
    assert revealer.feed("hello «PHO") == "hello "
    assert revealer.feed("TO» world") == "«PHOTO» world"
    assert revealer.feed("« not a token") == "« not a token"
    assert revealer.feed("end «") == "end "
    assert revealer.flush() == "«"


def test_policy_mode_per_tenant() -> None:
    policy = MaskingPolicy.of("pseudonymise", {"b": "off", "c": "mask"}, KINDS)
    assert [policy.mode_for(t) for t in ("a", "b", "c", None)] == [
        "pseudonymise",
        "off",
        "mask",
        "pseudonymise",
    ]
    assert policy.active
    assert not MaskingPolicy.of("off", {}, KINDS).active
    assert MaskingPolicy.of("off", {"x": "mask"}, KINDS).active
    assert not MaskingPolicy.of("mask", {}, []).active
