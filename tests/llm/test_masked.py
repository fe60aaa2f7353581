"""The masking policy through the service: what the fake OpenAI-compatible server receives over
HTTP under each mode and tenant, and what comes back to the customer and the tools."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from app.llm.build import build_chain
from app.llm.catalog import LOCAL_MODEL, ModelConfig
from app.llm.local.model import LocalModel
from app.llm.masked import MaskedModel
from app.llm.pseudonyms import KINDS, MaskingPolicy
from app.llm.testing import FakeLLMServer, RecordedRequest, Reply, Step, ToolCall, ToolCalls
from app.nlu.testing import ScriptedParser
from app.testing import LiveService, SseEvent, serve, stream_turn
from tests.conftest import FIXTURE_TOOLS, new_session
from tests.llm.paths import chain_options
from tests.tools.fixture_tools import REC

PHONE, EMAIL = "13812345678", "wang.fang@example.org"
ID_CARD, BANK_CARD = "110101199003074518", "6222021234567890123"
PLANTED = (PHONE, EMAIL, ID_CARD, BANK_CARD)
SAID = f"My phone is {PHONE}, email {EMAIL}, ID card {ID_CARD}, card {BANK_CARD}."
TOKEN = re.compile(r"«[A-Z_]+_[A-Z2-9]{4,10}»")


def sent(request: RecordedRequest) -> str:
    """Everything a request carried, as the model server read it."""
    return json.dumps(request.body, ensure_ascii=False)


def last_user(request: RecordedRequest) -> str:
    return str(next(m["content"] for m in reversed(request.messages) if m["role"] == "user"))


def echo(request: RecordedRequest) -> Step:
    """Says back what the customer said, in pieces of 3 characters: tokens are cut."""
    text = "You said: " + last_user(request)
    return Reply(text, chunks=-(-len(text) // 3))


def reply_text(events: list[SseEvent]) -> str:
    return next(e.data["text"] for e in events if e.event == "message.completed")


def deltas(events: list[SseEvent]) -> list[str]:
    return [e.data["text"] for e in events if e.event == "message.delta"]


async def turn(svc: LiveService, session_id: str, content: str = SAID) -> list[SseEvent]:
    events = await stream_turn(svc.client, session_id, content)
    assert events[-1].event == "turn.completed", events[-1]
    return events


async def test_pseudonymised_by_default_and_read_back_for_the_customer(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.responder = echo
    async with serve(make_settings()) as svc:
        session_id = await new_session(svc)
        first = await turn(svc, session_id)
        second = await turn(svc, session_id, f"again: {PHONE}")
        listed = (await svc.client.get(f"/v1/sessions/{session_id}/messages")).json()["items"]
    one, two = fake_llm.requests
    for request in (one, two):
        assert not any(value in sent(request) for value in PLANTED), sent(request)
    tokens = TOKEN.findall(last_user(one))
    assert len(tokens) == 4
    # The same phone is the same token in the next turn, in its history and in its new text.
    assert TOKEN.findall(last_user(two)) == tokens[:1]
    assert two.messages[-3]["content"] == last_user(one)
    assert TOKEN.findall(str(two.messages[-2]["content"])) == tokens
    # The customer sees the real values, in the stream (no token, whole or cut) and stored.
    assert reply_text(first) == "You said: " + SAID
    assert "".join(deltas(first)) == "You said: " + SAID
    assert len(deltas(first)) > 1 and not any("«" in d for d in deltas(first))
    assert reply_text(second) == f"You said: again: {PHONE}"
    assert [m["content"] for m in listed] == [
        SAID,
        "You said: " + SAID,
        f"again: {PHONE}",
        f"You said: again: {PHONE}",
    ]


async def test_off_sends_the_values_and_mask_sends_masks(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    fake_llm.responder = echo
    async with serve(make_settings(model_masking="off")) as svc:
        await turn(svc, await new_session(svc))
    async with serve(make_settings(model_masking="mask")) as svc:
        masked = await turn(svc, await new_session(svc))
    off, mask = fake_llm.requests
    assert all(value in last_user(off) for value in PLANTED)
    assert not any(value in sent(mask) for value in PLANTED)
    assert not TOKEN.search(sent(mask))
    assert "138****5678" in last_user(mask) and "w***@example.org" in last_user(mask)
    # Nothing to read back: the customer hears the masks.
    assert "138****5678" in reply_text(masked)


async def test_only_the_configured_kinds(make_settings: Any, fake_llm: FakeLLMServer) -> None:
    fake_llm.responder = echo
    async with serve(make_settings(model_masking_kinds="email,bank_card")) as svc:
        await turn(svc, await new_session(svc))
    said = last_user(fake_llm.requests[0])
    assert PHONE in said and ID_CARD in said
    assert EMAIL not in said and BANK_CARD not in said


ACME, GLOBEX = "acme-agent-key-000001", "globex-agent-key-0001"


async def test_two_tenants_two_policies(make_settings: Any, fake_llm: FakeLLMServer) -> None:
    fake_llm.responder = echo
    settings = make_settings(
        auth="api_key",
        api_keys=[f"acme:agent:{ACME}", f"globex:agent:{GLOBEX}"],
        model_masking_tenants="globex:off",
    )
    async with serve(settings) as svc:
        for key in (ACME, GLOBEX):
            svc.client.headers["Authorization"] = f"Bearer {key}"
            events = await turn(svc, await new_session(svc))
            assert reply_text(events) == "You said: " + SAID
    acme, globex = fake_llm.requests
    assert not any(value in sent(acme) for value in PLANTED)
    assert all(value in last_user(globex) for value in PLANTED)


def call_with_tokens(request: RecordedRequest) -> Step:
    """Notes the customer's phone by its token (and a forged one), then says it is done."""
    if request.messages[-1]["role"] == "tool":
        return Reply("Noted.")
    phone = TOKEN.findall(last_user(request))[0]
    return ToolCalls(
        ToolCall("write_note", {"text": f"call {phone} not «PHONE_ZZZZ»"}, id="call_1")
    )


async def test_a_tool_gets_the_real_value_of_a_token(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    REC.reset()
    fake_llm.responder = call_with_tokens
    try:
        async with serve(make_settings(tools_file=FIXTURE_TOOLS)) as svc:
            await turn(svc, await new_session(svc), f"note it: {PHONE}")
        noted = [e["text"] for e in REC.side_effects]
    finally:
        REC.reset()
    # Restored before validation and execution; a token the table never issued stays as it is.
    assert noted == [f"call {PHONE} not «PHONE_ZZZZ»"]
    # The round after the tool: its call and result go back hidden.
    after = fake_llm.requests[-1]
    assert after.messages[-1]["role"] == "tool"
    assert PHONE not in sent(after)
    assert TOKEN.findall(last_user(after))[0] in sent(after).split('"tool_calls"', 1)[1]


async def test_only_remote_models_are_wrapped() -> None:
    configs = [ModelConfig("openai/a", "http://127.0.0.1:9/v1", "sk-x"), ModelConfig(LOCAL_MODEL)]
    for default, wrapped in (("pseudonymise", True), ("mask", True), ("off", False)):
        policy = MaskingPolicy.of(default, {}, KINDS)
        chain = build_chain(configs, chain_options(masking=policy), parser=ScriptedParser())
        try:
            remote, local = (link.model for link in chain._links)
            assert isinstance(remote, MaskedModel) is wrapped
            assert isinstance(local, LocalModel)
        finally:
            await chain.aclose()


@pytest.mark.parametrize(
    ("variable", "value"),
    [("model_masking", "hide"), ("model_masking_tenants", "acme"), ("model_masking_kinds", "ssn")],
)
def test_bad_settings_name_the_variable(make_settings: Any, variable: str, value: str) -> None:
    from pydantic import ValidationError

    from app.settings import describe_validation_error

    with pytest.raises(ValidationError) as caught:
        make_settings(**{variable: value})
    assert describe_validation_error(caught.value)[0][0] == f"HERMES_{variable.upper()}"


async def test_an_agents_draft_goes_through_the_tenants_policy_and_comes_back_real(
    make_settings: Any, fake_llm: FakeLLMServer
) -> None:
    from tests.api.test_handoff import AS_AGENT, as_customer, ask, claim, desk_settings, say

    # Off by default, on for the desk's tenant: the draft's request must say whose it is.
    settings = desk_settings(
        make_settings, model_masking="off", model_masking_tenants="acme:pseudonymise"
    )
    async with serve(settings) as svc:
        svc.client.headers.update(await as_customer(svc))
        session_id = await new_session(svc)
        fake_llm.enqueue(Reply("Hello, how can I help?"))
        assert (await say(svc, session_id, "hello")).status_code == 200
        await ask(svc, session_id, "billing dispute")
        assert (await claim(svc, session_id, AS_AGENT)).status_code == 200
        assert (await say(svc, session_id, f"call me on {PHONE}")).status_code == 202
        fake_llm.responder = echo
        drafted = await svc.client.post(
            f"/v1/sessions/{session_id}/handoff/suggestions", headers=AS_AGENT
        )
    assert drafted.status_code == 201, drafted.text
    assert PHONE not in sent(fake_llm.requests[-1])
    assert TOKEN.search(last_user(fake_llm.requests[-1]))
    assert drafted.json()["text"] == f"You said: call me on {PHONE}"
