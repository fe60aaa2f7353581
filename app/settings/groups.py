"""The settings, one model per concern. Each field is read from `HERMES_<NAME>` (and from the
YAML file's key `<name>`), where NAME is its alias when it has one, else its own name: the
variables kept their names when the settings were grouped. Every default lives here, once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import NoDecode

from app.settings.checks import (
    MASKING_KINDS,
    MASKING_MODES,
    PUBLIC_PATH_NAMES,
    blank_is_none,
    loopback,
    only,
    price,
    regular_expressions,
    split_commas,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]

CommaList = Annotated[list[str], NoDecode]

DEFAULT_SYSTEM_PROMPT = (
    "You are Hermes, a customer-service assistant for a call centre. Be brief, polite and "
    "accurate. Use the tools you are given to look things up or act; never invent order, "
    "shipment or account data. If a tool fails, say so plainly. Answer in the user's language."
)


class Group(BaseModel):
    """One concern's settings. Built by name in code and tests (`TurnSettings(max_queued=3)`),
    by variable name (the alias) from the environment and the YAML file."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, validate_by_name=True
    )


def shown(text: str) -> dict[str, Any]:
    """The README's default column for a default a value cannot show by itself."""
    return {"shown": text}


class StorageSettings(Group):
    """The database: one SQLite file, or PostgreSQL shared by several processes."""

    db_path: Path = Field(
        default=Path("var/hermes.db"), description="SQLite file (`hermes serve --db` sets it)"
    )
    synchronous: Literal["NORMAL", "FULL"] = Field(
        default="NORMAL",
        validation_alias="db_synchronous",
        description="`FULL` to survive power loss, not just process crashes",
    )
    busy_timeout_ms: int = Field(
        default=5000, ge=0, validation_alias="db_busy_timeout_ms", description="SQLite busy timeout"
    )
    read_connections: int = Field(
        default=2,
        ge=1,
        le=32,
        validation_alias="db_read_connections",
        description="SQLite read-only connections",
    )
    migrations_dir: Path = Field(
        default=PROJECT_ROOT / "migrations",
        description="numbered SQL migrations applied at start-up (PostgreSQL's in `postgres/`"
        " under it)",
    )
    database_url: SecretStr | None = Field(
        default=None,
        description="`postgresql://user:password@host:5432/db`: PostgreSQL instead of the SQLite"
        " file, so several processes and machines share one store (see"
        " [docs/operations.md](docs/operations.md)); unreachable or refused at start → one line"
        " naming this variable; needed for `hermes serve --workers N`",
        json_schema_extra=shown("unset"),
    )
    pool_size: int = Field(
        default=4,
        ge=1,
        le=64,
        validation_alias="db_pool_size",
        description="PostgreSQL read connections per process",
    )
    write_connections: int = Field(
        default=4,
        ge=1,
        le=32,
        validation_alias="db_write_connections",
        description="PostgreSQL writer connections per process, a thread each; a session's"
        " writes always take the same one, so they keep their order (SQLite writes on one)",
    )
    connect_timeout_s: float = Field(
        default=5.0,
        gt=0,
        le=60,
        validation_alias="db_connect_timeout_s",
        description="seconds to wait for a PostgreSQL connection",
    )
    wal_autocheckpoint_pages: int = Field(
        default=1000,
        ge=100,
        le=1_000_000,
        validation_alias="db_wal_autocheckpoint_pages",
        description="SQLite's WAL: a passive checkpoint after a commit leaves more pages than"
        " this in it",
    )
    wal_max_mb: int = Field(
        default=64,
        ge=1,
        le=65536,
        validation_alias="db_wal_max_mb",
        description="a WAL over this size is truncated at the next checkpoint (and cut back to it"
        " when it restarts)",
    )
    checkpoint_interval_s: float = Field(
        default=60.0,
        gt=0,
        validation_alias="db_checkpoint_interval_s",
        description="how often a WAL checkpoint runs besides after each purge"
        " ([retention](docs/operations.md#retention))",
    )
    auto_vacuum_convert_max_mb: int = Field(
        default=256,
        ge=0,
        validation_alias="db_auto_vacuum_convert_max_mb",
        description="an existing SQLite file not yet in `auto_vacuum=INCREMENTAL` is converted at"
        " start-up (one `VACUUM`) only up to this size; larger: a warning with the command to"
        " run while stopped",
    )

    @field_validator("database_url")
    @classmethod
    def _database_url_shape(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        if not value.get_secret_value().startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql://user@host:port/database URL")
        return value

    @property
    def postgres_url(self) -> str | None:
        """The PostgreSQL URL when PostgreSQL is the store, else None (SQLite)."""
        return None if self.database_url is None else self.database_url.get_secret_value()


class RedisSettings(Group):
    """The Redis every Hermes process shares: live events, rate limits and breakers."""

    url: SecretStr | None = Field(
        default=None,
        validation_alias="redis_url",
        description="`redis://` or `rediss://` URL of a Redis every Hermes process shares: session"
        " events fan out through it (a browser following a session on one process gets the live"
        " events of a turn running on another; the database stays the log replay reads), tool"
        " rate limits and the per-tool and per-model breakers live there. Unreachable at"
        " start-up: start-up stops; lost while running: each process uses its own state (one"
        " warning) until it answers again",
    )
    prefix: str = Field(
        default="hermes",
        min_length=1,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        validation_alias="redis_prefix",
        description="every Redis key Hermes writes starts with it (several deployments can share"
        " one Redis); letters, digits and `_.:-`",
    )

    @field_validator("url")
    @classmethod
    def _redis_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        url = value.get_secret_value().strip()
        if not url.startswith(("redis://", "rediss://")):
            raise ValueError("must start with redis:// or rediss://")
        return SecretStr(url)

    @property
    def shared_url(self) -> str | None:
        """The Redis URL when processes share state through Redis, else None."""
        return None if self.url is None else self.url.get_secret_value()


class RetentionSettings(Group):
    """How long rows are kept, in days; 0 keeps them for ever. A finished session's rows count
    from its archiving, audit rows from their own time. Memories keep their own rules (decay,
    forgetting: docs/memory.md)."""

    events_days: float = Field(
        default=30.0,
        ge=0,
        validation_alias="retention_events_days",
        description="a finished (archived) session's events are deleted this many days after it"
        " was archived; 0 keeps them as long as the session"
        " ([retention](docs/operations.md#retention))",
    )
    steps_days: float = Field(
        default=30.0,
        ge=0,
        validation_alias="retention_steps_days",
        description="a finished session's steps, as above: at most the events' days, and 0 only"
        " if events are 0 too (a tool step's result is held by its `tool.completed` event)",
    )
    idempotency_days: float = Field(
        default=30.0,
        ge=0,
        validation_alias="retention_idempotency_days",
        description="a finished session's idempotency records (`tool_calls`), as above: 0 or at"
        " least the steps' days (a kept step may be retried)",
    )
    approvals_days: float = Field(
        default=30.0,
        ge=0,
        validation_alias="retention_approvals_days",
        description="a finished session's decided approvals and confirmations, as above",
    )
    messages_days: float = Field(
        default=180.0,
        ge=0,
        validation_alias="retention_messages_days",
        description="an archived session is deleted with its messages and everything left of it"
        " this many days after it was archived; 0: kept for ever",
    )
    audit_days: float = Field(
        default=365.0,
        ge=0,
        validation_alias="retention_audit_days",
        description="audit rows (`audit_log`, `memory_audit`, `mcp_tool_decisions`) older than"
        " this are deleted; 0: kept for ever",
    )
    interval_s: float = Field(
        default=3600.0,
        gt=0,
        validation_alias="retention_interval_s",
        description="how often the purge runs",
    )
    batch_rows: int = Field(
        default=250,
        ge=1,
        le=100_000,
        validation_alias="retention_batch_rows",
        description="rows per purge transaction",
    )
    pause_ms: float = Field(
        default=10.0,
        ge=0,
        le=10_000,
        validation_alias="retention_pause_ms",
        description="pause after each purge transaction (a turn's write waits behind one batch at"
        " most)",
    )

    @model_validator(mode="after")
    def _idempotency_outlives_steps(self) -> RetentionSettings:
        # A kept step can be retried; without its idempotency record a retry would repeat
        # the side effect it already had.
        steps, keys = self.steps_days, self.idempotency_days
        if keys and (not steps or keys < steps):
            raise ValueError(
                "HERMES_RETENTION_IDEMPOTENCY_DAYS must be 0 (for ever) or at least"
                " HERMES_RETENTION_STEPS_DAYS: a kept step may be retried"
            )
        return self

    @model_validator(mode="after")
    def _events_outlive_steps(self) -> RetentionSettings:
        # A tool step's result is stored once, in its `tool.completed` event, which the step
        # refers to: the step must not be kept longer than that event.
        steps, events = self.steps_days, self.events_days
        if events and (not steps or steps > events):
            raise ValueError(
                "HERMES_RETENTION_STEPS_DAYS must be at most HERMES_RETENTION_EVENTS_DAYS"
                " (and not 0, for ever, unless events are kept for ever too): a step's tool"
                " result is held by its event"
            )
        return self


class ModelSettings(Group):
    """The models a turn calls, in the order they are tried, and how each call is made."""

    name: str = Field(
        default="hermes/local",
        validation_alias="model",
        description="`provider/model`, e.g. `openai/gpt-4o-mini`, `deepseek/deepseek-chat`"
        " ([which path](#models-which-path-a-model-takes))",
    )
    api_base: str | None = Field(
        default=None,
        validation_alias="model_api_base",
        description="where the model is; also used by fallbacks of the same provider",
    )
    api_key: SecretStr | None = Field(
        default=None,
        validation_alias="model_api_key",
        description="the model's key; also used by fallbacks of the same provider",
    )
    api: Literal["auto", "openai", "litellm"] = Field(
        default="auto",
        validation_alias="model_api",
        description="`auto`: OpenAI-compatible providers direct, the rest through LiteLLM;"
        " `openai`: direct only; `litellm`: every remote model through LiteLLM",
    )
    max_connections: int = Field(
        default=100,
        ge=1,
        le=10000,
        validation_alias="model_max_connections",
        description="connections open (and kept alive) to one model server on the direct path",
    )
    fallbacks: CommaList = Field(
        default_factory=list,
        validation_alias="fallback_models",
        description="comma list, tried in order when the primary fails",
    )
    local_fallback: bool = Field(
        default=True,
        description="append `hermes/local` as the last fallback (a degraded answer, not a"
        " failure, when every other model failed)",
    )
    timeout_s: float = Field(
        default=60.0,
        gt=0,
        validation_alias="llm_timeout_s",
        description="per try of a model: each wait for the answer or its next piece",
    )
    retries: int = Field(
        default=2,
        ge=0,
        le=10,
        validation_alias="llm_retries",
        description="tries after the first, per model",
    )
    retry_backoff_s: float = Field(
        default=0.5,
        ge=0,
        validation_alias="llm_retry_backoff_s",
        description="before the first retry, doubling per retry (or the provider's `Retry-After`)",
    )
    retry_backoff_max_s: float = Field(
        default=8.0,
        ge=0,
        validation_alias="llm_retry_backoff_max_s",
        description="the longest wait between retries",
    )
    breaker_failures: int = Field(
        default=3,
        ge=1,
        validation_alias="model_breaker_failures",
        description="breaker per model (all but the last of the chain): failures in a row, then"
        " the model is skipped",
    )
    breaker_timeouts: int = Field(
        default=2,
        ge=1,
        validation_alias="model_breaker_timeouts",
        description="timeouts in a row, then the model is skipped",
    )
    breaker_open_s: float = Field(
        default=30.0,
        gt=0,
        validation_alias="model_breaker_open_s",
        description="how long a model is skipped, then one probe lets it back in",
    )
    max_tokens: int = Field(default=2000, ge=1, description="per model call")
    temperature_planning: float = Field(
        default=0.2, ge=0, le=2, description="for planning (and summaries)"
    )
    temperature_tools: float = Field(
        default=0.1, ge=0, le=2, description="for calls that may use tools"
    )
    temperature_text: float = Field(default=0.7, ge=0, le=2, description="for free text")
    system_prompt: str = Field(
        default=DEFAULT_SYSTEM_PROMPT,
        description="the model's instructions (`app/settings/groups.py`)",
        json_schema_extra=shown("a short call-centre prompt"),
    )
    prices: CommaList = Field(
        default_factory=list,
        validation_alias="model_prices",
        description="comma list of `model=prompt/completion` prices in US dollars per million"
        " tokens, e.g. `openai/gpt-4o-mini=0.15/0.60`, for `hermes_llm_cost_usd_total` and cost"
        " budgets alike (one price per answered call; unlisted models are priced from LiteLLM's"
        " bundled price map; `hermes/local` is free; a model in neither counts as free, with a"
        " warning)",
    )

    _split = field_validator("fallbacks", "prices", mode="before")(split_commas)

    @field_validator("name")
    @classmethod
    def _model_named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(
                "set HERMES_MODEL to provider/model, e.g. hermes/local or openai/gpt-4o-mini"
            )
        return value.strip()

    @field_validator("prices")
    @classmethod
    def _prices_shape(cls, value: list[str]) -> list[str]:
        for entry in value:
            price(entry)
        return value

    @property
    def price_table(self) -> dict[str, tuple[float, float]]:
        """Model -> (prompt, completion) US dollars per million tokens."""
        return dict(price(entry) for entry in self.prices)

    @property
    def key(self) -> str | None:
        """The API key in clear, or None."""
        return None if self.api_key is None else self.api_key.get_secret_value()


class MaskingSettings(Group):
    """What a remote model (any but `hermes/local`) sees of customers' personal values."""

    mode: Literal["off", "mask", "pseudonymise"] = Field(
        default="pseudonymise",
        validation_alias="model_masking",
        description="what a remote model (every model but `hermes/local`) sees of phones, emails,"
        " ID and bank card numbers: `pseudonymise` (per-session tokens such as `«PHONE_7KQF»`,"
        " read back before tools run and before the customer sees the reply), `mask` (the masks"
        " the logs use, `138****5678`; tools get the mask too), `off`"
        " ([what goes to a remote model](#what-goes-to-a-remote-model))",
    )
    tenants: CommaList = Field(
        default_factory=list,
        validation_alias="model_masking_tenants",
        description="per-tenant modes, comma list of `tenant:mode`, e.g. `acme:mask,lab:off`;"
        " other tenants get `HERMES_MODEL_MASKING`",
    )
    kinds: CommaList = Field(
        default_factory=lambda: list(MASKING_KINDS),
        validation_alias="model_masking_kinds",
        description="the kinds of value the policy covers (any of those four)",
    )

    _split = field_validator("tenants", "kinds", mode="before")(split_commas)

    @field_validator("tenants")
    @classmethod
    def _tenants_shape(cls, value: list[str]) -> list[str]:
        for entry in value:
            tenant, sep, mode = entry.rpartition(":")
            if not sep or not tenant.strip() or mode.strip() not in MASKING_MODES:
                raise ValueError(
                    "each entry must be 'tenant:mode' with mode off, mask or pseudonymise,"
                    f" got {entry!r}"
                )
        return value

    @field_validator("kinds")
    @classmethod
    def _kinds_known(cls, value: list[str]) -> list[str]:
        return only(value, MASKING_KINDS, "kind")

    @property
    def by_tenant(self) -> dict[str, str]:
        """Tenant -> masking mode, for the tenants HERMES_MODEL_MASKING_TENANTS names."""
        pairs = (entry.rpartition(":") for entry in self.tenants)
        return {tenant.strip(): mode.strip() for tenant, _, mode in pairs}


class SessionSettings(Group):
    """Quiet sessions: archived after a while, resumed from their snapshot with their next
    message."""

    idle_minutes: float = Field(
        default=15.0,
        gt=0,
        validation_alias="session_idle_minutes",
        description="a session quiet this long is archived (resumable)",
    )
    sweep_interval_s: float = Field(
        default=30.0,
        gt=0,
        validation_alias="session_sweep_interval_s",
        description="how often idle sessions are looked for",
    )


class TurnSettings(Group):
    """One turn: how many tool rounds, how long, what a second message meets."""

    max_tool_rounds: int = Field(
        default=8, ge=1, le=64, description="model rounds with tools per turn"
    )
    busy_policy: Literal["reject", "enqueue"] = Field(
        default="reject",
        description="a message sent while a turn runs: 409 (`reject`), or `enqueue`",
    )
    max_queued: int = Field(
        default=10,
        ge=1,
        le=1000,
        validation_alias="max_queued_turns",
        description="turns queued behind a running one (`enqueue`); one more: 429",
    )
    timeout_s: float = Field(
        default=300.0,
        gt=0,
        validation_alias="turn_timeout_s",
        description="a turn never runs longer (approval waits excepted)",
    )
    delta_flush_ms: float = Field(
        default=50.0,
        ge=0,
        le=1000,
        description="streamed text is stored and sent as one `message.delta` at most this often"
        " (the first piece of a reply at once, everything before any other event of the turn);"
        " 0: one event per streamed piece",
    )


class LeaseSettings(Group):
    """One process at a time runs a session's turns: the holder of its lease."""

    ttl_s: float = Field(
        default=15.0,
        gt=0,
        validation_alias="session_lease_s",
        description="a session's lease not renewed for this long (its process died) is taken over",
    )
    renew_s: float = Field(
        default=5.0,
        gt=0,
        validation_alias="session_lease_renew_s",
        description="how often a process renews its leases (shorter than the lease)",
    )
    sweep_s: float = Field(
        default=1.0,
        gt=0,
        validation_alias="session_lease_sweep_s",
        description="how often a process looks for sessions nobody owns (and for cancels other"
        " processes asked of its turns)",
    )
    cancel_wait_s: float = Field(
        default=10.0,
        gt=0,
        description="a cancel answered by a process that does not run the turn waits this long"
        " for the process that does to end it; then 504 `cancel_timeout` (the request stays on"
        " the turn)",
    )

    @model_validator(mode="after")
    def _renewed_in_time(self) -> LeaseSettings:
        if self.renew_s >= self.ttl_s:
            raise ValueError(
                "HERMES_SESSION_LEASE_RENEW_S must be shorter than HERMES_SESSION_LEASE_S"
                " (a third of it is usual)"
            )
        return self


class ContextSettings(Group):
    """What one model call sees of the session: budget, summary, the history cache."""

    budget_tokens: int = Field(
        default=32000,
        ge=1000,
        validation_alias="context_budget_tokens",
        description="per model call",
    )
    summarize_at: float = Field(
        default=0.6,
        gt=0,
        lt=1,
        validation_alias="context_summarize_at",
        description="share of the budget from which older turns are summarised",
    )
    compress_at: float = Field(
        default=0.85,
        gt=0,
        le=1,
        validation_alias="context_compress_at",
        description="share of the budget never passed: summarised always before it",
    )
    keep_turns: int = Field(
        default=6,
        ge=1,
        validation_alias="context_keep_turns",
        description="the last turns kept whole, never summarised",
    )
    max_messages: int = Field(
        default=1000,
        ge=10,
        validation_alias="context_max_messages",
        description="a hard cap on the messages loaded for one model call (the token budget"
        " decides the rest)",
    )
    cache_sessions: int = Field(
        default=512,
        ge=0,
        validation_alias="context_cache_sessions",
        description="sessions whose history stays in memory between turns, least recently used"
        " evicted first (each holds at most `HERMES_CONTEXT_MAX_MESSAGES` messages); 0: every"
        " turn reads its history from the database",
    )
    cache_messages: int = Field(
        default=20000,
        ge=10,
        validation_alias="context_cache_messages",
        description="messages those sessions hold in all (at least `HERMES_CONTEXT_MAX_MESSAGES`),"
        " least recently used sessions evicted first: bounds the cache's memory however long"
        " sessions get (an evicted session's next turn reads its history from the database)",
    )


class BudgetSettings(Group):
    """Caps on what turns may use, 0 for off. Tokens as the model reports them (prompt +
    completion); cost in the prices' unit ([Budgets](docs/operations.md#budgets))."""

    turn_tokens: int = Field(
        default=0,
        ge=0,
        validation_alias="budget_turn_tokens",
        description="tokens one turn may use; the round that reaches it is the turn's last:"
        " `turn.failed` `budget_exceeded`",
    )
    turn_cost: float = Field(
        default=0.0, ge=0, validation_alias="budget_turn_cost", description="cost one turn may use"
    )
    session_tokens: int = Field(
        default=0,
        ge=0,
        validation_alias="budget_session_tokens",
        description="tokens per session, over its life: a turn that would start over it is"
        " refused (429 `budget_exceeded`), one that reaches it while running ends before its"
        " next model call",
    )
    session_cost: float = Field(
        default=0.0, ge=0, validation_alias="budget_session_cost", description="cost per session"
    )
    tenant_daily_tokens: int = Field(
        default=0,
        ge=0,
        validation_alias="budget_tenant_daily_tokens",
        description="tokens per tenant per UTC day, shared by its sessions and by every process"
        " on the database; refusals carry `Retry-After` (until midnight UTC)",
    )
    tenant_daily_cost: float = Field(
        default=0.0,
        ge=0,
        validation_alias="budget_tenant_daily_cost",
        description="cost per tenant per UTC day",
    )
    turn_rate_per_minute: int = Field(
        default=0,
        ge=0,
        description="turns one key (principal) may start in any minute; more: 429 `rate_limited`"
        " with `Retry-After`; counted in Redis when `HERMES_REDIS_URL` is set (shared by every"
        " process), else per process",
    )
    # A key is one customer's or one staff member's: a tab holds one or two streams, a desk a
    # few; 16 leaves room for several tabs and for streams a dropped network left open, and
    # stops one leaked or looping client from holding hundreds.
    max_streams_per_principal: int = Field(
        default=16,
        ge=0,
        description="event streams (SSE) one key may hold open at once, per process (0: no cap);"
        " one more: 429 `too_many_streams` (`Retry-After: 5`), before any turn starts. With"
        " `HERMES_AUTH=off` (one local principal for every caller) it applies only when set",
    )

    @property
    def per_session(self) -> bool:
        return bool(self.session_tokens or self.session_cost)

    @property
    def per_tenant(self) -> bool:
        return bool(self.tenant_daily_tokens or self.tenant_daily_cost)


class HttpSettings(Group):
    """The HTTP server: request limits, read timeouts, streams, cross-origin callers."""

    sse_keepalive_s: float = Field(
        default=15.0, gt=0, description="keep-alive comment interval on event streams"
    )
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024, description="larger bodies get 413")
    max_header_bytes: int = Field(
        default=16 * 1024,
        ge=1024,
        le=1024 * 1024,
        description="a request's head (request line, header fields, as sent); over it: 431"
        " `headers_too_large` (a request line alone: 414 `uri_too_long`) and the connection"
        " closed, the rest unread ([limits](docs/operations.md#request-limits-and-read-timeouts))",
    )
    max_headers: int = Field(
        default=100, ge=16, le=10_000, description="a request's header fields; more: 431 as above"
    )
    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="a whole request head must arrive within this of the connection (or of its"
        " next request's first byte); else 408 `request_timeout` and the connection closed",
    )
    body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="a whole body within this of its head (else 408); responses and streams are"
        " never timed",
    )
    cors_origins: CommaList = Field(
        default_factory=list,
        description="comma list of browser origins allowed to call the API (they may read"
        " `Idempotent-Replayed` and `X-Request-ID`)",
    )

    _split = field_validator("cors_origins", mode="before")(split_commas)


class AuthSettings(Group):
    """Who may call: managed keys, JWTs, bootstrap keys; the desk's and streams' tokens
    ([keys](#keys-and-authentication))."""

    mode: Literal["off", "api_key"] = Field(
        default="off",
        validation_alias="auth",
        description="`api_key`: every `/v1` request needs a managed key (`hermes keys create`), a"
        " JWT or a bootstrap key; `off` only on loopback",
    )
    api_keys: CommaList = Field(
        default_factory=list,
        description="bootstrap keys only (a first admin, tests): comma list of `tenant:role:key`,"
        " roles agent, operator, admin (a customer key is bound to one customer: `hermes keys"
        " create --user`), each key at least 16 characters; plain text, so prefer `hermes keys"
        " create`",
    )
    key_pepper: SecretStr | None = Field(
        default=None,
        min_length=16,
        description="16+ characters keyed into every managed key's stored digest, so the database"
        " alone cannot check a guessed key; the same on every process and for `hermes keys`;"
        " changing it invalidates every managed key",
    )
    key_cache_ttl_s: float = Field(
        default=5.0,
        ge=0,
        le=300,
        description="how long a process trusts its cached copy of a key: a revocation made"
        " elsewhere holds within this bound (0: read the database on every request)",
    )
    jwt_secret: SecretStr | None = Field(
        default=None,
        min_length=32,
        description="accept HS256 JWTs signed with this secret (32+ characters)",
    )
    jwt_jwks: str | None = Field(
        default=None,
        description="accept RS256 and ES256 JWTs signed with the keys of this JWKS file or"
        " loopback `http(s)://` URL",
    )
    jwt_audience: str | None = Field(
        default=None,
        description="the `aud` a JWT must carry (unset: a token with an `aud` is refused)",
    )
    jwt_issuer: str | None = Field(
        default=None, description="the `iss` a JWT must carry (unset: not checked)"
    )
    jwt_leeway_s: float = Field(
        default=30.0, ge=0, le=300, description="clock skew allowed on a JWT's `exp` and `nbf`"
    )
    public_paths: CommaList = Field(
        default_factory=lambda: ["healthz"],
        description="which of `healthz`, `metrics`, `docs`, `openapi.json`, `redoc` answer"
        " without a credential when authentication is on (the desk page and its assets always"
        " do)",
    )
    secret: SecretStr | None = Field(
        default=None,
        min_length=32,
        validation_alias="auth_secret",
        description="at least 32 characters: signs stream tokens; set it, the same on every"
        " process, when several serve one deployment or tokens should survive a restart (desk"
        " sign-ins are stored, they need no secret)",
        json_schema_extra=shown("random per process"),
    )
    stream_token_ttl_s: int = Field(
        default=300,
        ge=10,
        le=86400,
        description="the longest a stream token lives (it ends sooner with the credential it was"
        " made with)",
    )
    desk_session_ttl_s: int = Field(
        default=8 * 3600,
        ge=60,
        le=7 * 86400,
        description="the longest a desk sign-in lasts (it ends sooner with the credential it was"
        " made with)",
    )

    _split = field_validator("api_keys", "public_paths", mode="before")(split_commas)
    # `HERMES_AUTH_SECRET=` (compose's `${VAR:-}`) means unset, not a 0-character secret.
    _blank = field_validator(
        "secret",
        "key_pepper",
        "jwt_secret",
        "jwt_jwks",
        "jwt_audience",
        "jwt_issuer",
        mode="before",
    )(blank_is_none)

    @field_validator("api_keys")
    @classmethod
    def _api_keys_shape(cls, value: list[str]) -> list[str]:
        for entry in value:
            parts = entry.split(":")
            if len(parts) != 3 or not all(parts):
                raise ValueError("each API key must be 'tenant:role:key'")
            if parts[1] == "customer":
                raise ValueError(
                    "a customer key must be bound to one customer: make it with"
                    " `hermes keys create --role customer --user <id>`"
                )
            if parts[1] not in {"agent", "operator", "admin"}:
                raise ValueError(f"unknown role {parts[1]!r} (agent, operator or admin)")
            if len(parts[2]) < 16:
                raise ValueError("API keys must be at least 16 characters")
        return value

    @field_validator("public_paths")
    @classmethod
    def _known_public_paths(cls, value: list[str]) -> list[str]:
        return only(value, PUBLIC_PATH_NAMES)

    @field_validator("jwt_jwks")
    @classmethod
    def _jwks_local(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value.startswith(("http://", "https://")):
            if not loopback(urlsplit(value).hostname or ""):
                raise ValueError("a JWKS URL must be on loopback (127.0.0.1, ::1, localhost)")
        elif not Path(value).is_file():
            raise ValueError("no such JWKS file")
        return value


class ToolSettings(Group):
    """The tools: their file, what each call may cost, when one is given up."""

    file: Path = Field(
        default=PROJECT_ROOT / "tools.yaml",
        validation_alias="tools_file",
        description="tool declarations, checked at start-up",
    )
    result_max_tokens: int = Field(
        default=2000,
        ge=50,
        validation_alias="tool_result_max_tokens",
        description="tool output kept in context (head + tail)",
    )
    breaker_failures: int = Field(
        default=5,
        ge=1,
        validation_alias="tool_breaker_failures",
        description="breaker per (tenant, tool) ([docs/tools.md](docs/tools.md#the-trust-model)):"
        " failures in a row, then the tool is skipped; errors caused by the arguments never count",
    )
    breaker_timeouts: int = Field(
        default=3,
        ge=1,
        validation_alias="tool_breaker_timeouts",
        description="timeouts in a row, then the tool is skipped",
    )
    breaker_open_s: float = Field(
        default=600.0,
        gt=0,
        validation_alias="tool_breaker_open_s",
        description="how long a tool is skipped, then a health probe",
    )
    max_failures_per_turn: int = Field(
        default=3,
        ge=1,
        validation_alias="tool_max_failures_per_turn",
        description="then the tool is given up for the turn",
    )
    approval_timeout_s: float = Field(
        default=300.0, gt=0, description="an approval nobody decides expires"
    )
    confirmation_timeout_s: float = Field(
        default=600.0,
        gt=0,
        description='a customer\'s yes to "please confirm" after this changes nothing (tools'
        " marked `confirm`)",
    )
    redact_patterns: CommaList = Field(
        default_factory=list,
        description="extra regular expressions whose matches are masked in tool results, events"
        " and logs",
    )
    rate_limit_storage: str = Field(
        default="memory://",
        description="`redis://127.0.0.1:6379` to share limits between instances; unset with"
        " `HERMES_REDIS_URL` set: that Redis",
    )

    _split = field_validator("redact_patterns", mode="before")(split_commas)
    _compiles = field_validator("redact_patterns")(regular_expressions)


class HandoffSettings(Group):
    """Sessions waiting for a human agent."""

    fallback_s: float = Field(
        default=600.0,
        gt=0,
        validation_alias="handoff_fallback_s",
        description="a handoff nobody claims within this expires: a call-back ticket and a polite"
        " message",
    )
    wait_per_position_s: float = Field(
        default=120.0,
        ge=0,
        validation_alias="handoff_wait_per_position_s",
        description="the expected wait the customer is told, per place in the queue",
    )
    sweep_interval_s: float = Field(
        default=5.0,
        gt=0,
        validation_alias="handoff_sweep_interval_s",
        description="how often expiry is checked",
    )


class DemoSettings(Group):
    """The demo shop's data and the mail server its tools send through."""

    db_path: Path = Field(
        default=Path("var/demo.db"),
        validation_alias="demo_db_path",
        description="the demo tools' data",
    )
    tenants: CommaList = Field(
        default_factory=lambda: ["default"],
        validation_alias="demo_tenants",
        description="comma list of the tenants the demo data belongs to; other tenants find no"
        " demo customer",
    )
    smtp_host: str = Field(default="127.0.0.1", description="the demo tools' mail server")
    smtp_port: int = Field(default=1025, ge=1, le=65535, description="its port")
    smtp_from: str = Field(
        default="hermes@example.com", description="the sender of the demo's mail"
    )
    smtp_timeout_s: float = Field(default=8.0, gt=0, description="per mail sent")

    _split = field_validator("tenants", mode="before")(split_commas)


class McpSettings(Group):
    """MCP servers ([docs/mcp.md](docs/mcp.md))."""

    config: Path | None = Field(
        default=None, validation_alias="mcp_config", description="`mcp_servers.json`"
    )
    connect_timeout_s: float = Field(
        default=10.0,
        gt=0,
        validation_alias="mcp_connect_timeout_s",
        description="per MCP connection attempt",
    )
    call_timeout_s: float = Field(
        default=30.0,
        gt=0,
        validation_alias="mcp_call_timeout_s",
        description="per MCP tool call (a server's own `timeout_s` wins)",
    )
    env_allowlist: CommaList = Field(
        default_factory=lambda: ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYTHONPATH"],
        validation_alias="mcp_env_allowlist",
        description="environment passed to stdio servers besides their declared `env`",
    )

    _split = field_validator("env_allowlist", mode="before")(split_commas)


class NluSettings(Group):
    """Intent and slots (ONNX Runtime, CRF)."""

    model_dir: Path = Field(
        default=PROJECT_ROOT / "models" / "nlu",
        validation_alias="nlu_model_dir",
        description="the NLU artefacts",
    )
    min_confidence: float = Field(
        default=0.5,
        ge=0,
        le=1,
        validation_alias="nlu_min_confidence",
        description="below it an intent narrows nothing (and `hermes/local` offers a human)",
    )


class MemorySettings(Group):
    """What Hermes remembers about a user across sessions (docs/memory.md)."""

    decay_lambda: float = Field(
        default=0.02,
        ge=0,
        validation_alias="memory_decay_lambda",
        description="confidence decay per hour",
    )
    archive_below: float = Field(
        default=0.3,
        ge=0,
        le=1,
        validation_alias="memory_archive_below",
        description="a memory decayed below this is archived",
    )
    recall_top_k: int = Field(
        default=5,
        ge=1,
        le=5,
        validation_alias="memory_recall_top_k",
        description="memories recalled per turn",
    )
    recall_threshold: float = Field(
        default=0.55,
        ge=0,
        le=1,
        validation_alias="memory_recall_threshold",
        description="the score a memory needs to be recalled",
    )
    sweep_interval_s: float = Field(
        default=300.0,
        gt=0,
        validation_alias="memory_sweep_interval_s",
        description="how often decayed memories are archived",
    )
    embedding_model: str | None = Field(
        default=None, description="optional LiteLLM embedding model for recall"
    )


class KnowledgeSettings(Group):
    """The call centre's own documents: retrieval and ingestion (docs/knowledge.md). Top-k and
    threshold are the articles' defaults (seed 002), checked against the labelled questions by
    `hermes kb eval`."""

    top_k: int = Field(
        default=5,
        ge=1,
        le=20,
        validation_alias="knowledge_top_k",
        description="passages a search returns at most (seed 002): five ~600-character"
        " passages stay under ~3,000 characters of context; on the labelled set recall@5 is"
        " barely above recall@3, so more would add context, not answers",
    )
    threshold: float = Field(
        default=0.55,
        ge=0,
        le=1,
        validation_alias="knowledge_threshold",
        description="the score (0..1, the weighted share of the question a passage covers;"
        " the same on SQLite and PostgreSQL) a passage needs to be returned (seed 002); the"
        " scorer is calibrated so that at 0.55 one of the 24 unanswerable questions of the"
        " labelled set gets a source (`hermes kb eval`; the target allows 5 %)",
    )
    max_document_bytes: int = Field(
        default=5 * 2**20,
        ge=1,
        validation_alias="knowledge_max_document_bytes",
        description="a larger document is refused (413): a policy is a few pages, and a"
        " bigger upload is more likely a mistake than a document",
        json_schema_extra=shown("5 MiB"),
    )
    dir: Path | None = Field(
        default=PROJECT_ROOT / "data" / "knowledge",
        validation_alias="knowledge_dir",
        description="documents loaded into the default tenant on first start, while it has"
        " none (the demo shop's policies, so `make run` answers policy questions); empty:"
        " none",
    )

    _blank = field_validator("dir", mode="before")(blank_is_none)


class WorkflowSettings(Group):
    """The step machine and its watchdog."""

    step_queue_max_depth: int = Field(
        default=50, ge=1, description="steps one session's queue holds"
    )
    ask_user_timeout_s: float = Field(
        default=300.0, gt=0, description="an `ask_user` step unanswered this long times out"
    )
    step_stuck_after_s: float = Field(
        default=300.0, gt=0, description="a step running this long is marked stuck"
    )
    watchdog_interval_s: float = Field(
        default=15.0, gt=0, description="how often the watchdog looks for stuck steps"
    )


class ObservabilitySettings(Group):
    """Logs and metrics."""

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="the lowest level logged"
    )
    log_json: bool = Field(default=True, description="structured JSON logs with request ids")
    metrics_max_tenants: int = Field(
        default=50,
        ge=0,
        le=1000,
        description="tenants with a label of their own on `hermes_tenant_turns_total`; later ones"
        " share `other` (a bounded label set)",
    )
