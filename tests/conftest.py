"""Shared fixtures: a real fake-LLM server, settings on a temp database, a live service.

The database is SQLite unless a test directory's conftest parametrises `backend` (the storage
and API suites run on both SQLite and PostgreSQL): then `make_settings` and `open_db` give a
fresh PostgreSQL database per test for the "postgres" run.
"""

from __future__ import annotations

import os
import shutil

# LiteLLM reads these once, at import: fast retries in tests, no price-map download.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("INITIAL_RETRY_DELAY", "0.01")
os.environ.setdefault("MAX_RETRY_DELAY", "0.05")
os.environ.setdefault("JITTER", "0")

# numpy and OpenBLAS pick their math kernels by CPU when they load; the NLU tests retrain the
# committed models and compare bytes, so the suite runs on the kernels `hermes nlu train` uses
# on every machine (app/nlu/kernels.py), set here before anything loads numpy.
from app.nlu.kernels import PORTABLE_KERNELS

os.environ.setdefault("NPY_DISABLE_CPU_FEATURES", PORTABLE_KERNELS["NPY_DISABLE_CPU_FEATURES"])
os.environ.setdefault("OPENBLAS_CORETYPE", PORTABLE_KERNELS["OPENBLAS_CORETYPE"])

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.llm.testing import FakeLLMServer
from app.settings import Settings
from app.storage.session_writer import SessionWriter
from app.testing import LiveService, SseEvent, serve
from tests.postgres import pg_url  # noqa: F401  # a fixture: a fresh PostgreSQL database

for _name in list(os.environ):
    if _name.startswith("HERMES_"):
        del os.environ[_name]


@pytest.fixture(scope="session")
def llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def fake_llm(llm_server: FakeLLMServer) -> Iterator[FakeLLMServer]:
    llm_server.reset()
    yield llm_server
    llm_server.reset()


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo dataset, generated once per test run and copied into each test's directory."""
    from app.demo.generator import regenerate

    path = tmp_path_factory.mktemp("demo") / "demo.db"
    regenerate(path)
    return path


def copy_demo(template: Path, target: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        source = template.with_name(template.name + suffix)
        if source.exists():
            shutil.copyfile(source, target.with_name(target.name + suffix))
    return target


@pytest.fixture
def backend() -> str:
    """The storage engine a test runs on; tests/api and tests/storage run on both."""
    return "sqlite"


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest) -> str | None:
    """A fresh PostgreSQL database's URL on the "postgres" backend, None on SQLite."""
    if backend == "sqlite":
        return None
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
async def open_db(database_url: str | None, tmp_path: Path) -> AsyncIterator[Any]:
    """`await open_db(name)`: an open, migrated database of the test's backend."""
    from app.settings import PROJECT_ROOT
    from app.storage.port import Database
    from app.storage.postgres.database import PostgresDatabase
    from app.storage.sqlite import SqliteDatabase

    opened: list[Database] = []

    async def open_one(name: str = "t.db", **sqlite_options: Any) -> Database:
        db: Database
        if database_url is None:
            db = SqliteDatabase(
                tmp_path / name, migrations_dir=PROJECT_ROOT / "migrations", **sqlite_options
            )
        else:
            # Several writer connections, as a service runs with (HERMES_DB_WRITE_CONNECTIONS).
            db = PostgresDatabase(
                database_url,
                migrations_dir=PROJECT_ROOT / "migrations/postgres",
                write_connections=4,
            )
        await db.open()
        opened.append(db)
        return db

    yield open_one
    for db in reversed(opened):
        await db.close()


@pytest.fixture
def make_settings(
    tmp_path: Path, fake_llm: FakeLLMServer, demo_template: Path, database_url: str | None
) -> Any:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "database_url": database_url,
            "db_path": tmp_path / "hermes.db",
            "demo_db_path": copy_demo(demo_template, tmp_path / "demo.db"),
            "model": "openai/test-model",
            "model_api_base": fake_llm.url,
            "model_api_key": "sk-test",
            "llm_retries": 1,
            # Tests of failures need failures; the local fallback has tests of its own.
            "local_fallback": False,
            "llm_timeout_s": 10,
            "sse_keepalive_s": 15,
            "log_json": False,
            # No demo documents loaded on start (on PostgreSQL that is most of a start-up): the
            # tests of knowledge turns ask for them (DEMO_KNOWLEDGE).
            "knowledge_dir": "",
        }
        values.update(overrides)
        return Settings(**values)

    return make


DEMO_KNOWLEDGE = str(Path(__file__).resolve().parents[1] / "data" / "knowledge")


@pytest.fixture
def settings(make_settings: Any) -> Settings:
    return make_settings()


@pytest.fixture
async def service(settings: Settings) -> AsyncIterator[LiveService]:
    async with serve(settings) as svc:
        yield svc


async def new_session(svc: LiveService, user_id: str = "u1", **metadata: Any) -> str:
    response = await svc.client.post(
        "/v1/sessions", json={"user_id": user_id, "metadata": metadata}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def a_turn(db: Any, tenant_id: str, session_id: str) -> str:
    """A real (queued) turn of the session, for code that writes a turn's events outside a
    running service: `Tx.emit` stores a turn's events under its number in the session."""
    from app.storage.turns import TurnStore

    accepted = await TurnStore(db).accept(
        SessionWriter(session_id),
        tenant_id=tenant_id,
        session_id=session_id,
        content="hello",
        token_estimate=1,
        client_message_id=None,
        policy="enqueue",
        max_queued=100,
    )
    assert accepted is not None
    return accepted.turn.id


FIXTURE_TOOLS = Path(__file__).parent / "tools" / "fixture_tools.yaml"


@pytest.fixture
async def tools_service(make_settings: Any) -> AsyncIterator[LiveService]:
    """The service with the recording test tools (tests/tools/fixture_tools.yaml), reset."""
    from tests.tools.fixture_tools import REC

    REC.reset()
    async with serve(make_settings(tools_file=FIXTURE_TOOLS)) as service:
        yield service
    REC.reset()


def replay_of(live: list[SseEvent]) -> list[tuple[str | None, str, Any]]:
    """What replaying these live events of completed turns gives (README, "Following a
    session"): the same events, byte for byte, less those the turn's end deleted: its
    `message.delta`s, each step's `step.updated`s but its last, each `tool.started` whose
    `tool.completed` came."""
    return [(e.id, e.event, e.data) for i, e in enumerate(live) if not superseded(e, live[i + 1 :])]


def superseded(event: SseEvent, later: list[SseEvent]) -> bool:
    """Whether a completed turn's end deletes `event`, given the turn's `later` events."""
    if event.event == "message.delta":
        return True
    by = {
        "step.updated": ("step.updated", "step_id"),
        "tool.started": ("tool.completed", "call_id"),
    }
    if event.event not in by:
        return False
    kind, key = by[event.event]
    return any(
        e.event == kind
        and e.data.get("turn_id") == event.data["turn_id"]
        and e.data.get(key) == event.data[key]
        for e in later
    )


def assert_exactly_once(got: list[SseEvent], stored: list[SseEvent]) -> None:
    """`got` (what a client followed, maybe across reconnects) is in order without duplicates,
    and holds every event of `stored` (a replay of the log after the end) as it is stored; what
    else it holds are events the end of their turn deleted."""
    ids = [int(e.id or 0) for e in got]
    assert ids == sorted(set(ids)), "a duplicate or out of order"
    have = {int(e.id or 0): (e.event, e.data) for e in got}
    first = ids[0]
    kept = [(int(e.id or 0), (e.event, e.data)) for e in stored if int(e.id or 0) >= first]
    assert [(i, have.get(i)) for i, _ in kept] == kept, "an event was missed or differs"
    gone = {int(e.id or 0) for e in stored}
    assert all(
        got[i].event in {"message.delta", "step.updated", "tool.started"}
        and superseded(got[i], got[i + 1 :])
        for i, n in enumerate(ids)
        if n not in gone
    ), "a non-superseded hole"


def reply_shown(events: list[SseEvent]) -> str:
    """The reply a client ends with: `message.completed`'s text; the deltas it saw must be a
    beginning of it (a finished turn replays without its deltas)."""
    text = "".join(e.data["text"] for e in events if e.event == "message.delta")
    (final,) = [e.data["text"] for e in events if e.event == "message.completed"]
    assert final.startswith(text), (text, final)
    return str(final)
