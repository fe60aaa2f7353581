"""`hermes eval [PATH ...]`: run scenario files and print the report; the exit status says
whether the targets are met (0), not met (1), or the run could not start (2)."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from app.errors import ConfigError
from app.evaluation.load import load_scenarios
from app.evaluation.report import Targets, render, summarize
from app.evaluation.runner import InProcess, Remote, RunResult, Target
from app.evaluation.schedule import run_all

# Scenarios of a feature still being built, by tag: loaded (so their files stay valid) but run
# only with --include-pending, so `make eval` judges what exists. Empty it when the feature lands.
PENDING_TAGS = frozenset({"knowledge"})


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "eval",
        help="run the scenario evaluation (evals/) and report task success",
        description="Run scenario files against an in-process service (default) or a running one.",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        default=[Path("evals")],
        help="scenario files or folders (default: evals/)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run only scenario ids matching this glob (repeatable)",
    )
    parser.add_argument(
        "--include-pending",
        action="store_true",
        help=f"also run scenarios tagged {', '.join(sorted(PENDING_TAGS)) or '(none pending)'}"
        " (a feature still being built)",
    )
    parser.add_argument(
        "--model",
        help="the model to evaluate in process (default: HERMES_MODEL, else hermes/local)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="runs per scenario for pass^k (k=1 for hermes/local; 4 for sampling models)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="worker processes in process (default: up to 2)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=4,
        help="services running at once in each worker process (default 4)",
    )
    parser.add_argument(
        "--url", help="evaluate a running service at this base URL instead of an in-process one"
    )
    parser.add_argument(
        "--api-key",
        help="an operator's API key for --url (approvals and memories need the operator role)",
    )
    parser.add_argument(
        "--demo-db",
        type=Path,
        help="with --url: the service's demo database file, to diff its rows",
    )
    parser.add_argument("--json", type=Path, help="also write the report as JSON to this file")
    parser.add_argument(
        "--min-success",
        type=float,
        default=0.95,
        help="target task success on the full set (default 0.95)",
    )
    parser.add_argument(
        "--min-heldout", type=float, default=0.90, help="target on the held-out set (default 0.90)"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-scenario progress lines")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if min(args.runs, args.workers, args.concurrency) < 1:
        print(
            "hermes eval: --runs, --workers and --concurrency must be at least 1", file=sys.stderr
        )
        return 2
    try:
        scenarios = load_scenarios(args.paths)
    except ConfigError as exc:
        print(f"hermes eval: {exc}", file=sys.stderr)
        return 2
    if args.only:
        scenarios = [s for s in scenarios if any(fnmatch.fnmatch(s.id, p) for p in args.only)]
    if not args.include_pending:
        pending = [s for s in scenarios if PENDING_TAGS & set(s.tags)]
        if pending:
            print(
                f"hermes eval: {len(pending)} pending scenarios skipped"
                f" (tagged {', '.join(sorted(PENDING_TAGS))}); --include-pending runs them",
                file=sys.stderr,
            )
            scenarios = [s for s in scenarios if not PENDING_TAGS & set(s.tags)]
    if not scenarios:
        print("hermes eval: no scenarios to run", file=sys.stderr)
        return 2
    target, model = _target(args)
    if target is None:
        return 2
    started = time.perf_counter()
    results = run_all(
        scenarios,
        target,
        runs=args.runs,
        workers=args.workers,
        concurrency=args.concurrency,
        progress=None if args.quiet else _progress,
    )
    targets = Targets(args.min_success, args.min_heldout)
    summary = summarize(
        scenarios,
        results,
        runs=args.runs,
        model=model,
        seconds=time.perf_counter() - started,
        targets=targets,
    )
    print(render(summary))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, ensure_ascii=False, indent=2) + "\n", "utf-8")
    return 0 if summary["met"] else 1


def _target(args: argparse.Namespace) -> tuple[Target | None, str]:
    if args.url:
        if args.model:
            print(
                "hermes eval: --model applies in process; the service at --url runs its own",
                file=sys.stderr,
            )
            return None, ""
        return Remote(args.url.rstrip("/"), args.api_key, args.demo_db), f"service at {args.url}"
    if args.api_key or args.demo_db:
        print("hermes eval: --api-key and --demo-db go with --url", file=sys.stderr)
        return None, ""
    from app.settings import load_settings

    overrides = {"model": args.model} if args.model else {}
    try:
        model = load_settings(**overrides).model.name  # fail here, not in every worker
    except ConfigError as exc:
        print(f"hermes eval: {exc}", file=sys.stderr)
        return None, ""
    return InProcess(overrides), model


def _progress(result: RunResult) -> None:
    mark = "ok  " if result.passed else "FAIL"
    print(f"{mark} {result.scenario} ({result.seconds:.1f} s)", file=sys.stderr, flush=True)
