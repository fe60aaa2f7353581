"""`hermes keys create | list | revoke | rotate`: managed API keys from a shell, on the database
the settings name (HERMES_DB_PATH or HERMES_DATABASE_URL), with the same pepper as the service.

`create` and `rotate` print the new key alone on stdout (once: it is never shown again) and what
it is on stderr, so `KEY=$(hermes keys create --tenant acme --role agent)` works.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys
import time

from app.api.auth import key_pepper
from app.api.keys import ManagedKeys, parse_duration
from app.errors import ConfigError, HermesError
from app.principal import binding_problem
from app.settings import Settings, load_settings
from app.storage.engine import open_database
from app.storage.keys import Actor, KeyRecord, KeyStore

ROLES = ("customer", "agent", "operator", "admin")
_BINDING_HINT = {True: "add --user <customer id>", False: "leave out --user"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = sub.add_parser("keys", help="managed API keys: create, list, revoke, rotate")
    verbs = keys.add_subparsers(dest="verb", required=True)
    create = verbs.add_parser("create", help="make a key; prints it once")
    create.add_argument("--tenant", required=True)
    create.add_argument("--role", required=True, choices=ROLES)
    create.add_argument(
        "--user", help="the customer a customer key acts for (required for it, refused for staff)"
    )
    create.add_argument("--expires", help="lifetime: 90d, 12h, 30m, 2w (default: never)")
    create.add_argument("--name", default="", help="a label, e.g. the frontend using it")
    listing = verbs.add_parser("list", help="the keys (never their secrets)")
    listing.add_argument("--tenant")
    listing.add_argument("--all", action="store_true", help="revoked keys too")
    for verb, text in (("revoke", "revoke a key now"), ("rotate", "a new key, the old revoked")):
        one = verbs.add_parser(verb, help=text)
        one.add_argument("key_id", help="the key's id (key_…), from `hermes keys list`")
    keys.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.verb == "create" and (problem := binding_problem(args.role, args.user)) is not None:
        print(f"hermes: {problem}: {_BINDING_HINT[args.role == 'customer']}", file=sys.stderr)
        return 2
    try:
        settings = load_settings()
        expires = None if getattr(args, "expires", None) is None else parse_duration(args.expires)
    except (ConfigError, ValueError) as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_keys(settings, args, expires))
    except HermesError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 1


async def _keys(settings: Settings, args: argparse.Namespace, expires: float | None) -> int:
    db = await open_database(settings)
    try:
        keys = ManagedKeys(KeyStore(db), key_pepper(settings), cache_ttl_s=0)
        actor = Actor(f"cli:{getpass.getuser()}", "admin")
        if args.verb == "create":
            record, key = await keys.create(
                actor,
                tenant_id=args.tenant,
                role=args.role,
                user_id=args.user,
                name=args.name,
                lifetime_s=expires,
            )
            print(key)
            print(f"created {_describe(record)}; the key is shown this once", file=sys.stderr)
            return 0
        if args.verb == "list":
            for record in await keys.list(args.tenant, include_revoked=args.all):
                print(_row(record))
            return 0
        found = await keys.find(None, args.key_id)
        if found is None:
            print(f"hermes: no key {args.key_id}", file=sys.stderr)
            return 1
        if args.verb == "revoke":
            revoked = await keys.revoke(found.tenant_id, found.id, actor)
            assert revoked is not None
            print(f"revoked {_describe(revoked)}", file=sys.stderr)
            return 0
        rotated = await keys.rotate(found.tenant_id, found.id, actor)
        if rotated is None:
            print(f"hermes: {args.key_id} is revoked or expired: create a new key", file=sys.stderr)
            return 1
        print(rotated[1])
        print(
            f"rotated {found.id} to {_describe(rotated[0])}; {found.id} is revoked", file=sys.stderr
        )
        return 0
    finally:
        await db.close()


def _describe(record: KeyRecord) -> str:
    user = f", user {record.user_id}" if record.user_id else ""
    until = "never" if record.expires_at is None else _when(record.expires_at)
    return f"{record.id} (tenant {record.tenant_id}, role {record.role}{user}, expires {until})"


def _row(record: KeyRecord) -> str:
    return "  ".join(
        [
            record.id,
            f"tenant={record.tenant_id}",
            f"role={record.role}",
            f"user={record.user_id or '-'}",
            f"status={record.status(time.time())}",
            f"expires={_when(record.expires_at)}",
            f"last_used={_when(record.last_used_at)}",
            f"created={_when(record.created_at)}",
            f"name={record.name or '-'}",
        ]
    )


def _when(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
