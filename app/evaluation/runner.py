"""Run scenarios against a service and judge them.

In process (the default): per scenario the real app on a loopback port with a fresh SQLite
file and a fresh copy of the demo database (generated once per run from its seed), with the
model the environment configures (`hermes/local` unless HERMES_MODEL says otherwise).
`app.evaluation.schedule` spreads scenarios over worker processes and over concurrent services
within each.

Remote: a running service at a URL with an operator's API key; the demo database is diffed
only when its file is given, and then scenarios run one at a time.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.evaluation.checks import Failure, Played, judge_scenario
from app.evaluation.client import ServiceClient
from app.evaluation.dbdiff import Snapshot, diff, snapshot
from app.evaluation.play import play
from app.evaluation.scenario import Scenario

TURN_READ_TIMEOUT_S = 300.0  # a turn's stream may wait for a slow model or an approval


@dataclass(frozen=True)
class Remote:
    url: str
    api_key: str | None = None
    demo_db: Path | None = None


@dataclass(frozen=True)
class InProcess:
    # Settings overrides on top of the environment (e.g. {"model": "openai/gpt-4o-mini"}).
    overrides: dict[str, Any] = field(default_factory=dict)
    demo_seed: int | None = None  # None: the generator's default seed


Target = Remote | InProcess


@dataclass
class RunResult:
    scenario: str
    run: int
    failures: list[Failure]
    seconds: float
    transcript: list[tuple[str, str]]  # (customer, agent) per turn

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def forbidden_write(self) -> bool:
        return any(f.kind == "forbidden_write" for f in self.failures)


def _transcript(played: Played) -> list[tuple[str, str]]:
    return [(t.say, t.reply) for s in played.sessions for t in s.turns]


def _result(
    scenario: Scenario, run: int, started: float, played: Played | None, error: str | None
) -> RunResult:
    if played is None:
        failures = [Failure("error", "scenario", error or "the scenario did not run")]
        return RunResult(scenario.id, run, failures, time.perf_counter() - started, [])
    return RunResult(
        scenario.id,
        run,
        judge_scenario(scenario, played),
        time.perf_counter() - started,
        _transcript(played),
    )


class InProcessHarness:
    """One process's means to run scenarios in process: the demo template and its snapshot,
    and an SMTP sink so that emails the scenarios approve are really sent (and recorded)."""

    def __init__(self, target: InProcess, template: Path) -> None:
        self.target = target
        self.template = template
        self.before: Snapshot = snapshot(template)
        self._sink = _smtp_sink()

    def close(self) -> None:
        if self._sink is not None:
            self._sink.stop()

    async def run(self, scenario: Scenario, run: int) -> RunResult:
        from app.settings import load_settings
        from app.testing import serve

        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="hermes-eval-") as tmp:
            demo = Path(tmp) / "demo.db"
            shutil.copyfile(self.template, demo)
            key = secrets.token_urlsafe(24)
            smtp = (
                {}
                if self._sink is None
                else {"smtp_host": self._sink.host, "smtp_port": self._sink.port}
            )
            settings = load_settings(
                **{
                    "log_level": "ERROR",
                    **self.target.overrides,
                    **smtp,
                    "db_path": Path(tmp) / "hermes.db",
                    "demo_db_path": demo,
                    "auth": "api_key",
                    "api_keys": [f"{scenario.tenant}:operator:{key}"],
                    "redis_url": None,
                    "database_url": None,
                }
            )
            played, error = None, None
            async with serve(settings) as service:
                service.client.headers["X-API-Key"] = key
                service.client.timeout = httpx.Timeout(30.0, read=TURN_READ_TIMEOUT_S)
                try:
                    played = await play(scenario, ServiceClient(service.client))
                except Exception as exc:  # judged as a failed scenario, the run goes on
                    error = f"{type(exc).__name__}: {exc}"
            if played is not None:
                played.diff = diff(self.before, snapshot(demo))
        return _result(scenario, run, started, played, error)


def _smtp_sink() -> Any:
    try:
        from app.demo.testing import SmtpSink

        return SmtpSink().start()
    except ImportError:  # aiosmtpd is a dev extra: without it emails fail to send, recorded
        return None


async def run_remote(target: Remote, scenario: Scenario, run: int) -> RunResult:
    started = time.perf_counter()
    headers = {"X-API-Key": target.api_key} if target.api_key else {}
    timeout = httpx.Timeout(30.0, read=TURN_READ_TIMEOUT_S)
    before = snapshot(target.demo_db) if target.demo_db is not None else None
    played, error = None, None
    async with httpx.AsyncClient(base_url=target.url, headers=headers, timeout=timeout) as http:
        client = ServiceClient(http)
        try:
            await client.clear_memories(scenario.customer)
            played = await play(scenario, client)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
    if played is not None and before is not None and target.demo_db is not None:
        played.diff = diff(before, snapshot(target.demo_db))
    return _result(scenario, run, started, played, error)


@contextlib.contextmanager
def demo_template(seed: int | None) -> Iterator[Path]:
    from app.demo.generator import DEFAULT_SEED, regenerate

    with tempfile.TemporaryDirectory(prefix="hermes-eval-demo-") as tmp:
        path = Path(tmp) / "demo.db"
        regenerate(path, DEFAULT_SEED if seed is None else seed)
        yield path
