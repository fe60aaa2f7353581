"""Turn a tool result into a reply: pick the intent's template for the outcome, fill it from
the result's data (and the call's arguments), drop what the data does not have."""

from __future__ import annotations

import string
from typing import Any

from app.llm.local import templates as t
from app.llm.local.conversation import Exchange, Outcome
from app.llm.local.formats import money, when
from app.llm.local.templates import Lang

_FORMATTER = string.Formatter()
_MONEY = {"amount", "total_amount"}
_DATES = {"estimated_delivery", "created_at", "updated_at", "delivered_at", "shipped_at"}
_INVALID = {"invalid_arguments", "malformed_arguments", "invalid_value", "invalid_amount"}
# The tool could not answer now (flow control, timeouts, crashes): "try again later" fits.
# Any other error code is a refusal by a business rule, where it would not.
_UNAVAILABLE = {
    "timeout",
    "tool_failed",
    "tool_gave_up",
    "internal_error",
    "invalid_output",
    "unknown_tool",
    "not_executed",
    "circuit_open",
    "rate_limited",
    "mcp_tool_error",
}


def render(segments: list[str], values: dict[str, str], lang: Lang) -> str:
    """Join the segments whose every placeholder has a value."""
    kept = []
    for segment in segments:
        names = [name for _, name, _, _ in _FORMATTER.parse(segment) if name]
        if all(values.get(name) for name in names):
            kept.append(segment.format(**values))
    return ("" if lang == "zh" else " ").join(kept)


def outcome_kind(outcome: Outcome) -> str:
    if outcome.status in ("success", "fallback"):
        return outcome.status
    code = outcome.error_code
    if code.endswith("not_found"):
        return "not_found"
    if code in _INVALID:
        return "invalid"
    if not code or code in _UNAVAILABLE or code.endswith("_unavailable"):
        return "error"
    return "refused"


def result_reply(intent: str, exchange: Exchange, lang: Lang) -> str:
    outcome = exchange.outcome or Outcome("unreadable")
    kind = outcome_kind(outcome)
    args = {k: _plain(k, v) for k, v in (exchange.arguments or {}).items()}
    values = {k: v for k, v in args.items() if v}
    field = t.CONTACT_FIELD.get(args.get("field", ""))
    if field:
        values["field_name"] = field[lang]
    if kind == "success" and isinstance(outcome.data, dict):
        values.update(_success_values(intent, outcome.data, lang, outcome.approved))
    elif kind == "invalid":
        slot = next((k for k in args if k in t.SLOT_NAME), None)
        name = field or (t.SLOT_NAME[slot] if slot else t.SLOT_NAME["value"])
        values["slot_name"] = name[lang]
    segments = (
        t.INTENT_ERROR_CODE.get(intent, {}).get(outcome.error_code)
        or t.ERROR_CODE.get(outcome.error_code)
        or t.RESULT.get(intent, {}).get(kind)
        or t.RESULT_DEFAULT[kind]
    )
    text = render(segments[lang], values, lang)
    return text or render(
        t.RESULT_DEFAULT["success" if kind == "success" else "refused"][lang], {}, lang
    )


def filed_refund_reply(exchange: Exchange, lang: Lang) -> str:
    """A refund filed in an earlier turn, asked about again: what the tool answered then."""
    outcome = exchange.outcome
    data = outcome.data if outcome is not None and isinstance(outcome.data, dict) else {}
    values = _success_values("refund_request", data, lang, bool(outcome and outcome.approved))
    return render(t.REFUND_FILED[lang], values, lang)


def _success_values(
    intent: str, data: dict[str, Any], lang: Lang, approved: bool = False
) -> dict[str, str]:
    values = {k: _plain(k, v) for k, v in data.items()}
    currency = str(data.get("currency") or "")
    for key in _MONEY:  # "948.00元" / "CNY 948.00": the currency goes with the number
        value = data.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            values[key] = money(value, currency, lang)
    for key in _DATES:
        if values.get(key):
            values[key] = when(values[key], lang)
    status = str(data.get("status") or "")
    if intent == "order_status":
        known = t.ORDER_STATUS.get(status)
        values["status_name"] = known[lang] if known else _plain("", data.get("status_text"))
        values["items"] = _items(data.get("items"), lang)
    elif intent == "track_shipment":
        known = t.SHIPMENT_STATUS.get(status)
        values["status_name"] = known[lang] if known else status
        values["event"] = _latest_event(data.get("events"), lang)
    elif intent == "refund_request":
        known = (t.REFUND_APPROVED_STATUS if approved else t.REFUND_STATUS).get(status)
        values["status_name"] = known[lang] if known else status
    elif intent == "update_contact":
        field = t.CONTACT_FIELD.get(str(data.get("field") or ""))
        values["field_name"] = field[lang] if field else ""
    return {k: v for k, v in values.items() if v}


def _plain(key: str, value: Any) -> str:
    """A scalar as text; structured values are rendered by their own helpers."""
    if value is None or isinstance(value, dict | list | bool):
        return ""
    if key in _MONEY and isinstance(value, int | float):
        return f"{value:.2f}"
    return str(value).strip()


def _items(items: Any, lang: Lang) -> str:
    if not isinstance(items, list):
        return ""
    parts = []
    for item in items:
        if not isinstance(item, dict) or not item.get("product"):
            continue
        quantity = item.get("quantity")
        suffix = f" ×{quantity}" if quantity not in (None, "") else ""
        parts.append(f"{item['product']}{suffix}")
    return ("、" if lang == "zh" else ", ").join(parts)


def _latest_event(events: Any, lang: Lang) -> str:
    if not isinstance(events, list):
        return ""
    dated = [e for e in events if isinstance(e, dict)]
    if not dated:
        return ""
    latest = max(dated, key=lambda e: str(e.get("time") or ""))
    time = _plain("", latest.get("time"))
    parts = [when(time, lang) if time else ""]
    parts += [_plain("", latest.get(k)) for k in ("location", "description")]
    return " ".join(p for p in parts if p)
