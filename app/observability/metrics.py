"""Prometheus metrics. One registry per process; names are prefixed `hermes_`."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

HTTP_REQUESTS = Counter(
    "hermes_http_requests_total",
    "HTTP requests by route template, method and status.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
HTTP_SECONDS = Histogram(
    "hermes_http_request_seconds",
    "Time to the first response byte, by route template.",
    ["route"],
    registry=REGISTRY,
)
TURNS = Counter("hermes_turns_total", "Turns finished, by status.", ["status"], registry=REGISTRY)
TURN_SECONDS = Histogram(
    "hermes_turn_seconds",
    "Wall time of a turn from start to its end event.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
    registry=REGISTRY,
)
LLM_SECONDS = Histogram(
    "hermes_llm_call_seconds",
    "Model calls, from request to the end of the stream.",
    ["outcome"],
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "hermes_tool_calls_total",
    "Tool calls by tool and status.",
    ["tool", "status"],
    registry=REGISTRY,
)
TOOL_SECONDS = Histogram(
    "hermes_tool_call_seconds", "Tool call duration by tool.", ["tool"], registry=REGISTRY
)
SSE_STREAMS = Gauge("hermes_sse_streams", "Open SSE streams.", registry=REGISTRY)
ACTIVE_SESSIONS = Gauge(
    "hermes_sessions_with_worker", "Sessions with a running or queued turn.", registry=REGISTRY
)
DB_COMMITS = Counter("hermes_db_commits_total", "Write batches committed.", registry=REGISTRY)
STEPS = Counter(
    "hermes_steps_total",
    "Steps finished, by action type and status.",
    ["action_type", "status"],
    registry=REGISTRY,
)
STUCK_STEPS = Counter(
    "hermes_steps_stuck_total", "Steps the watchdog found running too long.", registry=REGISTRY
)
