"""The runtime, not the desk page, keeps the bot silent while a human agent holds a session: the
customer's messages become held messages (no turn), a turn queued before the claim never
starts, and after the release the bot answers with the agent's words in its context.

The in-process core (real SQLite, the scripted model) and the desk assembled over its stores.
"""

from __future__ import annotations

from pathlib import Path

from app.conversation.service import ForAgent
from app.llm.testing import Reply
from app.principal import LOCAL, Principal
from app.storage.session_writer import SessionWriter
from app.storage.turns import Accepted
from tests.conversation.core import Core, open_core

AGENT = Principal(LOCAL.tenant_id, "agent", "key_agent")


async def take_over(core: Core, session_id: str) -> None:
    desk = core.desk
    await desk.request(
        SessionWriter(session_id),
        LOCAL.tenant_id,
        session_id,
        "asked",
        requested_by="customer",
        language="en",
    )
    await desk.claim(AGENT, session_id)


async def test_a_turn_queued_before_the_claim_never_reaches_the_model(tmp_path: Path) -> None:
    async with open_core(tmp_path, busy_policy="enqueue") as core:
        session_id = await core.new_session()
        queued = (await core.accept(session_id, "are you there?")).turn  # no worker woken yet
        await take_over(core, session_id)
        core.manager.wake(session_id)
        ended = await core.finished(queued)
        assert (ended.status, ended.error_code) == ("failed", "handed_off")
        assert core.model.requests == []


async def test_while_held_a_customer_message_is_no_turn_and_the_agent_is_heard_later(
    tmp_path: Path,
) -> None:
    async with open_core(tmp_path, Reply("Hi!"), Reply("Glad it is sorted.")) as core:
        session_id = await core.new_session()
        first = await core.service.post_message(LOCAL, session_id, "hello", None)
        assert isinstance(first, Accepted)
        await core.finished(first.turn)
        await take_over(core, session_id)
        desk = core.desk
        await desk.agent_says(AGENT, session_id, "Ana here, I refunded it.", None)

        held = await core.service.post_message(LOCAL, session_id, "thanks Ana", None)
        assert isinstance(held, ForAgent) and held.message.role == "user"
        assert held.message.metadata["author"] == "customer"
        latest = await core.turns.latest(session_id)
        assert latest is not None and latest.id == first.turn.id, "a turn was created"
        kinds = [e.type for e in await core.log(session_id)]
        assert kinds[-3:] == ["handoff.claimed", "message.completed", "message.received"]
        assert len(core.model.requests) == 1

        await desk.release(AGENT, session_id)
        after = await core.service.post_message(LOCAL, session_id, "bye for now", None)
        assert isinstance(after, Accepted)
        await core.finished(after.turn)
        assert await core.reply(after.turn) == "Glad it is sorted."
        sent = [(m["role"], m["content"]) for m in core.model.requests[-1].messages]
        notice = sent[-4][1]
        assert notice.startswith("I'm transferring you to a human agent.")
        assert sent[-5:] == [
            ("assistant", "Hi!"),
            ("assistant", notice),
            ("assistant", "Ana here, I refunded it."),
            ("user", "thanks Ana"),
            ("user", "bye for now"),
        ]
