"""The planted-secret sweep: run the service with secret-looking settings and a customer who
gives away every kind of personal data, then look for those values everywhere the service
leaves data behind, and fail on any found outside the places the policy allows.

Planted: the model API key, the key pepper, the stream-token secret, the JWT secret, the
bootstrap admin key, a managed key created over the API, the secret of a desk sign-in's cookie
and its CSRF token, and a secret in an MCP server's `env` that its tool echoes back; a phone
number, an email address, an ID card number and a bank card number in the customer's message, in
the session's metadata and in tool arguments.

The flow, over HTTP with auth on: a desk sign-in with the managed key; a session with metadata;
a turn whose model reads an order, calls an MCP tool that returns its secret, files a ticket and
sends an email (both wait for an operator's approval, given over the API); a contact change the
customer confirms (the context is small, so earlier turns are folded into a model-written summary
first); a memory written by an operator; a handoff claimed by an agent; the session closed with
its wrap-up. Then every log record of the service, every column of every row of every table (and,
on SQLite, the bytes of the database file and its WAL) is searched.

`ALLOWED` lists each place a planted value may be, and why. A failure names the table, the
column and the row.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.demo.fixtures import DELIVERED_ORDER, LI_LEI
from app.demo.testing import SmtpSink
from app.llm.testing import FakeLLMServer, RecordedRequest, Reply, Step, ToolCall, ToolCalls
from app.testing import LiveService, serve, stream_turn
from tests.mcp_servers.processes import scripted_stdio
from tests.tools.mcp.helpers import CONNECT_S

# -- what is planted ---------------------------------------------------------------------------

MODEL_KEY = "sk-sweepmodel-7Qx9Lm2Vb4Nc8Zt1Kp"
PEPPER = "pepper-sweep-3f9a1c7e5b2d4a6c"
AUTH_SECRET = "auth-sweep-secret-8e7d6c5b4a3f2e1d0c9b"
JWT_SECRET = "jwt-sweep-secret-0a1b2c3d4e5f6a7b8c9d0e1f"
BOOTSTRAP_KEY = "sweep-admin-bootstrap-5h4g3f2e"
MCP_TOKEN = "crm-sweep-token-6d5c4b3a2f1e"

PHONE = "13912345678"
EMAIL = "wang.fang.sweep@example.com"
ID_CARD = "110101199003071234"
BANK_CARD = "6222021234567890123"

SECRETS = {
    "model API key": MODEL_KEY,
    "key pepper": PEPPER,
    "stream-token secret": AUTH_SECRET,
    "JWT secret": JWT_SECRET,
    "bootstrap key": BOOTSTRAP_KEY,
    "MCP env secret": MCP_TOKEN,
}
PII = {"phone": PHONE, "email": EMAIL, "ID card": ID_CARD, "bank card": BANK_CARD}

CUSTOMER_SAYS = (
    f"Order {DELIVERED_ORDER} never arrived. I am Li Lei, ID card {ID_CARD}, call me on {PHONE}, "
    f"refund to card {BANK_CARD}, and email the details to {EMAIL}."
)

# -- where a planted value may be, and why ------------------------------------------------------


@dataclass(frozen=True)
class Allowed:
    table: str
    column: str
    values: frozenset[str]  # which planted values (PII kinds) may be there
    why: str
    where: str | None = None  # a condition on the row (a column's value), when only some rows


EVERY_PII = frozenset(PII)

ALLOWED = (
    Allowed(
        "messages",
        "content",
        EVERY_PII,
        "the conversation itself: the customer's own words, kept for the model, the agent desk "
        "and the customer's history; erased with the session",
        where="role=user",
    ),
    Allowed(
        "messages",
        "content",
        frozenset({"email"}),
        "the bot's reply as the customer reads it (operators see the truth: the customer checks "
        "the address the email went to); erased with the session",
        where="role=assistant",
    ),
    Allowed(
        "events",
        "data",
        frozenset({"email"}),
        "the same reply as streamed (message.delta, message.completed): a reconnecting client "
        "must read what it was shown",
        where="type=message.delta|message.completed",
    ),
    Allowed(
        "approvals",
        "arguments_full",
        EVERY_PII,
        "what the tool runs with once approved; shown to operators only, each read audited",
    ),
    Allowed(
        "confirmations",
        "arguments",
        frozenset({"email"}),
        "what the tool runs with once the customer says yes (the read-back they hear is masked)",
    ),
    *(
        Allowed(
            table,
            column,
            frozenset({"email"}),
            "a fact about the customer stored on purpose (an operator's, and the contact change "
            "the customer confirmed), its history and search index; forgotten for good on request",
        )
        for table, column in (
            ("memories", "value"),
            ("memories", "search_text"),
            ("memory_fts", "search_text"),
            ("memory_history", "new_value"),
            ("memory_history", "old_value"),
        )
    ),
)

# Demo company system (the tools' back end, not Hermes's own data): the email that was sent is
# the side effect the operator approved.
DEMO_ALLOWED = (
    Allowed("emails", "*", EVERY_PII, "the email an operator approved, as sent"),
    *(
        Allowed(table, column, frozenset({"email"}), "the contact change the customer confirmed")
        for table, column in (("customers", "email"), ("contact_changes", "new_value"))
    ),
)

# Log records of the test's own SMTP server (standing in for the company's mail relay, which
# receives the approved email), not of Hermes.
NOT_THE_SERVICE = ("mail.log",)


USED: set[Allowed] = set()  # the rules that allowed something in this run


def _allowed(table: str, column: str, row: dict[str, Any], kind: str, rules: Any) -> bool:
    for rule in rules:
        if rule.table != table or rule.column not in (column, "*") or kind not in rule.values:
            continue
        name, _, options = (rule.where or "").partition("=")
        if rule.where is None or str(row.get(name)) in options.split("|"):
            USED.add(rule)
            return True
    return False


# -- the service ------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    with SmtpSink() as server:
        yield server


@pytest.fixture
async def svc(
    make_settings: Any,
    sink: SmtpSink,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> AsyncIterator[LiveService]:
    caplog.set_level(logging.DEBUG)  # every record any logger of the service makes
    monkeypatch.setenv("SWEEP_CRM_TOKEN", MCP_TOKEN)
    config = tmp_path / "mcp_servers.json"
    server = scripted_stdio(env={"API_TOKEN": "${SWEEP_CRM_TOKEN}"}, risk={"get_env": "read"})
    config.write_text(json.dumps({"mcpServers": {"crm": server}}))
    settings = make_settings(
        model_api_key=MODEL_KEY,
        key_pepper=PEPPER,
        auth_secret=AUTH_SECRET,
        jwt_secret=JWT_SECRET,
        auth="api_key",
        api_keys=[f"default:admin:{BOOTSTRAP_KEY}"],  # the demo data's tenant
        nlu_min_confidence=1.0,  # every tool stays offered, whatever the message reads as
        # A small context, so later turns fold earlier ones into the snapshot's summary.
        context_budget_tokens=1000,
        context_keep_turns=1,
        mcp_config=config,
        smtp_host=sink.host,
        smtp_port=sink.port,
        log_level="DEBUG",
    )
    async with serve(settings) as service:
        service.client.headers["Authorization"] = f"Bearer {BOOTSTRAP_KEY}"
        yield service


@contextlib.contextmanager
def _client_logs_quiet() -> Iterator[None]:
    """The test's own HTTP client (the desk's browser) logs the response headers it receives,
    its cookie among them, at DEBUG; the service makes no outbound call meanwhile."""
    client_log = logging.getLogger("httpcore")
    level = client_log.level
    client_log.setLevel(logging.INFO)
    try:
        yield
    finally:
        client_log.setLevel(level)


async def _run_the_flow(svc: LiveService, fake_llm: FakeLLMServer) -> dict[str, str]:
    """The representative flow; returns secrets only known once it ran (the managed key)."""
    created = await svc.client.post("/v1/keys", json={"role": "agent", "name": "desk"})
    assert created.status_code == 201, created.text
    managed = created.json()["key"]
    agent = {"Authorization": f"Bearer {managed}"}
    # The desk signs in with it: its sign-in is stored, its cookie's secret only as a digest.
    with _client_logs_quiet():
        async with httpx.AsyncClient(base_url=svc.base_url) as desk:
            signed_in = await desk.post("/v1/desk/login", json={"api_key": managed})
            assert signed_in.status_code == 200, signed_in.text
            assert (await desk.get("/v1/desk/session")).status_code == 200
            cookie_secret = desk.cookies["hermes_desk"].partition(".")[2]
            csrf = signed_in.json()["csrf_token"]

    manager = svc.runtime.mcp
    assert manager is not None
    assert await manager.wait_connected("crm", CONNECT_S), manager.server_status("crm")

    session = await svc.client.post(
        "/v1/sessions",
        json={"user_id": LI_LEI, "metadata": {"channel": "web", "callback": PHONE, "id": ID_CARD}},
    )
    assert session.status_code == 201, session.text
    session_id = session.json()["id"]

    # The model's answers in order; a request to fold earlier turns into the running summary
    # (the context is small) is answered apart, with the customer's details in it.
    script: deque[Step] = deque()

    def respond(request: RecordedRequest) -> Step | None:
        if "running summary" in str(request.messages[0].get("content")):
            return Reply(f"Customer Li Lei, phone {PHONE}, card {BANK_CARD}, asked for a refund.")
        return script.popleft() if script else None

    fake_llm.responder = respond
    ticket = f"Lost parcel; customer ID {ID_CARD}, card {BANK_CARD}, phone {PHONE}"
    email = {"to": EMAIL, "subject": "Your refund", "body": f"Card {BANK_CARD}; we call {PHONE}."}
    script.extend(
        (
            ToolCalls(
                ToolCall("query_order_status", {"order_id": DELIVERED_ORDER}, id="c_order"),
                ToolCall("mcp__crm__get_env", {"name": "API_TOKEN"}, id="c_mcp"),
            ),
            ToolCalls(
                ToolCall(
                    "create_ticket", {"category": "complaint", "summary": ticket}, id="c_ticket"
                )
            ),
            ToolCalls(ToolCall("send_email", email, id="c_email")),
            Reply(f"I have filed a ticket and emailed the details to {EMAIL}."),
        )
    )
    events = await stream_turn(svc.client, session_id, CUSTOMER_SAYS, decide="approve")
    assert events[-1].event == "turn.completed", [(e.event, e.data) for e in events]
    completed = {e.data["call_id"]: e.data for e in events if e.event == "tool.completed"}
    assert {k: v["status"] for k, v in completed.items()} == dict.fromkeys(
        ("c_order", "c_mcp", "c_ticket", "c_email"), "success"
    ), json.dumps(completed, indent=1)[:3000]
    # The MCP tool returned its secret (the sweep finds out whether it was masked).
    assert completed["c_mcp"]["result"]["data"]["result"], completed["c_mcp"]

    # A change the customer confirms: the runtime reads it back (masked), they say yes, it runs.
    change = {"field": "email", "value": EMAIL}
    script.append(ToolCalls(ToolCall("update_contact_info", change, id="c_contact")))
    asked = await stream_turn(svc.client, session_id, f"Change my email to {EMAIL} please.")
    assert any(e.event == "confirmation.requested" for e in asked), [
        (e.event, e.data) for e in asked
    ]
    script.append(Reply("Your email address is changed."))
    # The MCP output left the session tainted: the change also waits for an operator.
    confirmed = await stream_turn(svc.client, session_id, "yes", decide="approve")
    changed = [e.data for e in confirmed if e.event == "tool.completed"]
    assert [(c["tool"], c["status"]) for c in changed] == [("update_contact_info", "success")]

    memory = await svc.client.post(
        f"/v1/users/{LI_LEI}/memories", json={"key": "contact_email", "value": EMAIL}
    )
    assert memory.status_code == 201, memory.text

    handoff = await svc.client.post(
        f"/v1/sessions/{session_id}/handoff", json={"reason": "wants a person"}, headers=agent
    )
    assert handoff.status_code == 202, handoff.text
    claimed = await svc.client.post(f"/v1/sessions/{session_id}/handoff/claim", headers=agent)
    assert claimed.status_code == 200, claimed.text
    closed = await svc.client.post(
        f"/v1/sessions/{session_id}/close", json={"disposition": "resolved"}, headers=agent
    )
    assert closed.status_code == 200, closed.text
    return {"managed key": managed, "desk cookie's secret": cookie_secret, "desk CSRF": csrf}


# -- the sweep ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.what} in {self.where}"


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("latin-1")
    return "" if value is None else str(value)


def _sweep_rows(
    tables: dict[str, tuple[list[str], list[tuple[Any, ...]]]],
    planted: dict[str, str],
    rules: Any,
    database: str,
) -> list[Found]:
    found = []
    for table, (columns, rows) in sorted(tables.items()):
        for number, values in enumerate(rows, 1):
            row = dict(zip(columns, values, strict=True))
            key = f"{columns[0]}={values[0]!r}" if columns else f"#{number}"
            if "type" in row:
                key += f", type={row['type']!r}"
            for column, value in row.items():
                text = _text(value)
                for kind, secret in planted.items():
                    if secret in text and not _allowed(table, column, row, kind, rules):
                        where = f"{database} table {table}, column {column}, row {number} ({key})"
                        found.append(Found(where, kind))
    return found


def _sqlite_tables(path: Path) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        tables = {}
        for name in names:
            cursor = conn.execute(f'SELECT * FROM "{name}"')
            columns = [d[0] for d in cursor.description]
            tables[name] = (columns, [tuple(r) for r in cursor.fetchall()])
        return tables
    finally:
        conn.close()


async def _postgres_tables(url: str) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    import psycopg

    tables = {}
    async with await psycopg.AsyncConnection.connect(url) as conn:
        listed = await conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
        )
        for (name,) in await listed.fetchall():
            cursor = await conn.execute(f'SELECT * FROM "{name}"')
            columns = [d.name for d in cursor.description or ()]
            tables[name] = (columns, [tuple(r) for r in await cursor.fetchall()])
    return tables


def _sweep_logs(records: list[logging.LogRecord], planted: dict[str, str]) -> list[Found]:
    found = []
    formatter = logging.Formatter()
    for record in records:
        if record.name.startswith(NOT_THE_SERVICE):
            continue
        text = formatter.format(record)  # the message, its arguments and any traceback
        for kind, secret in planted.items():
            if secret in text:
                where = f"log record {record.name}:{record.levelname} {text[:200]!r}"
                found.append(Found(where, kind))
    return found


def _sweep_bytes(path: Path, planted: dict[str, str]) -> list[Found]:
    if not path.exists():
        return []
    data = path.read_bytes()
    return [Found(f"the bytes of {path.name}", k) for k, v in planted.items() if v.encode() in data]


async def test_planted_secrets_are_found_only_where_the_policy_allows(
    svc: LiveService,
    fake_llm: FakeLLMServer,
    caplog: pytest.LogCaptureFixture,
    sink: SmtpSink,
    database_url: str | None,
) -> None:
    USED.clear()
    secrets = {**SECRETS, **await _run_the_flow(svc, fake_llm)}
    planted = {**secrets, **PII}
    settings = svc.runtime.settings
    # The flow did what it claims: the email went out with the real values.
    [mail] = sink.received()
    assert mail["To"] == EMAIL and BANK_CARD in mail.get_content()

    if database_url is None:
        tables = _sqlite_tables(settings.storage.db_path)
        # Pages hold allowed places too (the customer's message): the files' bytes are searched
        # for the secrets, which have no allowed place at all.
        found = _sweep_bytes(settings.storage.db_path, secrets)
        found += _sweep_bytes(Path(f"{settings.storage.db_path}-wal"), secrets)
    else:
        tables = await _postgres_tables(database_url)
        found = []
    assert "messages" in tables and "approvals" in tables and "tool_calls" in tables
    found += _sweep_rows(tables, planted, ALLOWED, "hermes")
    found += _sweep_rows(_sqlite_tables(settings.demo.db_path), planted, DEMO_ALLOWED, "demo")
    found += _sweep_logs(caplog.records, planted)
    assert caplog.records, "no log record was captured: the sweep would prove nothing"
    assert not found, "planted values outside the allowed places:\n" + "\n".join(
        str(f) for f in found
    )
    # Every allowed place holds a planted value in this flow: the list says what is, not what
    # once was (PostgreSQL has no separate full-text table).
    expected = {r for r in ALLOWED if r.table in tables} | set(DEMO_ALLOWED)
    assert expected <= USED, expected - USED
