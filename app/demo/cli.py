"""`hermes demo-data [--path FILE] [--seed N]`: rebuild the demo dataset from its seed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.demo.generator import DEFAULT_SEED, regenerate


def add_demo_data_command(sub: Any) -> None:
    """Register the sub-command on the `hermes` parser's subparsers."""
    parser = sub.add_parser(
        "demo-data", help="(re)generate the demo call-centre dataset (stop the service first)"
    )
    configure(parser)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--path", type=Path, help="demo SQLite file (default: HERMES_DEMO_DB_PATH, var/demo.db)"
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="generator seed")
    parser.set_defaults(func=run_demo_data)


def run_demo_data(args: argparse.Namespace) -> int:
    path: Path | None = args.path
    if path is None:
        from app.errors import ConfigError
        from app.settings import load_settings

        try:
            path = load_settings().demo.db_path
        except ConfigError as exc:
            print(f"hermes: {exc}", file=sys.stderr)
            return 2
    counts = regenerate(path, args.seed)
    summary = ", ".join(f"{n} {table}" for table, n in counts.items() if n)
    print(f"demo data written to {path} (seed {args.seed}): {summary}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.demo", description=__doc__)
    configure(parser)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code
