"""Guard: the run the loop gets, with what it enforces: the tools offered, the calls confirmed,
the taint of untrusted content, and the budget's meter."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.conversation.budgets import Budgets
from app.conversation.confirmation import Resolution
from app.conversation.loop import Resume
from app.conversation.turn.answer import AnswerConfirmation
from app.conversation.turn.guard import Guard
from app.conversation.turn.plan import Plan
from app.llm.gateway import RequestedToolCall
from app.llm.prices import Prices
from app.settings import BudgetSettings
from app.storage.confirmations import confirmed_call_id
from app.storage.usage import UsageStore
from tests.conversation.core import open_core
from tests.conversation.doubles import NoBudgets
from tests.conversation.turn.states import asked_to_confirm, opened, stage, through


async def test_the_run_carries_the_plan_and_the_policy(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "yes")
        await through(state, stage(core, Plan))
        state.tools = state.tools[:1]  # as a confident intent would narrow them
        state.untrusted = ["memory note m1 in the customer's words"]
        snapshot = state.snapshot
        assert snapshot is not None
        state.view.snapshot = replace(snapshot, state={"untrusted": ["output of mcp__x__y"]})
        call = RequestedToolCall("cnf_call", "refund", '{"amount": 5}')
        state.answer = Resolution(call=call)

        await Guard(stage(core, AnswerConfirmation).confirmations, NoBudgets()).run(state)

        run = state.run
        assert (run.messages, run.tools, run.user_text) == (state.messages, state.tools, "yes")
        assert (run.reports, run.transcript) == (state.reports, state.transcript)
        assert (run.scope.session_id, run.scope.user_id, run.scope.turn_id) == (
            session_id,
            "u1",
            state.turn.id,
        )
        assert run.policy.offered == frozenset({"lookup"})
        assert run.confirmed_calls == [call] and run.policy.confirmed == frozenset({"cnf_call"})
        assert run.policy.taint.sources == [
            "memory note m1 in the customer's words",
            "output of mcp__x__y",
        ]
        assert run.policy.taint.lasting == ["output of mcp__x__y"]
        assert run.meter is None  # nothing counted
        state.emitter.writes.flush()


async def test_budgets_meter_the_turn_from_its_callers_count(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "hello")
        limiter = core.executor.guards.limiter  # the tools' limiter, as in the runtime
        budgets = Budgets(BudgetSettings(turn_tokens=100), UsageStore(core.db), Prices(), limiter)

        await Guard(stage(core, AnswerConfirmation).confirmations, budgets).run(state)

        meter = state.run.meter
        assert meter is not None and meter.used is state.used
        assert meter.config == BudgetSettings(turn_tokens=100)
        state.emitter.writes.flush()


async def test_a_resumed_turn_keeps_what_its_customer_confirmed(tmp_path: Path) -> None:
    async with open_core(tmp_path) as core:
        session_id = await core.new_session()
        state = await opened(core, session_id, "yes")
        asked = await asked_to_confirm(core, session_id, state.turn.id)
        confirmations = stage(core, AnswerConfirmation).confirmations
        await confirmations.resolve(state.writer, asked.id, "confirmed", state.turn.id)
        state.resume = Resume(pending_calls=[], rounds_used=1)

        await stage(core, Guard).run(state)

        assert state.run.policy.confirmed == frozenset({confirmed_call_id(asked.id)})
        assert state.run.confirmed_calls == [] and state.run.resume is state.resume
        state.emitter.writes.flush()
