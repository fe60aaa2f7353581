"""Prometheus metrics. One registry per process; names are prefixed `hermes_`.

Label values come from bounded sets only: route templates, statuses, error codes, the
configured models and tools, and tenants up to `configure(max_tenants=...)` (the rest share
the label `other`), so a scrape cannot grow without end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.storage.port import Database, DbCounts
from app.storage.purge import PurgeReport
from app.storage.retention import TABLES as RETENTION_TABLES

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
# Requests the connection answered itself, before any route: too large a head, too slow a head
# or body, not HTTP at all (app.api.http_protocol). A rise is a client or an attack to look at.
HTTP_REFUSAL_CODES = ("headers_too_large", "uri_too_long", "request_timeout", "bad_request")
HTTP_REFUSED = Counter(
    "hermes_http_refused_total",
    "Requests refused by the connection before any route, by error code.",
    ["code"],
    registry=REGISTRY,
)
for _code in HTTP_REFUSAL_CODES:  # every code shows, at 0, before its first refusal
    HTTP_REFUSED.labels(code=_code)
TURNS = Counter("hermes_turns_total", "Turns finished, by status.", ["status"], registry=REGISTRY)
TURN_SECONDS = Histogram(
    "hermes_turn_seconds",
    "Wall time of a turn from start to its end event.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
    registry=REGISTRY,
)
TENANT_TURNS = Counter(
    "hermes_tenant_turns_total",
    "Turns finished, by tenant (the first HERMES_METRICS_MAX_TENANTS seen; later ones are"
    " `other`) and status.",
    ["tenant", "status"],
    registry=REGISTRY,
)
FIRST_DELTA_SECONDS = Histogram(
    "hermes_turn_first_delta_seconds",
    "Time from accepting the customer's message to the first streamed text of the reply.",
    buckets=(0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30),
    registry=REGISTRY,
)
LLM_SECONDS = Histogram(
    "hermes_llm_call_seconds",
    "Model calls, from request to the end of the stream, by the configured model that"
    " answered (the primary when none did) and outcome (`success` or the failure code).",
    ["model", "outcome"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120),
    registry=REGISTRY,
)
LLM_TOKENS = Counter(
    "hermes_llm_tokens_total",
    "Tokens of answered model calls, by model and kind (prompt, completion).",
    ["model", "kind"],
    registry=REGISTRY,
)
LLM_COST = Counter(
    "hermes_llm_cost_usd_total",
    "What answered model calls cost in US dollars, by model: at HERMES_MODEL_PRICES, else"
    " LiteLLM's bundled price map (0 for a model in neither, such as hermes/local); the prices"
    " the cost budgets use.",
    ["model"],
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
BUDGET_KINDS = (
    "turn_tokens",
    "turn_cost",
    "session_tokens",
    "session_cost",
    "tenant_tokens",
    "tenant_cost",
    "turn_rate",
    "streams",
)
BUDGET_REFUSALS = Counter(
    "hermes_budget_refusals_total",
    "Turns refused or ended by a budget or limit, by kind (" + ", ".join(BUDGET_KINDS) + ").",
    ["kind"],
    registry=REGISTRY,
)
for _kind in BUDGET_KINDS:  # every kind shows, at 0, before its first refusal
    BUDGET_REFUSALS.labels(kind=_kind)
HANDOFF_QUEUE = Gauge(
    "hermes_handoff_queue_length",
    "Sessions waiting for a human agent (every tenant; read from the database on each sweep"
    " and change).",
    registry=REGISTRY,
)
HANDOFF_WAIT_SECONDS = Histogram(
    "hermes_handoff_wait_seconds",
    "How long a handoff waited: until an agent claimed it, or until it expired to the fallback.",
    ["outcome"],
    buckets=(5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600),
    registry=REGISTRY,
)
for _outcome in ("claimed", "expired"):  # both series exist from the start: a scrape sees 0
    HANDOFF_WAIT_SECONDS.labels(outcome=_outcome)
# A knowledge reply stated a figure no source states (app/knowledge/grounding.py): the model
# was asked once more with the finding (`retried`), or the customer got the passage's own words
# and the offer of a human (`fallback`). A rise is a model inventing policy.
GROUNDING_OUTCOMES = ("retried", "fallback")
GROUNDING_BLOCKED = Counter(
    "hermes_grounding_blocked_total",
    "Knowledge replies held back by the grounding check, by outcome: retried (the model asked"
    " again with the finding) or fallback (the passage's words and the offer of a human).",
    ["outcome"],
    registry=REGISTRY,
)
for _outcome in GROUNDING_OUTCOMES:  # both series exist from the start: a scrape sees 0
    GROUNDING_BLOCKED.labels(outcome=_outcome)
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


class _Labels:
    """What this process's metrics were configured with (by the runtime, from settings)."""

    def __init__(self) -> None:
        self.max_tenants = 50
        self._tenants: set[str] = set()
        self._lock = threading.Lock()

    def tenant(self, tenant_id: str) -> str:
        with self._lock:
            if tenant_id in self._tenants:
                return tenant_id
            if len(self._tenants) < self.max_tenants:
                self._tenants.add(tenant_id)
                return tenant_id
        return "other"


_LABELS = _Labels()


def configure(*, max_tenants: int) -> None:
    """Set by the runtime at start-up; the tenants seen so far are forgotten."""
    with _LABELS._lock:
        _LABELS.max_tenants = max_tenants
        _LABELS._tenants.clear()


def turn_finished(tenant_id: str, status: str, seconds: float) -> None:
    TURNS.labels(status=status).inc()
    TURN_SECONDS.observe(seconds)
    TENANT_TURNS.labels(tenant=_LABELS.tenant(tenant_id), status=status).inc()


def model_called(
    model: str,
    outcome: str,
    seconds: float,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    cost: float = 0.0,
) -> None:
    """One model call; tokens and cost (as `app.llm.prices` priced it) only for one that
    answered."""
    LLM_SECONDS.labels(model=model, outcome=outcome).observe(seconds)
    if outcome != "success":
        return
    LLM_TOKENS.labels(model=model, kind="prompt").inc(prompt_tokens)
    LLM_TOKENS.labels(model=model, kind="completion").inc(completion_tokens)
    LLM_COST.labels(model=model).inc(cost)


RETENTION_ROWS = Counter(
    "hermes_retention_purged_rows_total",
    "Rows the retention purge deleted, by table.",
    ["table"],
    registry=REGISTRY,
)
for _table in RETENTION_TABLES:
    RETENTION_ROWS.labels(table=_table)
RETENTION_LAST_RUN = Gauge(
    "hermes_retention_last_run_timestamp_seconds",
    "When the last retention purge started (Unix time; 0: none yet in this process).",
    registry=REGISTRY,
)
RETENTION_RUN_SECONDS = Gauge(
    "hermes_retention_last_run_seconds",
    "How long the last retention purge took, reclaiming and checkpointing included.",
    registry=REGISTRY,
)
DB_WAL_BYTES = Gauge(
    "hermes_db_wal_bytes",
    "Size of SQLite's write-ahead log after the last checkpoint (0 on PostgreSQL).",
    registry=REGISTRY,
)


def observe_purge(report: PurgeReport) -> None:
    for table, rows in report.by_table().items():
        RETENTION_ROWS.labels(table=table).inc(rows)
    RETENTION_LAST_RUN.set(report.started_at)
    RETENTION_RUN_SECONDS.set(report.duration_s)
    DB_WAL_BYTES.set(report.wal_bytes)


def observe_wal(size: int) -> None:
    DB_WAL_BYTES.set(size)


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
            "Time the writer threads spent running write batches, summed: a rate near"
            " hermes_db_writer_connections means writes queue behind them (saturated).",
            value=total.busy_s,
        )
        yield GaugeMetricFamily(
            "hermes_db_writer_connections",
            "Database writer connections, a thread each.",
            value=sum(db.lanes for db in self._open),
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


@dataclass(frozen=True)
class FanoutCounts:
    """What a process's event fan-out through Redis did (`app.conversation.fanout`)."""

    published: int = 0  # messages published (one per session per batch of committed events)
    received: int = 0  # messages of other processes handed to followers here
    polling: bool = False  # the subscription is down: followers here poll the database
    polling_s: float = 0.0  # seconds spent polling, all outages together

    def __add__(self, other: FanoutCounts) -> FanoutCounts:
        return FanoutCounts(
            self.published + other.published,
            self.received + other.received,
            self.polling or other.polling,
            self.polling_s + other.polling_s,
        )


class _Fanouts(Collector):
    """The fan-out's counts, read at scrape time like the database's (one fan-out per runtime;
    several only where tests run several runtimes in one process)."""

    def __init__(self) -> None:
        self._open: list[Callable[[], FanoutCounts]] = []
        self._closed = FanoutCounts()

    def watch(self, counts: Callable[[], FanoutCounts]) -> Callable[[], None]:
        """Export `counts()`; the returned callable stops (the totals stay counted)."""
        self._open.append(counts)

        def stop() -> None:
            if counts in self._open:
                self._open.remove(counts)
                self._closed = self._closed + replace(counts(), polling=False)

        return stop

    def collect(self) -> Iterator[Metric]:
        if not self._open and self._closed == FanoutCounts():
            return  # no Redis configured: no fan-out series at all
        live = [counts() for counts in self._open]
        total = sum(live, self._closed)
        yield CounterMetricFamily(
            "hermes_fanout_published",
            "Event messages published to Redis for other processes.",
            value=total.published,
        )
        yield CounterMetricFamily(
            "hermes_fanout_received",
            "Event messages of other processes received from Redis for followers here.",
            value=total.received,
        )
        yield GaugeMetricFamily(
            "hermes_fanout_polling",
            "1 while Redis is away and followers here poll the database for other processes'"
            " events (live fan-out resumes when it is back).",
            value=sum(c.polling for c in live),
        )
        yield CounterMetricFamily(
            "hermes_fanout_polling_seconds",
            "Seconds spent polling the database instead of receiving events from Redis.",
            value=total.polling_s,
        )


_FANOUTS = _Fanouts()
REGISTRY.register(_FANOUTS)
watch_fanout = _FANOUTS.watch
