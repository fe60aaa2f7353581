"""Plan: the tools offered for the intent, and the context within its budget, old turns folded
into the summary by the (scripted) model and stored with the turn's next write."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.conversation.context import ContextBuilder
from app.conversation.turn.plan import Plan
from app.conversation.understanding import Understanding
from app.conversation.window import ModelSummarizer, WindowConfig
from app.llm.testing import Reply, ScriptedLLM
from app.nlu.testing import ScriptedParser
from app.tools.shaping import Redactor
from tests.conversation.core import DEFAULTS, SYSTEM_PROMPT, open_core
from tests.conversation.turn.states import opened, stage, stored, talk


async def test_the_whole_context_and_every_tool_without_a_confident_intent(
    tmp_path: Path,
) -> None:
    async with open_core(tmp_path, Reply("Hi.")) as core:
        session_id = await core.new_session()
        await talk(core, session_id, "hello")
        state = await opened(core, session_id, "look k up")
        state.notes.append({"role": "system", "content": "a note"})

        await stage(core, Plan).run(state)

        assert [t.name for t in state.tools] == ["lookup", "save_note", "refund"]
        # The prompt, the session's goal, the notes, then the turns.
        system, goal, *rest = [(m["role"], m["content"]) for m in state.messages]
        assert system == ("system", SYSTEM_PROMPT) and str(goal[1]).endswith("\nhello")
        assert rest == [
            ("system", "a note"),
            ("user", "hello"),
            ("assistant", "Hi."),
            ("user", "look k up"),
        ]
        state.emitter.writes.flush()


async def test_a_confident_intent_narrows_the_tools(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "hello")
        greeting = ScriptedParser().on("hello", "greeting").parse("hello")
        state.understanding = Understanding(greeting, confident=True)

        await stage(core, Plan).run(state)

        # None of the core's tools serves a greeting (and none is always on).
        assert state.tools == []
        state.emitter.writes.flush()


async def test_old_turns_fold_into_a_summary_stored_with_the_next_write(tmp_path: Path) -> None:
    words = " ".join(f"word{i}" for i in range(60))
    summarizer = ScriptedLLM(Reply("They asked three things; call 13800138000."))
    context = ContextBuilder(
        SYSTEM_PROMPT,
        # Under HERMES_CONTEXT_BUDGET_TOKENS' floor: a small window folds after three turns.
        replace(WindowConfig.from_settings(DEFAULTS.context), budget_tokens=600, keep_turns=1),
        ModelSummarizer(summarizer, DEFAULTS.model.temperature_planning),
    )
    async with open_core(tmp_path, Reply("one"), Reply("two"), Reply("three")) as core:
        session_id = await core.new_session()
        await talk(core, session_id, f"first {words}", f"second {words}", f"third {words}")
        state = await opened(core, session_id, "fourth")

        await Plan(core.registry, context, Redactor()).run(state)

        [request] = summarizer.requests
        assert request.metadata == {"tenant_id": state.turn.tenant_id, "session_id": session_id}
        snapshot = state.snapshot
        assert snapshot is not None and snapshot.summarized_turns >= 1
        # Masked, like the snapshot's goal; the model call sees it as written.
        assert "138****8000" in snapshot.summary
        assert any("13800138000" in str(m["content"]) for m in state.messages)
        assert state.view.context_turns()[0].number > snapshot.summarized_turns
        # Deferred: the stored snapshot changes with the turn's next write.
        before = await core.snapshots.get(session_id)
        assert before is not None and before.summarized_turns == 0
        await stored(state)
        after = await core.snapshots.get(session_id)
        assert after is not None
        assert (after.summary, after.summarized_turns) == (
            snapshot.summary,
            snapshot.summarized_turns,
        )
