"""Guard 1: the model may only call a tool that exists and is offered in this turn.

The turn's offered set is narrowed by a confident intent (app/conversation/understanding.py).
Before this guard, narrowing only shaped the prompt: a model (or text it read) could still
call any tool by name. Now a call outside the set is refused before anything runs, and the
model is told what it may use and how to go on.
"""

from __future__ import annotations

from app.llm.gateway import RequestedToolCall
from app.tools.policy.turn import TurnPolicy
from app.tools.registry import RegisteredTool, ToolRegistry
from app.tools.results import ToolResult


def refusal(
    call: RequestedToolCall,
    tool: RegisteredTool | None,
    registry: ToolRegistry,
    policy: TurnPolicy,
) -> ToolResult | None:
    """None when the call may go on; otherwise the result the model gets instead."""
    if tool is not None and tool.offered and policy.allows(call.name, call.id):
        return None
    allowed = [t.spec.name for t in registry.all() if t.offered and policy.allows(t.spec.name, "")]
    if tool is None or not tool.offered:
        return ToolResult.fail(
            "unknown_tool",
            f"there is no tool named {call.name!r}",
            hint=f"Use one of: {', '.join(allowed)}" if allowed else "No tools are available.",
        )
    usable = ", ".join(allowed) if allowed else "none"
    return ToolResult.fail(
        "tool_not_offered",
        f"{call.name} is not available for what the customer asked in this turn",
        hint=(
            f"Tools you may use now: {usable}. Do not call {call.name}. If the customer wants "
            "something else, ask them to say what they need in their own words."
        ),
    )
