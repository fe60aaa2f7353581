"""Scenario files -> `Scenario`s, strictly: an unknown field, a wrong type or a missing
required field is a `ScenarioError` naming the file and the place, never a default."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from app.evaluation.scenario import (
    INTENTS,
    DbExpect,
    Decision,
    Expect,
    MemoryExpect,
    MemoryMatch,
    Reaction,
    Scenario,
    ScenarioError,
    SeedDocument,
    SeedMemory,
    Session,
    Simulation,
    ToolExpectation,
    Turn,
)
from app.evaluation.slots import SLOTS

HELDOUT_FOLDER = "heldout"
_TABLES = frozenset(
    {
        "customers", "orders", "order_items", "shipments", "tracking_events", "tickets",
        "refunds", "returns", "contact_changes", "password_resets", "emails",
    }
)  # fmt: skip


class _At:
    """Where in a file a value sits, for error messages: `evals/x.yaml: sessions[0].turns[2]`."""

    def __init__(self, path: str, where: str = "") -> None:
        self.path, self.where = path, where

    def __truediv__(self, part: str | int) -> _At:
        if isinstance(part, int):
            return _At(self.path, f"{self.where}[{part}]")
        return _At(self.path, f"{self.where}.{part}" if self.where else part)

    def fail(self, problem: str) -> ScenarioError:
        return ScenarioError(f"{self.path}: {self.where or 'top level'}", problem)


def _mapping(
    value: Any, at: _At, required: Iterable[str], optional: Iterable[str]
) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise at.fail(f"expected a mapping, got {type(value).__name__}")
    required, optional = set(required), set(optional)
    unknown = sorted(set(value) - required - optional)
    if unknown:
        raise at.fail(f"unknown field(s) {', '.join(map(str, unknown))}")
    missing = sorted(required - set(value))
    if missing:
        raise at.fail(f"missing required field(s) {', '.join(missing)}")
    return value


def _text(value: Any, at: _At) -> str:
    if isinstance(value, bool):
        raise at.fail('YAML reads yes/no/on/off/true/false as a boolean: quote it ("yes")')
    if not isinstance(value, str | int | float):
        raise at.fail(f"expected text, got {type(value).__name__}")
    if isinstance(value, int | float):
        # YAML read an unquoted number: 0-prefixed or long digit strings would be mangled.
        raise at.fail(f'quote numbers that are text: {value!r} -> "{value}"')
    if not value.strip():
        raise at.fail("must not be empty")
    return value


def _texts(value: Any, at: _At) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise at.fail("expected a list")
    return tuple(_text(v, at / i) for i, v in enumerate(value))


def _decision(value: Any, at: _At) -> Decision:
    if isinstance(value, str):
        value = {"decision": value}
    body = _mapping(value, at, ["decision"], ["reason"])
    if body["decision"] not in ("approve", "reject"):
        raise at.fail("decision must be approve or reject")
    reason = _text(body["reason"], at / "reason") if "reason" in body else None
    return Decision(body["decision"], reason)


def _tool(value: Any, at: _At) -> ToolExpectation:
    if isinstance(value, str):
        return ToolExpectation(_text(value, at))
    body = _mapping(value, at, ["tool"], ["status", "code"])
    status = _text(body["status"], at / "status") if "status" in body else None
    code = _text(body["code"], at / "code") if "code" in body else None
    return ToolExpectation(_text(body["tool"], at / "tool"), status, code)


def _memory_match(value: Any, at: _At) -> MemoryMatch:
    if isinstance(value, str):
        return MemoryMatch(_text(value, at))
    body = _mapping(value, at, ["key"], ["value", "min_confidence"])
    minimum = body.get("min_confidence")
    if minimum is not None and (isinstance(minimum, bool) or not isinstance(minimum, int | float)):
        raise at.fail("min_confidence must be a number")
    text = _text(body["value"], at / "value") if "value" in body else None
    return MemoryMatch(_text(body["key"], at / "key"), text, minimum)


def _memory(value: Any, at: _At) -> MemoryExpect:
    body = _mapping(value, at, [], ["stored", "absent", "recalled", "forgot"])
    lists = {}
    for name in ("stored", "absent"):
        items = body.get(name, [])
        if not isinstance(items, list):
            raise (at / name).fail("expected a list")
        lists[name] = tuple(_memory_match(v, at / name / i) for i, v in enumerate(items))
    forgot = body.get("forgot", False)
    if not isinstance(forgot, bool):
        raise (at / "forgot").fail("expected true or false")
    recalled = _texts(body.get("recalled", []), at / "recalled")
    return MemoryExpect(lists["stored"], lists["absent"], recalled, forgot)


def _rows(value: Any, at: _At) -> dict[str, tuple[dict[str, Any], ...]]:
    body = _mapping(value, at, [], _TABLES)
    out = {}
    for table, rows in body.items():
        if not isinstance(rows, list) or not all(isinstance(r, dict) and r for r in rows):
            raise (at / table).fail("expected a list of rows (column: value mappings)")
        out[table] = tuple(rows)
    return out


def _db(value: Any, at: _At) -> DbExpect:
    body = _mapping(value, at, [], ["created", "changed", "ignore"])
    ignore = _texts(body.get("ignore", []), at / "ignore")
    unknown = sorted(set(ignore) - _TABLES)
    if unknown:
        raise (at / "ignore").fail(f"unknown table(s) {', '.join(unknown)}")
    created = _rows(body.get("created", {}), at / "created")
    changed = _rows(body.get("changed", {}), at / "changed")
    return DbExpect(created, changed, frozenset(ignore))


_EXPECT = ["contains", "not_contains", "called", "not_called", "approval_requested",
           "language", "memory", "failed_turns", "cited", "not_cited", "no_citations"]  # fmt: skip


def _expect(value: Any, at: _At, *, allow_db: bool = False) -> tuple[Expect, DbExpect | None]:
    body = _mapping(value or {}, at, [], [*_EXPECT, *(["db"] if allow_db else [])])
    contains = []
    for i, item in enumerate(body.get("contains", [])):
        options = _texts(item, at / "contains" / i) if isinstance(item, list) else None
        contains.append(options or (_text(item, at / "contains" / i),))
    called = body.get("called", [])
    if not isinstance(called, list):
        raise (at / "called").fail("expected a list")
    language = body.get("language")
    if language not in (None, "zh", "en", "any"):
        raise (at / "language").fail("must be zh, en or any")
    failed = body.get("failed_turns")
    if failed is not None and (isinstance(failed, bool) or not isinstance(failed, int)):
        raise (at / "failed_turns").fail("must be a whole number")
    no_citations = body.get("no_citations", False)
    if not isinstance(no_citations, bool):
        raise (at / "no_citations").fail("expected true or false")
    cited = _texts(body.get("cited", []), at / "cited")
    if no_citations and cited:
        raise (at / "no_citations").fail("contradicts cited")
    expect = Expect(
        contains=tuple(contains),
        not_contains=_texts(body.get("not_contains", []), at / "not_contains"),
        called=tuple(_tool(v, at / "called" / i) for i, v in enumerate(called)),
        not_called=_texts(body.get("not_called", []), at / "not_called"),
        approval_requested=_texts(body.get("approval_requested", []), at / "approval_requested"),
        language=language,
        memory=_memory(body["memory"], at / "memory") if "memory" in body else None,
        failed_turns=failed,
        cited=cited,
        not_cited=_texts(body.get("not_cited", []), at / "not_cited"),
        no_citations=no_citations,
    )
    db = _db(body["db"], at / "db") if "db" in body else None
    return expect, db


def _turn(value: Any, at: _At) -> Turn:
    if isinstance(value, str):
        return Turn(_text(value, at))
    body = _mapping(value, at, ["say"], ["operator", "expect"])
    operator = _decision(body["operator"], at / "operator") if "operator" in body else None
    expect, _ = _expect(body.get("expect"), at / "expect")
    return Turn(_text(body["say"], at / "say"), operator, expect)


def _simulation(value: Any, at: _At) -> Simulation:
    body = _mapping(value, at, ["opening"], ["style", "reactions", "closing", "max_turns"])
    style = body.get("style", "sentence")
    if style not in ("bare", "unit", "sentence"):
        raise (at / "style").fail("must be bare, unit or sentence")
    reactions = []
    for i, item in enumerate(body.get("reactions", []) or []):
        r = _mapping(item, at / "reactions" / i, ["when", "say"], [])
        if r["when"] not in (*SLOTS, "any", "done"):
            raise (at / "reactions" / i / "when").fail(
                f"must be any, done or a slot ({', '.join(SLOTS)})"
            )
        reactions.append(Reaction(r["when"], _text(r["say"], at / "reactions" / i / "say")))
    max_turns = body.get("max_turns", 8)
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or not 1 <= max_turns <= 30:
        raise (at / "max_turns").fail("must be a whole number from 1 to 30")
    closing = _text(body["closing"], at / "closing") if "closing" in body else None
    return Simulation(
        _text(body["opening"], at / "opening"), style, tuple(reactions), closing, max_turns
    )


_FORMATS = ("markdown", "html", "text")


def _date(value: Any, at: _At) -> str:
    """YAML reads an unquoted 2025-11-30 as a date: either way, ISO text that parses."""
    if isinstance(value, date):  # datetime is a date too
        return value.isoformat()
    text = _text(value, at)
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise at.fail(f"expected an ISO date (2025-11-30), got {text!r}") from None
    return text


def _document(value: Any, at: _At) -> SeedDocument:
    optional = ["format", "language", "tags", "source_url", "valid_from", "valid_until"]
    body = _mapping(value, at, ["title", "content"], optional)
    fmt = body.get("format", "markdown")
    if fmt not in _FORMATS:
        raise (at / "format").fail(f"must be {', '.join(_FORMATS)}")
    language = body.get("language")
    if language not in (None, "zh", "en"):
        raise (at / "language").fail("must be zh or en")
    source_url = _text(body["source_url"], at / "source_url") if "source_url" in body else None
    dates = {k: _date(body[k], at / k) for k in ("valid_from", "valid_until") if k in body}
    return SeedDocument(
        title=_text(body["title"], at / "title"),
        content=_text(body["content"], at / "content"),
        format=fmt,
        language=language,
        tags=_texts(body.get("tags", []), at / "tags"),
        source_url=source_url,
        **dates,
    )


def _session(value: Any, at: _At) -> Session:
    body = _mapping(value, at, [], ["turns", "simulate", "operator", "expect", "documents"])
    if ("turns" in body) == ("simulate" in body):
        raise at.fail("give exactly one of turns or simulate")
    turns: tuple[Turn, ...] = ()
    if "turns" in body:
        if not isinstance(body["turns"], list) or not body["turns"]:
            raise (at / "turns").fail("expected a non-empty list")
        turns = tuple(_turn(t, at / "turns" / i) for i, t in enumerate(body["turns"]))
    simulate = _simulation(body["simulate"], at / "simulate") if "simulate" in body else None
    operator = _decision(body["operator"], at / "operator") if "operator" in body else None
    expect, _ = _expect(body.get("expect"), at / "expect")
    documents = body.get("documents", [])
    if not isinstance(documents, list):
        raise (at / "documents").fail("expected a list")
    seeds = tuple(_document(d, at / "documents" / i) for i, d in enumerate(documents))
    return Session(turns, simulate, operator, expect, seeds)


_TOP_REQUIRED = ["title", "language", "intents", "customer", "goal"]
_TOP_OPTIONAL = ["id", "tags", "tenant", "facts", "setup", "operator", "sessions", "turns",
                 "simulate", "expect"]  # fmt: skip


def parse_scenario(data: Any, path: str, *, heldout: bool = False) -> Scenario:
    at = _At(path)
    body = _mapping(data, at, _TOP_REQUIRED, _TOP_OPTIONAL)
    shapes = [k for k in ("sessions", "turns", "simulate") if k in body]
    if len(shapes) != 1:
        raise at.fail("give exactly one of sessions, turns or simulate")
    if "sessions" in body:
        if not isinstance(body["sessions"], list) or not body["sessions"]:
            raise (at / "sessions").fail("expected a non-empty list")
        sessions = tuple(_session(s, at / "sessions" / i) for i, s in enumerate(body["sessions"]))
    else:
        sessions = (_session({k: body[k] for k in shapes}, at),)
    if body["language"] not in ("zh", "en"):
        raise (at / "language").fail("must be zh or en")
    intents = _texts(body["intents"], at / "intents")
    unknown = sorted(set(intents) - set(INTENTS))
    if unknown or not intents:
        raise (at / "intents").fail(f"unknown or no intents {unknown}; known: {', '.join(INTENTS)}")
    facts_raw = body.get("facts", {}) or {}
    if not isinstance(facts_raw, dict):
        raise (at / "facts").fail("expected a mapping")
    facts = {str(k): _text(v, at / "facts" / str(k)) for k, v in facts_raw.items()}
    setup = _mapping(body.get("setup", {}) or {}, at / "setup", [], ["memories"])
    seeds = []
    for i, item in enumerate(setup.get("memories", []) or []):
        m = _mapping(item, at / "setup" / "memories" / i, ["key", "value"], ["confidence"])
        seeds.append(
            SeedMemory(
                m["key"],
                _text(m["value"], at / "setup" / "memories" / i),
                float(m.get("confidence", 1.0)),
            )
        )
    expect, db = _expect(body.get("expect"), at / "expect", allow_db=True)
    operator = _decision(body["operator"], at / "operator") if "operator" in body else None
    return Scenario(
        id=_text(body["id"], at / "id") if "id" in body else Path(path).stem,
        path=path,
        title=_text(body["title"], at / "title"),
        language=body["language"],
        intents=intents,
        customer=_text(body["customer"], at / "customer"),
        goal=_text(body["goal"], at / "goal"),
        sessions=sessions,
        tenant=_text(body.get("tenant", "default"), at / "tenant"),
        tags=_texts(body.get("tags", []), at / "tags"),
        facts=facts,
        setup_memories=tuple(seeds),
        operator=operator,
        expect=expect,
        db=db or DbExpect(),
        heldout=heldout,
    )


def load_file(path: Path) -> Scenario:
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        reason = " ".join(line.strip() for line in str(exc).splitlines())
        raise ScenarioError(str(path), f"cannot read: {reason}") from None
    return parse_scenario(data, str(path), heldout=HELDOUT_FOLDER in path.parts[:-1])


def load_scenarios(paths: Iterable[Path]) -> list[Scenario]:
    """Every `*.yaml` under the given folders (and the given files), sorted by path; ids must
    be unique."""
    scenarios: list[Scenario] = []
    for root in paths:
        if root.is_dir():
            scenarios += [load_file(p) for p in sorted(root.rglob("*.yaml"))]
        elif root.is_file():
            scenarios.append(load_file(root))
        else:
            raise ScenarioError(str(root), "no such file or folder")
    seen: dict[str, str] = {}
    for s in scenarios:
        if s.id in seen:
            raise ScenarioError(s.path, f"id {s.id} is also used by {seen[s.id]}")
        seen[s.id] = s.path
    return scenarios
