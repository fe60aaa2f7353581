"""A throw-away PostgreSQL database for one benchmark case (created, then dropped)."""

from __future__ import annotations

import os
import uuid
from urllib.parse import urlsplit

PG_ADMIN_URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def create_database() -> str:
    import psycopg

    name = f"hermes_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return urlsplit(PG_ADMIN_URL)._replace(path=f"/{name}").geturl()


def drop_database(url: str) -> None:
    import psycopg

    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
