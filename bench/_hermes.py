"""Hermes as the benchmarks run it: `hermes serve` in its own process against a fake model, with
any `HERMES_*` setting given on the command line (`--env HERMES_MODEL_API=openai`), and a line
saying which model path the process took."""

from __future__ import annotations

import argparse
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench._procs import (
    free_port,
    litellm_loaded,
    memory_mb,
    python,
    spawn,
    wait_port_file,
    wait_ready,
)

BENCH_MODEL = "openai/bench"


def add_env_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="HERMES_X=VALUE",
        help="a setting for the Hermes process (repeatable), e.g. HERMES_MODEL_API=openai",
    )


def parse_env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.startswith("HERMES_"):
            raise SystemExit(f"--env takes HERMES_NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


@dataclass
class Hermes:
    proc: subprocess.Popen[bytes]
    url: str
    env: dict[str, str]
    ready_s: float
    idle_rss_mb: float

    @property
    def pid(self) -> int:
        return self.proc.pid

    def model_path(self) -> str:
        """The model and the client path the running process took, read from the process."""
        shown = {k: v for k, v in self.env.items() if k.startswith("HERMES_MODEL")}
        shown.pop("HERMES_MODEL_API_KEY", None)
        settings = " ".join(f"{k}={v}" for k, v in sorted(shown.items()))
        lite = "LiteLLM imported" if litellm_loaded(self.pid) else "LiteLLM not imported"
        return f"{settings} ({lite} in the Hermes process)"


async def start_hermes(
    tmp: Path,
    api_base: str,
    extra: dict[str, str],
    serve_args: tuple[str, ...] = (),
    program: tuple[str, ...] = ("-m", "app.cli"),
    **settings: str,
) -> Hermes:
    """`hermes serve` on 127.0.0.1 with SQLite in `tmp` (unless the settings name a
    HERMES_DATABASE_URL), the fake model at `api_base`; `extra` (from --env) wins over the
    bench's own settings; `serve_args` go to `hermes serve` (e.g. `--workers 2`); `program` is
    what Python runs as `hermes` (bench/_traced_hermes.py traces allocations)."""
    port = free_port()
    env = {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HERMES_MODEL": BENCH_MODEL,
        "HERMES_MODEL_API_BASE": api_base,
        "HERMES_MODEL_API_KEY": "sk-bench",
        "HERMES_LOG_LEVEL": "WARNING",
        "HERMES_LOG_JSON": "false",
        **settings,
        **extra,
    }
    args = python(
        *program, "serve", "--port", str(port), "--db", str(tmp / "hermes.db"), *serve_args
    )
    proc = spawn(args, env, log=tmp / "hermes.log")
    url = f"http://127.0.0.1:{port}"
    try:
        ready_s = await wait_ready(url + "/healthz", proc)
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}\n{(tmp / 'hermes.log').read_text()[-3000:]}") from None
    return Hermes(proc, url, env, ready_s, memory_mb(proc.pid)[0])


async def start_on_rule_model(
    tmp: Path,
    model_delay: float,
    extra: dict[str, str],
    procs: list[subprocess.Popen[bytes]],
    program: tuple[str, ...] = ("-m", "app.cli"),
    **settings: str,
) -> tuple[subprocess.Popen[bytes], Hermes]:
    """The fake model answering each call by `RuleModel` after `model_delay` seconds, and
    `hermes serve` on it where a model failure is a failed turn (no `hermes/local` fallback);
    both are appended to `procs` as they start, for the caller to stop."""
    port_file = tmp / "llm.port"
    fake_args = ["bench/_fake_llm.py", "--port-file", str(port_file), "--rules"]
    fake = spawn(python(*fake_args, "--delay", str(model_delay)), {}, tmp / "llm.log")
    procs.append(fake)
    api_base = f"http://127.0.0.1:{await wait_port_file(port_file, fake)}/v1"
    hermes = await start_hermes(
        tmp, api_base, extra, program=program, HERMES_LOCAL_FALLBACK="false", **settings
    )
    procs.append(hermes.proc)
    return fake, hermes
