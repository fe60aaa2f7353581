"""Settings: environment, YAML file, defaults; bad values name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.errors import ConfigError
from app.settings import (
    GROUPS,
    VARIABLES,
    Settings,
    StorageSettings,
    describe_validation_error,
    load_settings,
)


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    s = load_settings()
    assert s.model.name == "hermes/local"
    assert s.turns.max_tool_rounds == 8
    assert s.sessions.idle_minutes == 15
    assert s.turns.busy_policy == "reject"
    assert s.storage.synchronous == "NORMAL"
    assert s.model.fallbacks == []
    assert (s.model.retries, s.model.retry_backoff_s, s.model.retry_backoff_max_s) == (2, 0.5, 8.0)
    assert (s.model.breaker_failures, s.model.breaker_timeouts) == (3, 2)
    assert s.model.breaker_open_s == 30
    assert (s.model.api, s.model.max_connections) == ("auto", 100)
    assert (s.http.max_header_bytes, s.http.max_headers) == (16384, 100)
    assert (s.http.header_timeout_s, s.http.body_timeout_s) == (10.0, 30.0)


def test_environment_and_comma_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_MODEL", "openai/gpt-4o-mini")
    monkeypatch.setenv("HERMES_FALLBACK_MODELS", "openai/a, openai/b ,")
    monkeypatch.setenv("HERMES_BUSY_POLICY", "enqueue")
    monkeypatch.setenv("HERMES_MAX_TOOL_ROUNDS", "3")
    monkeypatch.setenv("HERMES_DB_SYNCHRONOUS", "FULL")
    s = load_settings()
    assert s.model.name == "openai/gpt-4o-mini"
    assert s.model.fallbacks == ["openai/a", "openai/b"]
    assert s.turns.busy_policy == "enqueue"
    assert s.turns.max_tool_rounds == 3
    assert s.storage.synchronous == "FULL"


def test_model_prices_per_million_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().model.price_table == {}
    monkeypatch.setenv(
        "HERMES_MODEL_PRICES", "openai/gpt-4o-mini=0.15/0.60, deepseek/chat=0.27/1.1"
    )
    assert load_settings().model.price_table == {
        "openai/gpt-4o-mini": (0.15, 0.6),
        "deepseek/chat": (0.27, 1.1),
    }


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("HERMES_MAX_TOOL_ROUNDS", "eight"),
        ("HERMES_MAX_TOOL_ROUNDS", "0"),
        ("HERMES_BUSY_POLICY", "drop"),
        ("HERMES_SESSION_IDLE_MINUTES", "-1"),
        ("HERMES_DB_SYNCHRONOUS", "OFF"),
        ("HERMES_MODEL", "  "),
        ("HERMES_MODEL_BREAKER_FAILURES", "0"),
        ("HERMES_MODEL_BREAKER_OPEN_S", "0"),
        ("HERMES_LLM_RETRY_BACKOFF_S", "-1"),
        ("HERMES_MODEL_API", "router"),
        ("HERMES_MODEL_MAX_CONNECTIONS", "0"),
        ("HERMES_MODEL_PRICES", "openai/gpt-4o-mini=0.15"),
        ("HERMES_MODEL_PRICES", "openai/gpt-4o-mini=cheap/0.6"),
        ("HERMES_MODEL_PRICES", "=0.15/0.6"),
        ("HERMES_MODEL_PRICES", "openai/x=nan/0.6"),
        ("HERMES_MODEL_PRICES", "openai/x=-1/0.6"),
        ("HERMES_METRICS_MAX_TENANTS", "-1"),
        ("HERMES_MAX_HEADER_BYTES", "512"),  # not even a request line and a cookie
        ("HERMES_MAX_HEADER_BYTES", "16MiB"),
        ("HERMES_MAX_HEADERS", "8"),
        ("HERMES_HEADER_TIMEOUT_S", "0"),
        ("HERMES_BODY_TIMEOUT_S", "-1"),
        ("HERMES_REDACT_PATTERNS", r"\d{4}, [unclosed"),  # at start-up, not on the first turn
    ],
)
def test_bad_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert var in str(info.value)


def test_yaml_file_is_read_and_env_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "hermes.yaml"
    config.write_text("model: openai/from-yaml\nmax_tool_rounds: 4\nbusy_policy: enqueue\n")
    monkeypatch.setenv("HERMES_CONFIG", str(config))
    monkeypatch.setenv("HERMES_MAX_TOOL_ROUNDS", "5")
    s = load_settings()
    assert s.model.name == "openai/from-yaml"
    assert s.turns.busy_policy == "enqueue"
    assert s.turns.max_tool_rounds == 5


def test_yaml_unknown_key_and_missing_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "hermes.yaml"
    config.write_text("modle: typo\n")
    monkeypatch.setenv("HERMES_CONFIG", str(config))
    with pytest.raises(ConfigError, match="HERMES_MODLE: unknown setting"):
        load_settings()
    monkeypatch.setenv("HERMES_CONFIG", str(tmp_path / "nope.yaml"))
    with pytest.raises(ConfigError, match="HERMES_CONFIG: no such file"):
        load_settings()


def test_auth_needs_well_formed_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_AUTH", "api_key")
    # No bootstrap key is fine: managed keys live in the database (`hermes keys create`).
    assert load_settings().auth.api_keys == []
    monkeypatch.setenv("HERMES_API_KEYS", "acme:agent:0123456789abcde")
    with pytest.raises(ConfigError, match="HERMES_API_KEYS: API keys must be at least 16"):
        load_settings()
    monkeypatch.setenv("HERMES_API_KEYS", "acme:boss:0123456789abcdef")
    with pytest.raises(ConfigError, match="HERMES_API_KEYS: unknown role"):
        load_settings()
    # A customer key is bound to one customer, which a bootstrap key cannot be: an unbound
    # one read and deleted every customer's sessions of its tenant.
    monkeypatch.setenv("HERMES_API_KEYS", "acme:customer:0123456789abcdef")
    with pytest.raises(ConfigError, match="HERMES_API_KEYS: a customer key must be bound"):
        load_settings()
    monkeypatch.setenv("HERMES_API_KEYS", "acme:agent:0123456789abcdef")
    assert load_settings().auth.api_keys == ["acme:agent:0123456789abcdef"]


def test_redis_url_and_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    s = load_settings()
    assert (s.redis.url, s.redis.prefix) == (None, "hermes")
    monkeypatch.setenv("HERMES_REDIS_URL", "rediss://:hunter2x@cache.internal:6380/2")
    monkeypatch.setenv("HERMES_REDIS_PREFIX", "cc-east")
    s = load_settings()
    url = "rediss://:hunter2x@cache.internal:6380/2"
    assert (s.redis.shared_url, s.redis.prefix) == (url, "cc-east")
    assert "hunter2x" not in repr(s)
    assert "rate_limit_storage" not in s.tools.model_fields_set  # so rate limits follow Redis
    monkeypatch.setenv("HERMES_RATE_LIMIT_STORAGE", "memory://")
    assert "rate_limit_storage" in load_settings().tools.model_fields_set  # given: it wins


@pytest.mark.parametrize("url", ["http://:secret@cache:6379", "cache:6379", "memory://"])
def test_a_redis_url_without_a_redis_scheme_names_the_variable_not_the_password(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    monkeypatch.setenv("HERMES_REDIS_URL", url)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert info.value.source == "HERMES_REDIS_URL"
    assert "redis://" in info.value.problem and "secret" not in str(info.value)


def test_a_redis_prefix_must_be_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_REDIS_PREFIX", "has space*")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert info.value.source == "HERMES_REDIS_PREFIX"


def test_auth_settings_fail_fast(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HERMES_PUBLIC_PATHS", "healthz,admin")
    with pytest.raises(ConfigError, match="HERMES_PUBLIC_PATHS: unknown 'admin'"):
        load_settings()
    monkeypatch.setenv("HERMES_PUBLIC_PATHS", "healthz,metrics,docs,openapi.json,redoc")
    assert load_settings().auth.public_paths == [
        "healthz",
        "metrics",
        "docs",
        "openapi.json",
        "redoc",
    ]
    monkeypatch.setenv("HERMES_JWT_JWKS", "http://auth.example.com/jwks.json")
    with pytest.raises(ConfigError, match="HERMES_JWT_JWKS: a JWKS URL must be on loopback"):
        load_settings()
    monkeypatch.setenv("HERMES_JWT_JWKS", str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match="HERMES_JWT_JWKS: no such JWKS file"):
        load_settings()
    monkeypatch.setenv("HERMES_JWT_JWKS", "http://127.0.0.1:9999/jwks.json")
    assert load_settings().auth.jwt_jwks == "http://127.0.0.1:9999/jwks.json"
    monkeypatch.setenv("HERMES_JWT_SECRET", "short")
    with pytest.raises(ConfigError, match="HERMES_JWT_SECRET") as caught:
        load_settings()
    assert "short" not in str(caught.value)  # a secret is never echoed


@pytest.mark.parametrize(
    ("steps", "events", "refused"),
    [
        ("31", "30", True),  # longer than the events holding their tool results
        ("0", "30", True),  # for ever, while the events are not
        ("30", "30", False),
        ("7", "30", False),
        ("7", "0", False),
        ("0", "0", False),
    ],
)
def test_steps_are_not_kept_longer_than_the_events_holding_their_results(
    monkeypatch: pytest.MonkeyPatch, steps: str, events: str, refused: bool
) -> None:
    monkeypatch.setenv("HERMES_RETENTION_STEPS_DAYS", steps)
    monkeypatch.setenv("HERMES_RETENTION_EVENTS_DAYS", events)
    monkeypatch.setenv("HERMES_RETENTION_IDEMPOTENCY_DAYS", "0")
    if not refused:
        settings = load_settings()
        assert settings.retention.steps_days == float(steps)
        return
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "HERMES_RETENTION_STEPS_DAYS" in message and "HERMES_RETENTION_EVENTS_DAYS" in message


def _as_variable(value: object) -> str:
    """A default as the environment would spell it."""
    if isinstance(value, list):
        return ",".join(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def test_every_variable_lands_in_its_group_from_the_environment_and_from_arguments(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    defaults = {name: getattr(GROUPS[group](), field) for name, (group, field) in VARIABLES.items()}
    given = {name: value for name, value in defaults.items() if value is not None}
    assert len(given) > 100
    for name, value in given.items():
        monkeypatch.setenv(f"HERMES_{name.upper()}", _as_variable(value))
    for settings in (load_settings(), Settings(**given)):
        for name, value in given.items():
            group, field = VARIABLES[name]
            assert getattr(getattr(settings, group), field) == value, name
            assert field in getattr(settings, group).model_fields_set, name


def test_a_group_given_whole_keeps_its_values_and_takes_the_flat_ones(tmp_path: Path) -> None:
    storage = StorageSettings(db_path=tmp_path / "a.db", synchronous="FULL")
    s = Settings(storage=storage, db_pool_size=8, model="openai/m")
    assert (s.storage.db_path, s.storage.synchronous) == (tmp_path / "a.db", "FULL")
    assert s.storage.pool_size == 8 and s.model.name == "openai/m"
    assert Settings(storage=storage).storage is storage


def test_a_rule_across_a_groups_settings_names_its_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HERMES_SESSION_LEASE_S", "3")
    monkeypatch.setenv("HERMES_SESSION_LEASE_RENEW_S", "5")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert "HERMES_SESSION_LEASE_RENEW_S must be shorter than HERMES_SESSION_LEASE_S" in str(
        info.value
    )


def test_a_secret_is_never_echoed_in_an_error() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(model_api_key=["not", "a", "string"], auth_secret="short")
    problems = dict(describe_validation_error(caught.value))
    assert set(problems) == {"HERMES_MODEL_API_KEY", "HERMES_AUTH_SECRET"}
    assert "short" not in problems["HERMES_AUTH_SECRET"]
