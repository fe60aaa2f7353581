"""Run the tool calls of one model response, safely.

For each call, in this order and before any side effect (see app/tools/policy): the tool must
exist and be offered in this turn, the arguments must parse and validate, per-call rules must
pass. Writes and external actions then check the idempotency store (a stored success is
returned, not redone), the tool's own precheck (a call it would refuse is answered with
that refusal, never put to an operator), the rules over history, and whether the customer
must confirm first; they wait for human approval when the risk, a rule or taint says so,
and only then run, under the tool's breaker, rate limit, concurrency limit and timeout
(app/tools/running.py). Whatever happens, the call ends as one `ToolResult`, masked and cut
to its token budget.

Reads from one model response run concurrently; writes and external actions run one at a
time, after the reads, in the order the model gave.

Every collaborator is required, so each promise above is kept from the first call or the
executor is not built: a call that acts keeps its idempotency key (`calls`), one that needs an
operator waits for one (`approvals`), one that needs the customer's yes asks for it
(`confirmations`), every tool's dependency is there (`deps`), and results are masked with the
configured patterns (`config.redact_patterns`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

from app.errors import DatabaseUnavailable
from app.llm.gateway import RequestedToolCall
from app.observability import metrics
from app.settings import ToolSettings
from app.storage.approvals import Approval
from app.storage.confirmations import Confirmation, ConfirmationStore
from app.storage.fence import LeaseLost
from app.storage.tool_calls import ToolCallStore
from app.tools import rules
from app.tools.approvals import ApprovalBroker
from app.tools.context import ToolContext, TurnScope, idempotency_key
from app.tools.deps import Dependencies
from app.tools.flow import ToolGuards
from app.tools.policy import TurnPolicy, confirm, history, offered, precheck
from app.tools.registry import RegisteredTool, ToolRegistry
from app.tools.reports import ToolReports
from app.tools.results import ToolError, ToolResult
from app.tools.running import run_guarded
from app.tools.shaping import Redactor, truncate
from app.tools.spec import ToolSpec
from app.tools.status import ToolStatus, tool_statuses
from app.tools.validation import InvalidArguments, parse_arguments, validate_arguments

log = logging.getLogger(__name__)


CONFIRMATION_REQUIRED = "confirmation_required"
# Results that say nothing about the tool's health: not counted towards giving up on it.
_NOT_FAILURES = frozenset({"tool_gave_up", CONFIRMATION_REQUIRED, "confirmation_pending"})


class ToolExecutor:
    def __init__(
        self,
        registry: ToolRegistry,
        *,
        deps: Dependencies,
        guards: ToolGuards,
        calls: ToolCallStore,
        approvals: ApprovalBroker,
        confirmations: ConfirmationStore,
        config: ToolSettings,
    ) -> None:
        self.registry = registry
        # What the deployment gives the tools' handlers: every tool's must be there now.
        self.deps = deps
        self.deps.check(tool.spec for tool in registry.all())
        self.guards = guards
        # The turn's masking too (the runtime hands it to the turn): one set of patterns.
        self.redactor = Redactor.with_patterns(config.redact_patterns)
        self.calls = calls  # idempotency: a stored success is returned, not redone
        self.approvals = approvals
        self.confirmations = confirmations
        self.config = config  # result size, failures, confirmations

    def for_turn(
        self, scope: TurnScope, events: ToolReports, policy: TurnPolicy | None = None
    ) -> TurnTools:
        return TurnTools(self, scope, events, policy or TurnPolicy())

    async def statuses(self, tenant_id: str) -> list[ToolStatus]:
        """Every tool with its health as this tenant sees it."""
        return await tool_statuses(self.registry, self.guards, tenant_id)

    async def run_calls(
        self,
        calls: list[RequestedToolCall],
        scope: TurnScope,
        events: ToolReports,
        policy: TurnPolicy | None = None,
    ) -> list[ToolResult]:
        """One batch without per-turn bookkeeping (for callers outside a turn)."""
        return await self.for_turn(scope, events, policy).run_calls(calls)

    # -- shaping --------------------------------------------------------------------------------

    def shape(self, result: ToolResult, spec: ToolSpec | None) -> ToolResult:
        error = result.error
        if error is not None:
            error = ToolError(
                error.code,
                self.redactor.text(error.message),
                None if error.hint is None else self.redactor.text(error.hint),
            )
        data, extra = result.data, {}
        if data is not None:
            shaped = truncate(self.redactor.data(data), self.config.result_max_tokens)
            data = shaped.data
            if shaped.truncated:
                extra = {"truncated": True, "original_tokens": shaped.original_tokens}
        if spec is not None and spec.untrusted_output and result.status != "error":
            extra["untrusted"] = True
        return ToolResult(result.status, data, error, {**result.metadata, **extra})


def declares_untrusted(data: object) -> bool:
    """A tool whose results are trusted or not case by case says so in them: `search_knowledge`
    marks passages of documents no admin marked trusted (`untrusted_content: true`)."""
    return isinstance(data, dict) and data.get("untrusted_content") is True


class TurnTools:
    """The tools as one turn sees them: the turn's policy (offered set, confirmed calls,
    taint), failures per tool (a tool that keeps failing is given up, so the model stops
    retrying it and tells the user), and the confirmation the turn asked for, if any."""

    def __init__(
        self, executor: ToolExecutor, scope: TurnScope, events: ToolReports, policy: TurnPolicy
    ) -> None:
        self.executor = executor
        self.scope = scope
        self.events = events
        self.policy = policy
        self.attempts: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.given_up: set[str] = set()
        self.confirmation: Confirmation | None = None
        self.readback: confirm.Readback | None = None

    async def run_calls(self, calls: list[RequestedToolCall]) -> list[ToolResult]:
        results: dict[int, ToolResult] = {}
        reads = [i for i, c in enumerate(calls) if self.is_read(c)]
        ordered = [i for i in range(len(calls)) if i not in set(reads)]
        if reads:
            outcomes = await asyncio.gather(*(self.run_one(calls[i]) for i in reads))
            results.update(zip(reads, outcomes, strict=True))
        for i in ordered:
            results[i] = await self.run_one(calls[i])
        return [results[i] for i in range(len(calls))]

    def is_read(self, call: RequestedToolCall) -> bool:
        tool = self.executor.registry.get(call.name)
        return tool is not None and tool.spec.risk == "read"

    async def run_one(self, call: RequestedToolCall) -> ToolResult:
        started = time.perf_counter()
        self.attempts[call.name] += 1
        await self.events.started(call)
        tool = self.executor.registry.get(call.name)
        spec = tool.spec if tool is not None else None
        try:
            raw = await self._execute(call, tool)
        except (asyncio.CancelledError, DatabaseUnavailable, LeaseLost):
            raise  # the turn's own storage went away, or another process owns it: not the tool's
        except Exception:  # a bug in Hermes itself must not take the turn down
            log.exception("tool call %s (%s) crashed the executor", call.id, call.name)
            raw = ToolResult.fail("internal_error", f"{call.name} could not be run")
        raw = self._count(call.name, raw)
        if (
            spec is not None
            and raw.status != "error"
            and (spec.untrusted_output or declares_untrusted(raw.data))
        ):
            # What the tool returned is now in the conversation, for this turn and the next.
            self.policy.taint.add(f"output of {spec.name}", lasting=True)
        duration = time.perf_counter() - started
        # The turn (the trace) is the event's and the log record's own: not copied in here.
        result = self.executor.shape(raw, spec).with_metadata(
            duration_ms=round(duration * 1000, 3),
            attempt=self.attempts[call.name],
        )
        metrics.TOOL_CALLS.labels(tool=call.name, status=result.status).inc()
        metrics.TOOL_SECONDS.labels(tool=call.name).observe(duration)
        log.info(
            "tool call",
            extra={
                "tool": call.name,
                "call_id": call.id,
                "status": result.status,
                "error": result.error.code if result.error else None,
                "duration_ms": result.metadata["duration_ms"],
                "trace_id": self.scope.trace_id,
            },
        )
        await self.events.completed(call, result)
        return result

    def _count(self, name: str, result: ToolResult) -> ToolResult:
        if result.status == "success" or (result.error and result.error.code in _NOT_FAILURES):
            return result
        self.failures[name] += 1
        limit = self.executor.config.max_failures_per_turn
        if self.failures[name] < limit:
            return result
        self.given_up.add(name)
        error = result.error or ToolError("tool_failed", f"{name} did not succeed")
        hint = (
            f"{name} has failed {self.failures[name]} times in this turn. Do not call it again. "
            "Tell the user it is not available right now and offer a human agent."
        )
        return ToolResult(
            result.status, result.data, ToolError(error.code, error.message, hint), result.metadata
        )

    # -- the pipeline of one call ---------------------------------------------------------------

    async def _execute(self, call: RequestedToolCall, tool: RegisteredTool | None) -> ToolResult:
        refusal = offered.refusal(call, tool, self.executor.registry, self.policy)
        if refusal is not None:
            return refusal
        assert tool is not None
        spec = tool.spec
        if spec.name in self.given_up:
            return ToolResult.fail(
                "tool_gave_up",
                f"{spec.name} already failed {self.failures[spec.name]} times in this turn",
                hint="Do not call it again. Tell the user it is not available right now.",
            )
        try:
            args = validate_arguments(parse_arguments(call.arguments), spec.parameters)
        except InvalidArguments as exc:
            code = "malformed_arguments" if exc.malformed_json else "invalid_arguments"
            return ToolResult.fail(code, str(exc), hint=exc.hint)

        per_call = rules.violations(spec, args)
        rejected = [v.reason for v in per_call if v.action == "reject"]
        if rejected:
            return _rule_refusal(rejected)

        key = idempotency_key(self.scope, call.id, spec.name, args)
        calls = self.executor.calls if spec.acts else None
        if calls is not None:
            stored = await calls.stored_result(key)
            if stored is not None:
                return ToolResult.from_dict(stored).with_metadata(replayed=True)

        ctx = ToolContext(
            scope=self.scope,
            call_id=call.id,
            tool=spec.name,
            idempotency_key=key,
            deps=self.executor.deps.for_tool(spec),
        )
        refused = await precheck.refusal(spec, ctx, args)
        if refused is not None:
            return refused
        found = await history.findings(spec, ctx, args)
        rejected = [f.reason for f in found if f.action == "reject"]
        if rejected:
            return _rule_refusal(rejected)
        if spec.confirm is not None and call.id not in self.policy.confirmed:
            return await self._ask_to_confirm(call, spec, args, ctx)

        reasons = [v.reason for v in per_call if v.action == "approval"]
        reasons += [f.reason for f in found if f.action == "approval"]
        if spec.acts and self.policy.taint:
            reasons.append(self.policy.taint.reason())
        if spec.risk == "external":
            reasons.insert(0, f"{spec.name} acts outside the company (risk: external)")
        approved: Approval | None = None
        if reasons:
            decided = await self._approve(call, spec, args, "; ".join(reasons))
            if isinstance(decided, ToolResult):
                return decided
            approved = decided

        if calls is not None:
            await calls.begin(
                self.scope.writer,
                key=key,
                tenant_id=self.scope.tenant_id,
                session_id=self.scope.session_id,
                turn_id=self.scope.turn_id,
                call_id=call.id,
                tool=spec.name,
                arguments=args,
            )
        result = await run_guarded(tool, ctx, args, self.executor.guards)
        if approved is not None:
            # The result says a person approved it, so the reply can say so rather than
            # describe the call as still waiting for someone.
            result = result.with_metadata(approval="approved", approval_id=approved.id)
        if calls is not None:
            if result.status == "success":
                shaped = self.executor.shape(result, spec).to_dict()
                await calls.succeed(self.scope.writer, key, shaped)
            else:
                await calls.abandon(self.scope.writer, key)
        return result

    async def _ask_to_confirm(
        self, call: RequestedToolCall, spec: ToolSpec, args: dict[str, Any], ctx: ToolContext[Any]
    ) -> ToolResult:
        """Record what the customer is asked to confirm; the turn then asks them and ends."""
        if self.confirmation is not None:
            return ToolResult.fail(
                "confirmation_pending",
                f"the customer is already being asked to confirm {self.confirmation.tool}",
                hint="One change at a time: do not call another tool that needs confirmation.",
            )
        # The call runs in a later turn, on the customer's yes: the taint it was proposed under
        # (a recalled note lasts only its own turn) goes with it, so its approval is still asked.
        for source in self.policy.taint.sources:
            self.policy.taint.add(source, lasting=True)
        resolved = await confirm.resolved(spec, ctx, args)
        readback = confirm.readback(spec, args, self.executor.redactor, resolved)
        self.confirmation = await self.executor.confirmations.create(
            self.scope.writer,
            tenant_id=self.scope.tenant_id,
            session_id=self.scope.session_id,
            turn_id=self.scope.turn_id,
            call_id=call.id,
            tool=spec.name,
            arguments=args,
            readback=readback.to_dict(),
            timeout_s=self.executor.config.confirmation_timeout_s,
        )
        self.readback = readback
        return ToolResult.fail(
            CONFIRMATION_REQUIRED,
            f"{spec.name} needs the customer's confirmation first: {readback.en}",
            hint="Hermes asks the customer to confirm and ends this turn; nothing was changed yet.",
            confirmation_id=self.confirmation.id,
        )

    async def _approve(
        self, call: RequestedToolCall, spec: ToolSpec, args: dict[str, Any], reason: str
    ) -> ToolResult | Approval:
        """The approval when an operator approved the call, else the result to answer with."""
        broker = self.executor.approvals
        from app.resilience import deadline
        from app.tools.sensitive import summarize

        deadline.extend(broker.timeout_s)  # waiting for a person is not the turn's own time
        redactor = self.executor.redactor
        outcome = await broker.request(
            self.scope,
            call_id=call.id,
            tool=spec.name,
            arguments=redactor.data(args),
            arguments_full=args,  # what will run: operators see it, audited
            sensitive=summarize(args, redactor),
            reason=reason,
            on_created=lambda approval: self.events.approval_requested(call, approval),
        )
        await self.events.approval_resolved(call, outcome.approval)
        if outcome.decision == "approved":
            return outcome.approval
        if outcome.decision == "rejected":
            why = f": {outcome.reason}" if outcome.reason else ""
            return ToolResult.fail(
                "approval_rejected",
                f"an operator declined {spec.name}{why}",
                hint="Do not retry. Tell the user it was declined and why, if a reason was given.",
                approval_id=outcome.approval.id,
            )
        return ToolResult.fail(
            "approval_expired",
            f"nobody approved {spec.name} within {broker.timeout_s:g}s, so it was not done",
            hint="Tell the user the request is waiting for a colleague and was not carried out.",
            approval_id=outcome.approval.id,
        )


def _rule_refusal(reasons: list[str]) -> ToolResult:
    return ToolResult.fail(
        "business_rule",
        "; ".join(reasons),
        hint="This request is not allowed as asked. Explain the rule to the user.",
    )
