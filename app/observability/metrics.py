"""Prometheus metrics. One registry per process; names are prefixed `hermes_`."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from app.storage.port import Database, DbCounts

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
STEPS = Counter(
    "hermes_steps_total",
    "Steps finished, by action type and status.",
    ["action_type", "status"],
    registry=REGISTRY,
)
STUCK_STEPS = Counter(
    "hermes_steps_stuck_total", "Steps the watchdog found running too long.", registry=REGISTRY
)


class _DatabaseWork(Collector):
    """What the databases did (`Database.counts`), read at scrape time so counting costs
    the writer thread nothing: write batches committed (`hermes_db_commits_total`), write
    jobs, statements by kind, session events and their bytes."""

    def __init__(self) -> None:
        self._open: list[Database] = []
        self._closed = DbCounts()

    def watch(self, db: Database) -> Callable[[], None]:
        """Export `db`'s counts; the returned callable stops (the totals stay counted)."""
        self._open.append(db)

        def stop() -> None:
            if db in self._open:
                self._open.remove(db)
                self._closed = self._closed + db.counts()

        return stop

    def collect(self) -> Iterator[Metric]:
        total = self._closed
        for db in self._open:
            total = total + db.counts()
        yield CounterMetricFamily(
            "hermes_db_commits", "Write batches committed.", value=total.commits
        )
        yield CounterMetricFamily(
            "hermes_db_jobs", "Write jobs run (a batch's share one transaction).", value=total.jobs
        )
        yield CounterMetricFamily(
            "hermes_db_writer_busy_seconds",
            "Time the writer thread spent running write batches: a rate near 1 means writes"
            " queue behind it (the writer is saturated).",
            value=total.busy_s,
        )
        statements = CounterMetricFamily(
            "hermes_db_statements",
            "SQL statements: run by write jobs, transaction control around them, reads.",
            labels=["kind"],
        )
        statements.add_metric(["write"], total.writes)
        statements.add_metric(["control"], total.control)
        statements.add_metric(["read"], total.reads)
        yield statements
        yield CounterMetricFamily("hermes_events", "Session events stored.", value=total.events)
        yield CounterMetricFamily(
            "hermes_event_bytes", "Bytes of stored session event payloads.", value=total.event_bytes
        )


_DATABASE_WORK = _DatabaseWork()
REGISTRY.register(_DATABASE_WORK)
watch_database = _DATABASE_WORK.watch
