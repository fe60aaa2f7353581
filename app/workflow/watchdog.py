"""The watchdog: no step runs forever, no question waits forever.

A step running longer than the limit is marked `stuck`, counted, and its turn is ended cleanly
(`turn.failed` with code `step_stuck`); the session stays usable. An `ask_user` step whose
deadline passes is `timed_out` and its fallback action runs: a short follow-up message, unless
the customer has written since (`TurnStore.add_followup` checks, in the follow-up's own
transaction). The follow-up is a write of the session: it names the session's
`SessionWriter`, so it goes on the session's write lane, behind what the session's turns queued
before it (under no lease: the watchdog owns no session).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from app.observability import metrics
from app.storage.session_writer import SessionWriter
from app.storage.steps import Step, StepStore
from app.storage.turns import TurnStore
from app.text.language import latest_language
from app.text.tokens import estimate_tokens
from app.workflow.ports import TurnControl

log = logging.getLogger(__name__)

ASK_USER_FALLBACK = {
    "en": (
        "I haven't heard back, so I've kept your request open. Reply any time to continue, "
        "or ask for a human agent."
    ),
    "zh": "暂时没有收到您的回复，您的请求我已保留。您随时回复即可继续，也可以要求转接人工客服。",
}


class Watchdog:
    def __init__(
        self,
        *,
        steps: StepStore,
        turns: TurnStore,
        manager: TurnControl,
        stuck_after_s: float,
        interval_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.steps = steps
        self.turns = turns
        self.manager = manager
        self.stuck_after_s = stuck_after_s
        self.interval_s = interval_s
        self.clock = clock

    async def check(self) -> tuple[list[Step], list[Step]]:
        now = self.clock()
        # Only this process's turns: a step running in another process is that one's to judge
        # (and only there can its turn be ended).
        stuck = await self.steps.mark_stuck(
            now - self.stuck_after_s, turn_ids=self.manager.running_turns()
        )
        for step in stuck:
            metrics.STUCK_STEPS.inc()
            log.warning("step %s (%s) is stuck; ending turn %s", step.id, step.name, step.turn_id)
            await self.manager.abort(
                step.turn_id,
                "step_stuck",
                f"{step.action_type} {step.name} ran longer than {self.stuck_after_s:g}s",
            )
        expired = await self.steps.expire_waits(now)
        for step in expired:
            await self._ask_user_fallback(step)
        return stuck, expired

    async def _ask_user_fallback(self, step: Step) -> None:
        turn = await self.turns.get(step.session_id, step.turn_id)
        if turn is None:
            return
        question = str(step.input_context.get("question", ""))
        text = ASK_USER_FALLBACK[latest_language([question])]
        written = await self.turns.add_followup(
            SessionWriter(step.session_id),  # the session's lane, under no lease
            turn,
            text,
            estimate_tokens(text),
            {"kind": "ask_user_timeout", "step_id": step.id},
        )
        if written is None:
            log.info("no follow-up to step %s: the customer wrote again", step.id)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.check()
            except Exception:
                log.exception("watchdog check failed")
