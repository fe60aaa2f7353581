"""JSON log lines: the message, our extra fields and the request id; nothing else."""

from __future__ import annotations

import json
import logging

from app.observability.logs import JsonFormatter, request_id_var


def test_json_line_with_extras_and_request_id() -> None:
    record = logging.makeLogRecord(
        {
            "name": "hermes.test",
            "levelname": "INFO",
            "msg": "tool call %s",
            "args": ("ok",),
            "tool": "query_order_status",
            "duration_ms": 1.5,
            "color_message": "\x1b[36mnoise",
            "litellm_redacted": object(),
        }
    )
    token = request_id_var.set("req-1")
    try:
        line = JsonFormatter().format(record)
    finally:
        request_id_var.reset(token)
    entry = json.loads(line)
    assert entry["msg"] == "tool call ok" and entry["level"] == "info"
    assert entry["tool"] == "query_order_status" and entry["duration_ms"] == 1.5
    assert entry["request_id"] == "req-1"
    assert "color_message" not in entry and "litellm_redacted" not in entry
