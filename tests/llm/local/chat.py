"""Conversation builders shared by the offline-model tests."""

from __future__ import annotations

import json
from typing import Any

ALL_TOOLS = frozenset(
    {
        "query_order_status",
        "track_shipment",
        "create_ticket",
        "request_refund",
        "request_return",
        "reset_password",
        "update_contact_info",
        "send_email",
    }
)

SHIPPED_ORDER = {
    "order_id": "202405201234",
    "status": "shipped",
    "status_text": "已发货",
    "items": [{"product": "蓝牙耳机", "quantity": 1, "price": 299.0}],
    "total_amount": 299.0,
    "currency": "CNY",
    "created_at": "2024-05-20T10:00:00+08:00",
    "updated_at": "2024-05-21T09:00:00+08:00",
    "tracking_number": "SF123456789CN",
    "carrier": "SF Express",
}

PAID_ORDER = {**SHIPPED_ORDER, "status": "paid", "tracking_number": None, "carrier": None}

SHIPMENT = {
    "tracking_number": "SF123456789CN",
    "carrier": "SF Express",
    "status": "in_transit",
    "estimated_delivery": "2024-05-23",
    "events": [
        {"time": "2024-05-21T08:00:00+08:00", "location": "深圳", "description": "已揽收"},
        {"time": "2024-05-22T06:30:00+08:00", "location": "上海", "description": "到达转运中心"},
    ],
}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def tool_result(call_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": json.dumps(body, ensure_ascii=False),
    }


def success(data: Any) -> dict[str, Any]:
    return {"status": "success", "data": data}


def failure(code: str, message: str = "failed") -> dict[str, Any]:
    return {"status": "error", "error": {"code": code, "message": message}}
