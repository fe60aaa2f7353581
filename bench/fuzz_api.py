"""CI's fuzz stage: schemathesis over every operation of the running service's OpenAPI document.

Starts the fake OpenAI-compatible model and `hermes serve` on a loopback port with SQLite in a
temp dir and authentication on, with an admin key for each of two tenants; then runs
schemathesis (every phase: examples, coverage, fuzzing, stateful with the links it infers from
the schema) with every check, as the first tenant, the second as its peer (a read of one
tenant's object replayed with the other's key must not return it). The run is bounded by
`--max-time` and `--max-examples`; the exit status is schemathesis's: any 5xx, any response the
schema does not describe, any request the schema allows that the server refuses (or the other
way round) fails the stage. `make fuzz` runs it; docs/operations.md#fuzzing-the-api.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._hermes import start_hermes
from bench._procs import ROOT, python, spawn, stop, wait_port_file

TENANTS = ("acme", "globex")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-time", type=int, default=120, help="seconds for the whole run")
    parser.add_argument("--max-examples", type=int, default=40, help="cases per operation")
    # One worker: hypothesis describes strategies by parsing source with `ast`, which is not
    # thread-safe on Python 3.11 ("AST constructor recursion depth mismatch" with 2).
    parser.add_argument("--workers", default="1")
    parser.add_argument("--seed", type=int, default=None, help="repeat a run exactly")
    parser.add_argument("--report-dir", type=Path, default=ROOT / "var" / "fuzz")
    return parser.parse_args()


def identities(tmp: Path) -> tuple[list[str], Path]:
    """HERMES_API_KEYS entries and a Web Fuzzing Commons auth file naming one admin per
    tenant (the first sends its key as a bearer token, the second as X-API-Key)."""
    keys = {tenant: f"{tenant}-{secrets.token_urlsafe(24)}" for tenant in TENANTS}
    first, second = TENANTS
    auth = {
        "auth": [
            {
                "name": first,
                "fixedHeaders": [{"name": "Authorization", "value": f"Bearer {keys[first]}"}],
            },
            {"name": second, "fixedHeaders": [{"name": "X-API-Key", "value": keys[second]}]},
        ]
    }
    path = tmp / "auth.json"
    path.write_text(json.dumps(auth))
    return [f"{tenant}:admin:{key}" for tenant, key in keys.items()], path


def config(tmp: Path, auth_file: Path) -> Path:
    path = tmp / "schemathesis.toml"
    peers = ", ".join(json.dumps(t) for t in TENANTS)
    path.write_text(
        f'[auth.wfc]\npath = {json.dumps(str(auth_file))}\nuser = "{TENANTS[0]}"\n'
        f"peers = [{peers}]\n"
    )
    return path


async def main() -> int:
    args = parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hermes-fuzz-"))
    keys, auth_file = identities(tmp)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        port_file = tmp / "llm.port"
        fake = spawn(
            python("bench/_fake_llm.py", "--port-file", str(port_file)), {}, tmp / "llm.log"
        )
        procs.append(fake)
        api_base = f"http://127.0.0.1:{await wait_port_file(port_file, fake)}/v1"
        hermes = await start_hermes(
            tmp,
            api_base,
            {},
            HERMES_AUTH="api_key",
            HERMES_API_KEYS=",".join(keys),
            # schemathesis fetches the document without a key (HERMES_PUBLIC_PATHS).
            HERMES_PUBLIC_PATHS="healthz,openapi.json",
            HERMES_DEMO_TENANTS=",".join(TENANTS),
            HERMES_DEMO_DB_PATH=str(tmp / "demo.db"),
            HERMES_LOCAL_FALLBACK="false",
        )
        procs.append(hermes.proc)
        command = [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(config(tmp, auth_file)),
            "run",
            f"{hermes.url}/openapi.json",
            "--checks",
            "all",
            "--workers",
            args.workers,
            "--max-time",
            str(args.max_time),
            "--max-examples",
            str(args.max_examples),
            "--request-timeout",
            "10",
            "--generation-database",
            "none",
            "--report",
            "junit",
            "--report-dir",
            str(args.report_dir),
            *(["--seed", str(args.seed)] if args.seed is not None else []),
        ]
        print(f"schemathesis against {hermes.url} (Hermes log: {tmp / 'hermes.log'})", flush=True)
        # Run in the temp dir (schemathesis keeps a cache in its working directory); the hooks
        # module is imported from the project.
        env = {**os.environ, "SCHEMATHESIS_HOOKS": "bench.fuzz_hooks", "PYTHONPATH": str(ROOT)}
        run = await asyncio.to_thread(subprocess.run, command, cwd=tmp, env=env)
        return run.returncode
    finally:
        stop(procs)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
