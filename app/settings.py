"""One `Settings` for the whole service: environment (`HERMES_*`), an optional YAML file
(`HERMES_CONFIG`), then defaults. Bad values stop start-up with the variable's name."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from app.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parents[1]
ENV_PREFIX = "HERMES_"

CommaList = Annotated[list[str], NoDecode]

# HERMES_MODEL_MASKING's modes and the kinds of value it covers (app.llm.pseudonyms).
MASKING_MODES = ("off", "mask", "pseudonymise")
MASKING_KINDS = ("phone", "email", "id_card", "bank_card")

# HERMES_PUBLIC_PATHS' names: the routes that need no key only when listed.
PUBLIC_PATH_NAMES = ("healthz", "metrics", "docs", "openapi.json", "redoc")

DEFAULT_SYSTEM_PROMPT = (
    "You are Hermes, a customer-service assistant for a call centre. Be brief, polite and "
    "accurate. Use the tools you are given to look things up or act; never invent order, "
    "shipment or account data. If a tool fails, say so plainly. Answer in the user's language."
)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        validate_default=True,
    )

    # -- storage --------------------------------------------------------------------------------
    db_path: Path = Path("var/hermes.db")
    db_synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    db_busy_timeout_ms: int = Field(5000, ge=0)
    db_read_connections: int = Field(2, ge=1, le=32)
    migrations_dir: Path = PROJECT_ROOT / "migrations"  # PostgreSQL's in its postgres/ folder
    # postgresql://user:password@host:port/db selects PostgreSQL (several processes share it);
    # unset, Hermes stores everything in the SQLite file at db_path.
    database_url: SecretStr | None = None
    db_pool_size: int = Field(4, ge=1, le=64)  # PostgreSQL read connections per process
    # PostgreSQL writer connections per process, each on its own thread; a session's writes
    # always take the same one (app.storage.writer). SQLite always writes on one.
    db_write_connections: int = Field(4, ge=1, le=32)
    db_connect_timeout_s: float = Field(5.0, gt=0, le=60)
    # SQLite's WAL: a passive checkpoint after a commit leaves more than this many pages in
    # it; a WAL over db_wal_max_mb is cut back (truncated) at the next checkpoint, which runs
    # every db_checkpoint_interval_s and after each retention purge (docs/operations.md).
    db_wal_autocheckpoint_pages: int = Field(1000, ge=100, le=1_000_000)
    db_wal_max_mb: int = Field(64, ge=1, le=65536)
    db_checkpoint_interval_s: float = Field(60.0, gt=0)
    # An existing SQLite file not yet in auto_vacuum=INCREMENTAL is converted at start-up
    # (one VACUUM) only when at most this large; a larger one is left to the operator.
    db_auto_vacuum_convert_max_mb: int = Field(256, ge=0)
    # Redis shared by every Hermes process: rate limits and tool/model breakers live there when
    # set. Every key Hermes writes starts with `redis_prefix`.
    redis_url: SecretStr | None = None
    redis_prefix: str = Field("hermes", min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")

    # -- model ----------------------------------------------------------------------------------
    model: str = "hermes/local"
    model_api_base: str | None = None
    model_api_key: SecretStr | None = None
    # Which path remote models take: `auto` sends OpenAI-compatible providers to the direct
    # client and the rest to LiteLLM; `openai` direct only; `litellm` all through LiteLLM.
    model_api: Literal["auto", "openai", "litellm"] = "auto"
    # Connections open (and kept alive) to one model server, for the direct client.
    model_max_connections: int = Field(100, ge=1, le=10000)
    fallback_models: CommaList = Field(default_factory=list)
    # hermes/local answers last when every other model failed (a degraded answer, not a failure).
    local_fallback: bool = True
    llm_timeout_s: float = Field(60.0, gt=0)
    llm_retries: int = Field(2, ge=0, le=10)
    # Backoff before the first retry of a model, doubling per retry up to the maximum.
    llm_retry_backoff_s: float = Field(0.5, ge=0)
    llm_retry_backoff_max_s: float = Field(8.0, ge=0)
    # A model (other than the last of the chain) that keeps failing is skipped for a while.
    model_breaker_failures: int = Field(3, ge=1)
    model_breaker_timeouts: int = Field(2, ge=1)
    model_breaker_open_s: float = Field(30.0, gt=0)
    max_tokens: int = Field(2000, ge=1)
    temperature_planning: float = Field(0.2, ge=0, le=2)
    temperature_tools: float = Field(0.1, ge=0, le=2)
    temperature_text: float = Field(0.7, ge=0, le=2)
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    # What a remote model (any but hermes/local) sees of the values below: `pseudonymise`
    # (tokens the runtime reads back, so tools get the real value), `mask` or `off`.
    model_masking: Literal["off", "mask", "pseudonymise"] = "pseudonymise"
    # Per-tenant modes, each "tenant:mode"; tenants not listed get model_masking.
    model_masking_tenants: CommaList = Field(default_factory=list)
    # The kinds of value the policy covers: any of phone, email, id_card, bank_card.
    model_masking_kinds: CommaList = Field(default_factory=lambda: list(MASKING_KINDS))

    # -- turns and sessions ---------------------------------------------------------------------
    max_tool_rounds: int = Field(8, ge=1, le=64)
    session_idle_minutes: float = Field(15.0, gt=0)
    session_sweep_interval_s: float = Field(30.0, gt=0)
    busy_policy: Literal["reject", "enqueue"] = "reject"
    max_queued_turns: int = Field(10, ge=1, le=1000)
    turn_timeout_s: float = Field(300.0, gt=0)
    # A hard cap on the messages loaded for one model call; the token budget decides the rest.
    context_max_messages: int = Field(1000, ge=10)
    # Sessions whose history stays in memory between turns (each holds at most
    # context_max_messages messages); 0 reads every turn's history from the database.
    context_cache_sessions: int = Field(512, ge=0)
    # ...and all of them together at most this many messages (at least context_max_messages,
    # so one session's window always fits): the cache's memory is bounded by messages, not
    # only by sessions, however long the sessions get.
    context_cache_messages: int = Field(20000, ge=10)
    # Streamed text is stored and sent as one message.delta at most this often (the first
    # piece of a reply at once); 0 stores every piece as its own event.
    delta_flush_ms: float = Field(50.0, ge=0, le=1000)

    # One process at a time runs a session's turns: the one holding its lease. A lease not
    # renewed for session_lease_s (its process died) is taken over; renewed every
    # session_lease_renew_s; sessions nobody owns are looked for every session_lease_sweep_s.
    session_lease_s: float = Field(15.0, gt=0)
    session_lease_renew_s: float = Field(5.0, gt=0)
    session_lease_sweep_s: float = Field(1.0, gt=0)
    # A cancel answered by a process that does not run the turn waits this long for the owner
    # to end it (then 504 cancel_timeout); the owner looks for requests every sweep.
    cancel_wait_s: float = Field(10.0, gt=0)

    # -- budgets and limits (0: off) -------------------------------------------------------------
    # Tokens as the model reports them (prompt + completion); cost in the prices' unit (USD for
    # LiteLLM's price map). A turn over a cap ends `budget_exceeded` between model rounds; a
    # turn that would start over a session's or the tenant's cap is refused (429).
    budget_turn_tokens: int = Field(0, ge=0)
    budget_turn_cost: float = Field(0.0, ge=0)
    budget_session_tokens: int = Field(0, ge=0)
    budget_session_cost: float = Field(0.0, ge=0)
    budget_tenant_daily_tokens: int = Field(0, ge=0)
    budget_tenant_daily_cost: float = Field(0.0, ge=0)
    # Prices per model: `model_prices` (below); budgets price other models from LiteLLM's
    # bundled price map (hermes/local costs nothing).
    # Turns one principal (API key) may start per minute, shared through Redis when set.
    turn_rate_per_minute: int = Field(0, ge=0)
    # Event streams (SSE) one principal may hold open at once, per process (0: no cap). A key is
    # one customer's or one staff member's: a tab holds one or two, a desk a few; 16 leaves room
    # for several tabs and for streams a dropped network left open, and stops one leaked or
    # looping client from holding hundreds. With auth off: only when set (app.runtime.stream_cap).
    max_streams_per_principal: int = Field(16, ge=0)

    # -- HTTP -----------------------------------------------------------------------------------
    sse_keepalive_s: float = Field(15.0, gt=0)
    max_body_bytes: int = Field(1024 * 1024, ge=1024)
    # A request's head (request line and header fields, as sent) and its number of header
    # fields; over either, 431 (414 for a request line alone). Enforced by the connection itself
    # (app.api.http_protocol), before anything is buffered past the limit.
    max_header_bytes: int = Field(16 * 1024, ge=1024, le=1024 * 1024)
    max_headers: int = Field(100, ge=16, le=10_000)
    # A whole request head within header_timeout_s of the connection or of its first byte, and
    # a whole body within body_timeout_s of its head; else 408 and the connection is closed.
    header_timeout_s: float = Field(10.0, gt=0, le=300)
    body_timeout_s: float = Field(30.0, gt=0, le=3600)
    cors_origins: CommaList = Field(default_factory=list)

    # -- auth -----------------------------------------------------------------------------------
    # `off` only on loopback (`hermes serve` refuses it elsewhere); `api_key`: managed keys
    # (`hermes keys create`), JWTs when configured, and the bootstrap keys below.
    auth: Literal["off", "api_key"] = "off"
    # Bootstrap keys, plain text in the environment: each "tenant:role:key" (role agent,
    # operator or admin; the key at least 16 characters). For the first admin and tests. A
    # customer key is bound to one customer, which only a managed key can be (`--user`).
    api_keys: CommaList = Field(default_factory=list)
    # Keyed into every managed key's stored digest: the database alone cannot check a guess.
    # The same on every process; changing it invalidates every managed key.
    key_pepper: SecretStr | None = Field(None, min_length=16)
    # How long a process trusts its cached copy of a key's row: a revocation made elsewhere
    # holds everywhere within this bound (the process that revokes drops its copy at once).
    key_cache_ttl_s: float = Field(5.0, ge=0, le=300)
    # JWT bearer tokens: HS256 with the secret, RS256/ES256 with a JWKS file or loopback URL.
    jwt_secret: SecretStr | None = Field(None, min_length=32)
    jwt_jwks: str | None = None
    jwt_audience: str | None = None
    jwt_issuer: str | None = None
    jwt_leeway_s: float = Field(30.0, ge=0, le=300)
    # What answers without credentials: any of healthz, metrics, docs, openapi.json, redoc.
    # The desk page and its assets always do (they hold no data; one signs in on them).
    public_paths: CommaList = Field(default_factory=lambda: ["healthz"])
    # Signs the desk's session cookies and the stream tokens (HMAC-SHA256). Unset: a random
    # secret per process, so tokens die with the process and other processes refuse them; set
    # it (the same on every process) when several serve one deployment.
    auth_secret: SecretStr | None = Field(None, min_length=32)
    stream_token_ttl_s: int = Field(300, ge=10, le=86400)  # the longest a stream token lives
    desk_session_ttl_s: int = Field(8 * 3600, ge=60, le=7 * 86400)  # a desk sign-in

    # -- tools ----------------------------------------------------------------------------------
    tools_file: Path = PROJECT_ROOT / "tools.yaml"
    tool_result_max_tokens: int = Field(2000, ge=50)
    tool_breaker_failures: int = Field(5, ge=1)
    tool_breaker_timeouts: int = Field(3, ge=1)
    tool_breaker_open_s: float = Field(600.0, gt=0)
    tool_max_failures_per_turn: int = Field(3, ge=1)
    approval_timeout_s: float = Field(300.0, gt=0)
    # A handoff nobody claims within this many seconds: a call-back ticket and a polite message.
    handoff_fallback_s: float = Field(600.0, gt=0)
    handoff_wait_per_position_s: float = Field(120.0, ge=0)  # the expected wait the customer hears
    handoff_sweep_interval_s: float = Field(5.0, gt=0)
    # How long a customer has to answer "please confirm: …" (tools marked `confirm`).
    confirmation_timeout_s: float = Field(600.0, gt=0)
    # Extra regular expressions whose matches are masked in tool results, events and logs.
    redact_patterns: CommaList = Field(default_factory=list)
    # `memory://` (one process) or `redis://127.0.0.1:6379` (shared between instances); when
    # left unset and HERMES_REDIS_URL is set, rate limits are kept in that Redis.
    rate_limit_storage: str = "memory://"
    demo_db_path: Path = Path("var/demo.db")
    # The tenants the demo dataset belongs to: other tenants' sessions find no demo customer.
    demo_tenants: CommaList = Field(default_factory=lambda: ["default"])
    smtp_host: str = "127.0.0.1"
    smtp_port: int = Field(1025, ge=1, le=65535)
    smtp_from: str = "hermes@example.com"
    smtp_timeout_s: float = Field(8.0, gt=0)

    # -- MCP ------------------------------------------------------------------------------------
    mcp_config: Path | None = None
    mcp_connect_timeout_s: float = Field(10.0, gt=0)
    mcp_call_timeout_s: float = Field(30.0, gt=0)
    # Environment variables passed to stdio servers besides their declared `env`.
    mcp_env_allowlist: CommaList = Field(
        default_factory=lambda: ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "PYTHONPATH"]
    )

    # -- NLU ------------------------------------------------------------------------------------
    nlu_model_dir: Path = PROJECT_ROOT / "models" / "nlu"
    nlu_min_confidence: float = Field(0.5, ge=0, le=1)

    # -- memory and context ---------------------------------------------------------------------
    memory_decay_lambda: float = Field(0.02, ge=0)
    memory_archive_below: float = Field(0.3, ge=0, le=1)
    memory_recall_top_k: int = Field(5, ge=1, le=5)
    memory_recall_threshold: float = Field(0.55, ge=0, le=1)
    memory_sweep_interval_s: float = Field(300.0, gt=0)
    embedding_model: str | None = None
    context_budget_tokens: int = Field(32000, ge=1000)
    context_summarize_at: float = Field(0.6, gt=0, lt=1)
    context_compress_at: float = Field(0.85, gt=0, le=1)
    context_keep_turns: int = Field(6, ge=1)

    # -- retention (days; 0 keeps for ever) ---------------------------------------------------
    # Finished (archived) sessions' events, steps, idempotency records (tool_calls), decided
    # approvals and confirmations, counted from the session's archiving; after
    # retention_messages_days the session goes with its messages and everything else of it.
    # Audit rows (audit_log, memory_audit, mcp_tool_decisions) by their own age. Memories keep
    # their own rules (decay, forgetting: docs/memory.md).
    retention_events_days: float = Field(30.0, ge=0)
    retention_steps_days: float = Field(30.0, ge=0)
    retention_idempotency_days: float = Field(30.0, ge=0)
    retention_approvals_days: float = Field(30.0, ge=0)
    retention_messages_days: float = Field(180.0, ge=0)
    retention_audit_days: float = Field(365.0, ge=0)
    retention_interval_s: float = Field(3600.0, gt=0)
    # Rows per purge transaction, and the pause after each: a turn waits behind one at most.
    retention_batch_rows: int = Field(250, ge=1, le=100_000)
    retention_pause_ms: float = Field(10.0, ge=0, le=10_000)

    # -- workflow -------------------------------------------------------------------------------
    step_queue_max_depth: int = Field(50, ge=1)
    ask_user_timeout_s: float = Field(300.0, gt=0)
    step_stuck_after_s: float = Field(300.0, gt=0)
    watchdog_interval_s: float = Field(15.0, gt=0)

    # -- observability --------------------------------------------------------------------------
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_json: bool = True
    # Tenants with a label of their own on per-tenant metrics; later ones share `other`.
    metrics_max_tenants: int = Field(50, ge=0, le=1000)
    # Model prices for hermes_llm_cost_usd_total, one `model=prompt/completion` per entry in US
    # dollars per million tokens, e.g. `openai/gpt-4o-mini=0.15/0.60`; unlisted models cost 0.
    model_prices: CommaList = Field(default_factory=list)

    @field_validator(
        "fallback_models",
        "cors_origins",
        "api_keys",
        "demo_tenants",
        "public_paths",
        "model_prices",
        "model_masking_tenants",
        "model_masking_kinds",
        mode="before",
    )
    @classmethod
    def _split_commas(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("model")
    @classmethod
    def _model_named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(
                "set HERMES_MODEL to provider/model, e.g. hermes/local or openai/gpt-4o-mini"
            )
        return value.strip()

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        url = value.get_secret_value().strip()
        if not url.startswith(("redis://", "rediss://")):
            raise ValueError("must start with redis:// or rediss://")
        return SecretStr(url)

    @property
    def shared_redis_url(self) -> str | None:
        """The Redis URL when processes share state through Redis, else None."""
        return None if self.redis_url is None else self.redis_url.get_secret_value()

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

    @field_validator("model_masking_tenants")
    @classmethod
    def _masking_tenants_shape(cls, value: list[str]) -> list[str]:
        for entry in value:
            tenant, sep, mode = entry.rpartition(":")
            if not sep or not tenant.strip() or mode.strip() not in MASKING_MODES:
                raise ValueError(
                    "each entry must be 'tenant:mode' with mode off, mask or pseudonymise,"
                    f" got {entry!r}"
                )
        return value

    @property
    def model_masking_by_tenant(self) -> dict[str, str]:
        """Tenant -> masking mode, for the tenants HERMES_MODEL_MASKING_TENANTS names."""
        pairs = (entry.rpartition(":") for entry in self.model_masking_tenants)
        return {tenant.strip(): mode.strip() for tenant, _, mode in pairs}

    @field_validator("model_masking_kinds")
    @classmethod
    def _masking_kinds_known(cls, value: list[str]) -> list[str]:
        return _only(value, MASKING_KINDS, "kind")

    @field_validator("model_prices")
    @classmethod
    def _prices_shape(cls, value: list[str]) -> list[str]:
        for entry in value:
            _price(entry)
        return value

    @property
    def model_price_table(self) -> dict[str, tuple[float, float]]:
        """Model -> (prompt, completion) US dollars per million tokens."""
        return dict(_price(entry) for entry in self.model_prices)

    @model_validator(mode="after")
    def _lease_renewed_in_time(self) -> Settings:
        if self.session_lease_renew_s >= self.session_lease_s:
            raise ValueError(
                "HERMES_SESSION_LEASE_RENEW_S must be shorter than HERMES_SESSION_LEASE_S"
                " (a third of it is usual)"
            )
        return self

    @model_validator(mode="after")
    def _idempotency_outlives_steps(self) -> Settings:
        # A kept step can be retried; without its idempotency record a retry would repeat
        # the side effect it already had.
        steps, keys = self.retention_steps_days, self.retention_idempotency_days
        if keys and (not steps or keys < steps):
            raise ValueError(
                "HERMES_RETENTION_IDEMPOTENCY_DAYS must be 0 (for ever) or at least"
                " HERMES_RETENTION_STEPS_DAYS: a kept step may be retried"
            )
        return self

    @model_validator(mode="after")
    def _events_outlive_steps(self) -> Settings:
        # A tool step's result is stored once, in its `tool.completed` event, which the step
        # refers to: the step must not be kept longer than that event.
        steps, events = self.retention_steps_days, self.retention_events_days
        if events and (not steps or steps > events):
            raise ValueError(
                "HERMES_RETENTION_STEPS_DAYS must be at most HERMES_RETENTION_EVENTS_DAYS"
                " (and not 0, for ever, unless events are kept for ever too): a step's tool"
                " result is held by its event"
            )
        return self

    @field_validator("public_paths")
    @classmethod
    def _known_public_paths(cls, value: list[str]) -> list[str]:
        return _only(value, PUBLIC_PATH_NAMES)

    @field_validator("auth_secret", "key_pepper", "jwt_secret", mode="before")
    @classmethod
    def _blank_secret_is_none(cls, value: Any) -> Any:
        # `HERMES_AUTH_SECRET=` (compose's `${VAR:-}`) means unset, not a 0-character secret.
        return None if value == "" else value

    @field_validator("jwt_jwks", "jwt_audience", "jwt_issuer", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("jwt_jwks")
    @classmethod
    def _jwks_local(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if value.startswith(("http://", "https://")):
            host = urlsplit(value).hostname or ""
            if host != "localhost" and not _loopback_ip(host):
                raise ValueError("a JWKS URL must be on loopback (127.0.0.1, ::1, localhost)")
        elif not Path(value).is_file():
            raise ValueError("no such JWKS file")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get(f"{ENV_PREFIX}CONFIG")
        if config_file:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=config_file))
        return tuple(sources)


def _only(value: list[str], known: tuple[str, ...], what: str = "") -> list[str]:
    """`value` if each of its entries is `known`; else a ValueError naming the first that isn't."""
    unknown = [entry for entry in value if entry not in known]
    if unknown:
        label = f"{what} " if what else ""
        raise ValueError(f"unknown {label}{unknown[0]!r} (any of {', '.join(known)})")
    return value


def _price(entry: str) -> tuple[str, tuple[float, float]]:
    model, sep, prices = entry.rpartition("=")
    prompt, slash, completion = prices.partition("/")
    try:
        pair = (float(prompt), float(completion))
    except ValueError:
        pair = (-1.0, -1.0)
    if not sep or not model.strip() or not slash or not all(0 <= p < 1e6 for p in pair):
        raise ValueError(
            f"each price must be 'model=prompt/completion' in USD per million tokens, got {entry!r}"
        )
    return model.strip(), pair


def load_settings(**overrides: Any) -> Settings:
    """Build settings or raise `ConfigError` naming each bad variable."""
    config_file = os.environ.get(f"{ENV_PREFIX}CONFIG")
    if config_file and not Path(config_file).is_file():
        raise ConfigError(f"{ENV_PREFIX}CONFIG", f"no such file: {config_file}")
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise config_error(exc) from None


def config_error(exc: ValidationError) -> ConfigError:
    """One bad variable: `"HERMES_X: why (got ...)"` on one line; several: one line each."""
    problems = describe_validation_error(exc)
    if len(problems) == 1:
        return ConfigError(*problems[0])
    names = ", ".join(dict.fromkeys(name for name, _ in problems))
    listed = "\n  ".join(f"{name}: {problem}" for name, problem in problems)
    return ConfigError(names, f"invalid configuration:\n  {listed}")


# Values never echoed in an error: they may hold credentials (a Redis URL's password).
_SECRET_FIELDS = frozenset(
    {"api_keys", "redis_url", "database_url", "auth_secret", "key_pepper", "jwt_secret"}
)


def describe_validation_error(exc: ValidationError) -> list[tuple[str, str]]:
    """Each problem as (the variable, what is wrong with it)."""
    problems = []
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else ""
        name = f"{ENV_PREFIX}{field.upper()}" if field else "configuration"
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown setting"
        got = err.get("input")
        shown = (
            ""
            if got is None or isinstance(got, dict) or field in _SECRET_FIELDS
            else f" (got {got!r})"
        )
        problems.append((name, f"{message}{shown}"))
    return problems


def _loopback_ip(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
