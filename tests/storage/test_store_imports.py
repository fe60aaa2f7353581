"""Stores stay apart: a module of `app/storage` uses another store's module only for the
primitives listed here (storing or reading one row of another table, constants of the retention
rules, the infrastructure every store builds on), never for another store's transitions.

What a claim or an interruption decides across tables (a human agent holding the session fails
queued turns, a stopped turn's steps fail and its approvals expire, the lease is taken first) is
composed in the conversation layer (`app.conversation.claims`, `app.conversation.interruptions`)
from each store's own operations; a store that imported another's transitions would be deciding
it again where a reader does not look. The check reads the source with `ast`, like
tests/test_layers.py: a name imported from a module, or an attribute read of a module imported
whole (`from app.storage import audit` ... `audit.record`), is what a module uses.
"""

from __future__ import annotations

import ast
import re

from tests.test_layers import APP, Module, _synthetic, app_modules

# Anything of these: the transaction, the port and its engines, records, fences, the writer and
# the handle every write names (its session's lane, its lease), the keyset page's query shape.
INFRASTRUCTURE = (
    "app.storage.engine",
    "app.storage.fence",
    "app.storage.migrations",
    "app.storage.outage",
    "app.storage.paging",
    "app.storage.periodic",
    "app.storage.port",
    "app.storage.postgres",
    "app.storage.records",
    "app.storage.session_writer",
    "app.storage.sqlite",
    "app.storage.tx",
    "app.storage.writer",
)

# Of the stores, only these: each writes or reads one row of its table (or names how), and
# decides nothing for the caller.
PRIMITIVES: dict[str, frozenset[str]] = {
    "app.storage.audit": frozenset({"record"}),
    "app.storage.confirmations": frozenset({"confirmed_call_id"}),
    "app.storage.event_log": frozenset(
        {"SELECT_EVENTS", "SESSION_KEY", "drop_superseded", "payloads"}
    ),
    "app.storage.messages": frozenset({"insert_message"}),
    "app.storage.purge": frozenset({"RetentionPolicy"}),
    # The retention rules' tables and batches: purge runs them, the export reads them.
    "app.storage.retention": frozenset(
        {
            "AGE_RULES",
            "BY_AGE",
            "BY_EXPIRY",
            "EXPIRY_RULES",
            "SESSION_RULES",
            "Batch",
            "archived_index",
            "purge_age_batch",
            "purge_expired_batch",
            "purge_sessions_batch",
        }
    ),
    "app.storage.sessions": frozenset({"find_session"}),
    "app.storage.steps": frozenset({"held_result", "referenced_event"}),  # for the export
    "app.storage.usage": frozenset({"SESSION_USAGE", "Usage", "add_tenant_usage"}),
}


def _infrastructure(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in INFRASTRUCTURE)


def used_of_other_stores(module: Module, known: set[str]) -> list[tuple[int, str, str]]:
    """(line, store module, name) for each name `module` uses of another storage module."""
    tree = ast.parse(module.source, module.path)
    used: list[tuple[int, str, str]] = []
    whole: dict[str, str] = {}  # local name -> a storage module imported whole
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("app.storage."):
                    # `import app.storage.x` hides what it uses behind a dotted path: refuse it.
                    used.append((node.lineno, alias.name, "*"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("app.storage"):
            base = node.module or ""
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    whole[alias.asname or alias.name] = f"{base}.{alias.name}"
                else:
                    used.append((node.lineno, base, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            target = whole.get(node.value.id)
            if target is not None:
                used.append((node.lineno, target, node.attr))
    return [
        (line, target, name)
        for line, target, name in used
        if target != module.name and not _infrastructure(target)
    ]


def crossings(modules: list[Module]) -> list[str]:
    known = {m.name for m in modules}
    found = []
    for module in modules:
        if not module.name.startswith("app.storage."):
            continue
        for line, target, name in used_of_other_stores(module, known):
            if name not in PRIMITIVES.get(target, frozenset()):
                found.append(f"{module.path}:{line}: {target}.{name}")
    return sorted(set(found))


def test_no_store_uses_another_stores_transitions() -> None:
    found = crossings(app_modules())
    assert found == [], (
        "a store uses another store's operations (compose them in app/conversation, or add a "
        "true primitive to PRIMITIVES):\n" + "\n".join(found)
    )


def tables_named(source: str) -> set[str]:
    """The tables the SQL in `source`'s string literals reads or writes."""
    literals = " ".join(
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    )
    return set(re.findall(r"\b(?:FROM|JOIN|UPDATE|INTO)\s+([a-z_]+)", literals))


def test_the_turn_store_reads_and_writes_turns_and_their_session_only() -> None:
    # Not the handoffs (is an agent holding the session?), the steps and approvals a stopped
    # turn leaves open, nor the lease: app.conversation.claims and .interruptions ask their
    # stores. A user message, and an assistant one, are stored with their turn.
    source = (APP / "storage" / "turns.py").read_text("utf-8")
    assert tables_named(source) <= {"turns", "sessions", "messages"}, tables_named(source)


def test_the_check_sees_names_and_attributes_of_modules_imported_whole() -> None:
    modules = [
        _synthetic("app.storage.steps", "def fail_for_resume(): ...\n"),
        _synthetic("app.storage.messages", "def insert_message(): ...\n"),
        _synthetic("app.storage.tx", "class Tx: ...\n"),
        _synthetic(
            "app.storage.turns",
            "from app.storage import steps\n"
            "from app.storage.messages import insert_message\n"
            "from app.storage.tx import Tx\n"
            "from app.storage.approvals import expire_pending_of_turn\n"
            "def interrupt(tx: Tx) -> None:\n"
            "    steps.fail_for_resume(tx)\n"
            "    insert_message(tx)\n",
        ),
    ]
    assert crossings(modules) == [
        "app/storage/turns.py:4: app.storage.approvals.expire_pending_of_turn",
        "app/storage/turns.py:6: app.storage.steps.fail_for_resume",
    ]
