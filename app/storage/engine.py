"""Which database the settings ask for, opened — or one line saying why it can't be."""

from __future__ import annotations

from urllib.parse import urlsplit

from app.errors import ConfigError, first_line
from app.settings import Settings
from app.storage.port import Database
from app.storage.sqlite import SqliteDatabase

DATABASE_URL = "HERMES_DATABASE_URL"


def database_for(settings: Settings) -> Database:
    """The configured database, not yet open: PostgreSQL when HERMES_DATABASE_URL says so."""
    url = settings.storage.postgres_url
    if url is None:
        return SqliteDatabase(
            settings.storage.db_path,
            migrations_dir=settings.storage.migrations_dir,
            synchronous=settings.storage.synchronous,
            busy_timeout_ms=settings.storage.busy_timeout_ms,
            read_connections=settings.storage.read_connections,
            wal_autocheckpoint_pages=settings.storage.wal_autocheckpoint_pages,
            wal_max_bytes=settings.storage.wal_max_mb * 2**20,
            auto_vacuum_convert_max_bytes=settings.storage.auto_vacuum_convert_max_mb * 2**20,
        )
    from app.storage.postgres.database import PostgresDatabase  # psycopg only when used

    return PostgresDatabase(
        url,
        migrations_dir=settings.storage.migrations_dir / "postgres",
        read_connections=settings.storage.pool_size,
        write_connections=settings.storage.write_connections,
        connect_timeout_s=settings.storage.connect_timeout_s,
    )


def check_database(settings: Settings) -> None:
    """Start-up's check that the configured PostgreSQL answers: one connection, closed again.
    Raises ConfigError naming HERMES_DATABASE_URL (never the password)."""
    url = settings.storage.postgres_url
    if url is None:
        return
    import psycopg

    timeout = max(1, int(settings.storage.connect_timeout_s))
    try:
        psycopg.connect(url, connect_timeout=timeout, autocommit=True).close()
    except psycopg.Error as exc:
        raise ConfigError(
            DATABASE_URL, f"cannot connect to PostgreSQL at {where(url)}: {first_line(exc)}"
        ) from None


async def open_database(settings: Settings) -> Database:
    db = database_for(settings)
    url = settings.storage.postgres_url
    if url is None:
        return await db.open()
    import psycopg
    import psycopg_pool

    try:
        return await db.open()
    except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
        raise ConfigError(
            DATABASE_URL, f"cannot connect to PostgreSQL at {where(url)}: {first_line(exc)}"
        ) from None


def where(url: str) -> str:
    """host:port/database of a URL, without user or password."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or 5432
    return f"{host}:{port}{parts.path or '/'}"
