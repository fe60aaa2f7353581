"""The `hermes` command: `hermes serve`, the one-shot copy to PostgreSQL, `hermes export`
(what the retention purge will delete), `hermes settings` (the settings tables), the NLU tools,
`hermes eval`, `hermes chat` (a terminal client), `hermes keys` and `hermes kb` (the knowledge
base)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any


def _serve(args: argparse.Namespace) -> int:
    if args.db:
        os.environ["HERMES_DB_PATH"] = str(args.db)
    from app.errors import ConfigError
    from app.settings import load_settings

    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 2

    if args.workers < 1:
        print("hermes: --workers must be at least 1", file=sys.stderr)
        return 2
    if args.workers > 1 and settings.storage.postgres_url is None:
        print(
            f"hermes: --workers {args.workers} needs PostgreSQL: SQLite has one writer per file;"
            " set HERMES_DATABASE_URL=postgresql://… and HERMES_REDIS_URL to run several workers",
            file=sys.stderr,
        )
        return 2

    import uvicorn

    from app.api.http_protocol import serving_options
    from app.main import create_app
    from app.observability.logs import configure_logging

    configure_logging(settings.observability.log_level, settings.observability.log_json)
    from app.api.auth import check_bind
    from app.runtime import preflight

    try:
        warning = check_bind(settings, args.host)
        preflight(settings)
    except ConfigError as exc:
        print(f"hermes: cannot start: {exc}", file=sys.stderr)
        return 2
    if warning is not None:
        print(f"hermes: {warning}", file=sys.stderr)
    options: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "log_config": None,
        "access_log": False,
        "timeout_graceful_shutdown": 15,
        **serving_options(settings),
    }
    if args.workers > 1:
        # Each worker process builds its own app (and runtime) from the same environment; they
        # share the port, the database and Redis, and a session's turns run in one at a time.
        uvicorn.run("app.main:worker_app", factory=True, workers=args.workers, **options)
    else:
        uvicorn.run(create_app(settings), **options)
    return 0


def _migrate_sqlite_to_postgres(args: argparse.Namespace) -> int:
    """Copy a SQLite database into an empty PostgreSQL one; one line per table, verified."""
    import psycopg

    from app.errors import StorageError, first_line
    from app.storage.postgres.copy import CopyRefused, copy_database

    try:
        target = psycopg.connect(args.target, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        print(f"hermes: cannot connect to --to: {first_line(exc)}", file=sys.stderr)
        return 2
    with target:
        try:
            checks = copy_database(args.source, target)
        except CopyRefused as exc:
            print(f"hermes: {exc}", file=sys.stderr)
            return 2
        except StorageError as exc:
            print(f"hermes: {first_line(exc)}", file=sys.stderr)
            return 1
    for check in checks:
        print(check.line())
    bad = [c.table for c in checks if not c.ok]
    if bad:
        print(f"hermes: copy does not match the source in {', '.join(bad)}", file=sys.stderr)
        return 1
    rows = sum(c.sqlite_rows for c in checks)
    print(f"copied {len(checks)} tables, {rows} rows: every count and checksum matches")
    return 0


def _export(args: argparse.Namespace) -> int:
    """Every row the retention purge will have deleted by `--ahead-days` from now, as JSON
    lines `{"table": …, "row": {…}}`, read from the configured database (a live one too)."""
    import asyncio
    import json
    import time
    from collections import Counter

    from app.errors import ConfigError, HermesError
    from app.settings import load_settings
    from app.storage.engine import open_database
    from app.storage.export import rows_due
    from app.storage.purge import DAY, RetentionPolicy

    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 2
    when = time.time() + args.ahead_days * DAY
    counts: Counter[str] = Counter()

    async def export(out: Any) -> None:
        db = await open_database(settings)
        try:
            policy = RetentionPolicy.from_settings(settings.retention)
            async for table, row in rows_due(db, policy, when, args.tenant):
                out.write(json.dumps({"table": table, "row": row}, ensure_ascii=False) + "\n")
                counts[table] += 1
        finally:
            await db.close()

    try:
        if args.out == "-":
            asyncio.run(export(sys.stdout))
        else:
            with open(args.out, "w", encoding="utf-8") as out:
                asyncio.run(export(out))
    except HermesError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 1
    for table, n in sorted(counts.items()):
        print(f"{table:<20} {n:>10} rows", file=sys.stderr)
    print(
        f"exported {sum(counts.values())} rows due by {args.ahead_days:g} days from now",
        file=sys.stderr,
    )
    return 0


def _settings(args: argparse.Namespace) -> int:
    """The README's configuration tables, made from the settings models."""
    from app.settings.table import markdown, write_readme

    if args.readme:
        changed = write_readme()
        print("README.md: settings tables " + ("rewritten" if changed else "already current"))
    else:
        print(markdown(), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hermes", description="Hermes Agent")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--db", type=Path, help="SQLite database file (HERMES_DB_PATH)")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes sharing the port (more than 1 needs HERMES_DATABASE_URL=postgresql://…)",
    )
    serve.set_defaults(func=_serve)
    copy = sub.add_parser(
        "migrate-sqlite-to-postgres",
        help="copy a SQLite database into an empty PostgreSQL database, verified per table",
    )
    copy.add_argument(
        "--from", dest="source", type=Path, required=True, help="the SQLite database file"
    )
    copy.add_argument(
        "--to", dest="target", required=True, help="postgresql://user:password@host:port/db"
    )
    copy.set_defaults(func=_migrate_sqlite_to_postgres)
    export = sub.add_parser(
        "export",
        help="write every row the retention purge will delete (HERMES_RETENTION_*) as JSON lines",
    )
    export.add_argument("--out", default="-", help="the file to write (default: stdout)")
    export.add_argument("--tenant", help="only this tenant's rows")
    export.add_argument(
        "--ahead-days",
        type=float,
        default=1.0,
        help="rows due by this many days from now (default 1: before tomorrow's purges)",
    )
    export.set_defaults(func=_export)
    settings = sub.add_parser(
        "settings", help="every setting: its variable, default and meaning (Markdown tables)"
    )
    settings.add_argument(
        "--readme", action="store_true", help="write the tables into README.md between its markers"
    )
    settings.set_defaults(func=_settings)

    from app.api.keys_cli import register as register_keys
    from app.chat.cli import register as register_chat
    from app.demo.cli import add_demo_data_command
    from app.evaluation.cli import register as register_eval
    from app.knowledge.cli import register as register_kb
    from app.nlu.cli import register as register_nlu

    add_demo_data_command(sub)
    register_nlu(sub)
    register_eval(sub)
    register_chat(sub)
    register_keys(sub)
    register_kb(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
