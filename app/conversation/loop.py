"""The agent loop of one turn, as a small typed state machine.

Each round asks the model and gets one of a closed set of steps back: `FinalReply` ends the
turn, `CallTools` runs the tools and goes round again. The number of tool rounds is capped;
hitting the cap ends the turn with a graceful reply instead of an error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from app.conversation.budgets import TurnMeter
from app.errors import UpstreamLLMError
from app.knowledge.passages import SEARCH_TOOL
from app.llm.failures import ModelsFailed
from app.llm.gateway import (
    ChatModel,
    ModelReply,
    ModelRequest,
    ModelRoute,
    RequestedToolCall,
    collect,
    tap_route,
)
from app.llm.messages import ChatMessage
from app.llm.prices import Prices
from app.observability import metrics
from app.settings import Settings
from app.text.language import Language, latest_language
from app.tools.context import TurnScope
from app.tools.executor import ToolExecutor, TurnTools
from app.tools.policy import TurnPolicy
from app.tools.reports import TurnReports
from app.tools.results import ToolResult
from app.tools.spec import ToolSpec

MAX_ROUNDS_REPLY = {
    "en": (
        "I'm sorry, I couldn't finish this request within the steps I'm allowed. "
        "A colleague can pick it up from here; could you tell me what matters most?"
    ),
    "zh": (
        "抱歉，这个请求在允许的步骤内没能完成。"
        "我可以为您转接人工客服，或者请告诉我最需要先处理的事项。"
    ),
}


def turn_language(run: TurnRun) -> Language:
    """The customer's language: their message, or the last earlier one that shows a script
    (a bare order number says nothing)."""
    texts = [run.user_text] + [
        str(m.get("content") or "")
        for m in reversed(run.messages)
        if m.get("role") == "user" and not m.get("name")
    ]
    return latest_language(texts)


@dataclass(frozen=True)
class FinalReply:
    text: str


@dataclass(frozen=True)
class CallTools:
    calls: list[RequestedToolCall]
    text: str


Step = FinalReply | CallTools


class TurnTranscript(Protocol):
    """Where the loop records the messages of the turn as they happen."""

    async def assistant_calls(self, text: str, calls: list[RequestedToolCall]) -> None: ...

    async def tool_result(self, call: RequestedToolCall, result: ToolResult) -> None: ...


@dataclass(frozen=True)
class Resume:
    """Where a retried turn picks up: calls recorded but never answered, rounds already used."""

    pending_calls: list[RequestedToolCall]
    rounds_used: int


@dataclass
class TurnRun:
    messages: list[ChatMessage]
    tools: list[ToolSpec]
    scope: TurnScope
    # Where the turn reports (text, model calls, tool calls): the turn's emitter, wrapped in a
    # StepRecorder when steps are recorded.
    reports: TurnReports
    transcript: TurnTranscript
    user_text: str = ""
    resume: Resume | None = None
    policy: TurnPolicy = field(default_factory=TurnPolicy)
    # Calls the customer has just confirmed: they run first, before the model is asked.
    confirmed_calls: list[RequestedToolCall] = field(default_factory=list)
    # Token and cost caps (None: no budgets): checked before the first model call and after
    # each round that asks for tools, so a round that crosses a cap is the turn's last.
    meter: TurnMeter | None = None
    # A reply from knowledge is checked before the customer sees any of it (the grounding
    # guard, app/conversation/turn/ground.py): once the turn has searched, text is not streamed.
    hold_text: bool = False


@dataclass
class TurnOutcome:
    text: str
    stopped: Literal["final", "max_rounds", "confirm", "confirmation_declined"]
    rounds: int = 0
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoopLimits:
    max_rounds: int
    max_tokens: int
    temperature_tools: float
    temperature_text: float

    @classmethod
    def from_settings(cls, settings: Settings) -> LoopLimits:
        return cls(
            max_rounds=settings.turns.max_tool_rounds,
            max_tokens=settings.model.max_tokens,
            temperature_tools=settings.model.temperature_tools,
            temperature_text=settings.model.temperature_text,
        )


class AgentLoop:
    def __init__(
        self,
        model: ChatModel,
        executor: ToolExecutor,
        limits: LoopLimits,
        *,
        model_label: str,
        prices: Prices,
    ) -> None:
        self.model = model
        self.executor = executor
        self.limits = limits
        self.model_label = model_label
        # One price per answered call, for its cost metric and the turn's budget alike.
        self.prices = prices

    async def run(self, run: TurnRun) -> TurnOutcome:
        outcome = TurnOutcome(text="", stopped="final")
        tools = self.executor.for_turn(run.scope, run.reports, run.policy)
        if run.resume is not None:
            outcome.rounds = run.resume.rounds_used
            if run.resume.pending_calls:
                await self._execute(run, tools, run.resume.pending_calls, outcome.rounds - 1)
        if run.confirmed_calls:
            await self._record_calls(run, "", run.confirmed_calls)
            await self._execute(run, tools, run.confirmed_calls, outcome.rounds)
            outcome.rounds += 1
        if self._asks_to_confirm(run, tools, outcome):
            return outcome
        if run.meter is not None:
            run.meter.check()  # a queued turn whose session or tenant ran out meanwhile
        while outcome.rounds < self.limits.max_rounds:
            # A tool that keeps failing in this turn is no longer offered.
            run.tools = [t for t in run.tools if t.name not in tools.given_up]
            reply = await self._ask(run, outcome.rounds)
            outcome.model = reply.model or outcome.model
            outcome.prompt_tokens += reply.prompt_tokens
            outcome.completion_tokens += reply.completion_tokens
            match self._decide(reply):
                case FinalReply(text=text):
                    outcome.text = text
                    return outcome
                case CallTools(calls=calls, text=text):
                    if run.meter is not None:
                        run.meter.check()  # over a cap: no tools whose results nobody reads
                    await self._record_calls(run, text, calls)
                    await self._execute(run, tools, calls, outcome.rounds)
                    outcome.rounds += 1
                    if self._asks_to_confirm(run, tools, outcome):
                        return outcome
        outcome.text = MAX_ROUNDS_REPLY[turn_language(run)]
        outcome.stopped = "max_rounds"
        return outcome

    async def revise(self, run: TurnRun, outcome: TurnOutcome, finding: str) -> TurnOutcome:
        """Ask the model once more, without tools, for a reply the grounding guard held back
        (`finding`: what no source supports); the new text replaces the old."""
        run.messages.append({"role": "assistant", "content": outcome.text})
        run.messages.append({"role": "system", "content": finding})
        offered, run.tools = run.tools, []
        try:
            reply = await self._ask(run, outcome.rounds)
        finally:
            run.tools = offered
        outcome.text = reply.text
        outcome.rounds += 1
        outcome.prompt_tokens += reply.prompt_tokens
        outcome.completion_tokens += reply.completion_tokens
        return outcome

    @staticmethod
    def _asks_to_confirm(run: TurnRun, tools: TurnTools, outcome: TurnOutcome) -> bool:
        """A call needs the customer's yes: the runtime, not the model, reads the change back
        and ends the turn; the call runs in the next turn if the answer is yes."""
        if tools.readback is None:
            return False
        outcome.text = tools.readback.question(turn_language(run))
        outcome.stopped = "confirm"
        return True

    @staticmethod
    async def _record_calls(run: TurnRun, text: str, calls: list[RequestedToolCall]) -> None:
        await run.transcript.assistant_calls(text, calls)
        run.messages.append(
            {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [c.as_message_part() for c in calls],
            }
        )

    @staticmethod
    def _decide(reply: ModelReply) -> Step:
        if reply.tool_calls:
            return CallTools(reply.tool_calls, reply.text)
        return FinalReply(reply.text)

    async def _ask(self, run: TurnRun, round_no: int) -> ModelReply:
        tools = [t.model_schema() for t in run.tools] or None
        request = ModelRequest(
            messages=run.messages,
            tools=tools,
            phase="tools" if tools else "text",
            temperature=self.limits.temperature_tools if tools else self.limits.temperature_text,
            max_tokens=self.limits.max_tokens,
            # Whose conversation it is: the tenant's masking policy applies to a remote model.
            metadata={
                "tenant_id": run.scope.tenant_id,
                "session_id": run.scope.session_id,
                "turn_id": run.scope.turn_id,
            },
        )

        async def on_text(piece: str) -> None:
            if not run.hold_text:
                run.reports.delta(piece)

        await run.reports.model_started(round_no, self.model_label, run.tools, len(run.messages))
        routes: list[ModelRoute] = []  # which of the configured models answered
        started = time.perf_counter()
        try:
            try:
                reply = await collect(tap_route(self.model.stream(request), routes), on_text)
            except BaseException:
                run.reports.flush()  # the text streamed before the failure is stored first
                raise
            finally:
                seconds = time.perf_counter() - started
            run.reports.defer_text()  # the rest of the text goes with the next write
            await run.reports.settle()
        except UpstreamLLMError as exc:
            metrics.model_called(self.model_label, exc.code, seconds)
            failed_route = exc.route if isinstance(exc, ModelsFailed) else None
            await run.reports.model_failed(exc.code, exc.message, failed_route)
            raise
        route = routes[-1] if routes else None
        answered_by = route.answered_by if route and route.answered_by else self.model_label
        price = await self.prices.of(answered_by)
        cost = price.of(reply.prompt_tokens, reply.completion_tokens)
        metrics.model_called(
            answered_by, "success", seconds, reply.prompt_tokens, reply.completion_tokens, cost
        )
        await run.reports.model_finished(reply, [t.name for t in run.tools], route)
        if run.meter is not None:
            run.meter.add(reply, cost)
        return reply

    async def _execute(
        self, run: TurnRun, tools: TurnTools, calls: list[RequestedToolCall], round_no: int
    ) -> None:
        """Run one response's tool calls and record each result as a `tool` message."""
        specs = {t.name: t for t in run.tools}
        reads = [c.id for c in calls if tools.is_read(c)]
        refused = await run.reports.queue_calls(round_no, calls, specs, reads)
        runnable = [c for c in calls if c not in refused]
        by_id = dict(zip([c.id for c in runnable], await tools.run_calls(runnable), strict=True))
        for call in calls:
            result = by_id.get(call.id) or ToolResult.fail(
                "step_queue_full",
                "too many steps are queued in this session; this call was not run",
                hint="Call fewer tools at once.",
            )
            await run.transcript.tool_result(call, result)
            if call.name == SEARCH_TOOL:
                run.hold_text = True
            run.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "name": call.name,
                    "content": result.model_content(),
                }
            )
