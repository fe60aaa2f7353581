"""A rule-based stand-in for a call-centre model, for `FakeLLMServer(responder=RuleModel())`.

Each answer depends only on the request it answers: the turn's messages and the tools the
runtime offered. So one fake server can serve hundreds of sessions at once (the load bench),
where a shared script queue would hand one session's answer to another. The rules are those
of a careful agent: it calls a tool only when that tool is offered and the customer's message
carries what the tool needs (an order number, a tracking number, a phone number, a complaint),
and after a tool result it answers in text from that result. It never proposes a tool the
runtime did not offer, so the trust checks see well-behaved traffic, not attacks.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from app.llm.testing import RecordedRequest, Reply, Step, ToolCall, ToolCalls

# Not the 12 digits inside a tracking number such as JD001234567890.
ORDER_ID = re.compile(r"(?<![A-Za-z0-9])\d{12}(?![A-Za-z0-9])")
TRACKING_NUMBER = re.compile(r"(?<![A-Z0-9])[A-Z]{2}\d{9,12}[A-Z]{0,2}(?![A-Z0-9])")
# A number, or the token that stands for one under HERMES_MODEL_MASKING=pseudonymise (passed
# on as it is: the runtime puts the number back before the tool runs).
PHONE = re.compile(r"(?<![\d+])(?:1\d{10}|\+\d{8,15})(?!\d)|«PHONE_[A-Z2-9]{4,10}»")
COMPLAINT = re.compile(r"complain|投诉", re.IGNORECASE)
PASSWORD = re.compile(r"password|log ?in|密码|登录", re.IGNORECASE)

ASK_PHONE = "I can help with that. Please tell me the mobile number registered with your account."
ASK_WHAT = "How can I help you today?"


@dataclass(frozen=True)
class RuleModel:
    """`delay`: seconds before every answer starts, as a real model takes to answer."""

    delay: float = 0.0

    def __call__(self, request: RecordedRequest) -> Step:
        messages = request.messages
        user_at = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        results = [m for m in messages[user_at + 1 :] if m.get("role") == "tool"]
        if results:
            return Reply(summarise(results[-1].get("content")), delay=self.delay)
        text = _text(messages[user_at].get("content")) if user_at >= 0 else ""
        call = choose_tool(text, set(request.tool_names))
        if call is not None:
            return ToolCalls(call, delay=self.delay)
        if PASSWORD.search(text) and "reset_password" in request.tool_names:
            return Reply(ASK_PHONE, delay=self.delay)
        return Reply(ASK_WHAT, delay=self.delay)


def choose_tool(text: str, offered: set[str]) -> ToolCall | None:
    """The one tool call the message asks for, among the offered tools, or None."""
    order = ORDER_ID.search(text)
    tracking = TRACKING_NUMBER.search(text)
    phone = PHONE.search(text)
    if COMPLAINT.search(text) and "create_ticket" in offered:
        args: dict[str, Any] = {"category": "complaint", "summary": text.strip()[:500]}
        if order:
            args["order_id"] = order.group()
        return ToolCall("create_ticket", args)
    if order and "query_order_status" in offered:
        return ToolCall("query_order_status", {"order_id": order.group()})
    if tracking and "track_shipment" in offered:
        return ToolCall("track_shipment", {"tracking_number": tracking.group()})
    if phone and "reset_password" in offered:
        return ToolCall("reset_password", {"phone": phone.group()})
    return None


def summarise(content: Any) -> str:
    """A one-line answer from a tool result as the runtime shows it to the model."""
    try:
        result = json.loads(content) if isinstance(content, str) else content
    except json.JSONDecodeError:
        return "Here is what I found."
    if not isinstance(result, dict):
        return "Here is what I found."
    if result.get("status") != "success":  # an error, or a tool's fallback answer
        code = (result.get("error") or {}).get("code", "an error")
        return f"Sorry, I could not do that just now ({code})."
    data = result.get("data") or {}
    if "ticket_id" in data:
        return f"I have opened ticket {data['ticket_id']}; a colleague will follow up."
    if "masked_phone" in data:
        return f"A reset link is on its way to {data['masked_phone']}."
    if "order_id" in data and "status" in data:
        return f"Your order {data['order_id']} is {data['status']}."
    if "tracking_number" in data and "status" in data:
        return f"Parcel {data['tracking_number']} is {data['status']}."
    return "Done."


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
