"""The layer order of `app/`: a package imports only from rows below its own, and the modules'
import-time graph has no cycle.

The check reads the source with `ast`, so it sees every `app.*` import: at the top of a module,
inside functions, and under `TYPE_CHECKING`; a lazy import is still a dependency. The order is
the one in the README's layout section, bottom row first.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"

# Bottom-up. A module belongs to the row of its package (`app.memory.recall` -> "memory") or,
# at the top of `app/`, of its own name (`app.settings` -> "settings"); "app" is
# `app/__init__.py`, which holds only the version. Packages in one row do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("app", "errors"),
    ("settings", "principal", "text", "events"),
    ("storage",),
    ("nlu", "memory", "resilience", "observability", "knowledge"),
    ("llm",),
    ("tools",),
    # The demo shop: one deployment's backend and its tools, built on the tools layer like any
    # call centre's own; nothing below it knows it.
    ("demo",),
    ("workflow",),
    ("conversation",),
    ("runtime",),
    ("api",),
    ("main",),  # the ASGI application
    ("testing",),  # the whole-service harness for tests, benches and the evaluation
    # `hermes eval`: scenarios played against the service over its API; `hermes chat`
    ("evaluation", "chat"),
    ("cli",),  # the command line
)
RANK = {name: row for row, names in enumerate(LAYERS) for name in names}


@dataclass(frozen=True)
class Module:
    name: str  # dotted: "app.memory.recall"
    path: str  # for messages: "app/memory/recall.py"
    source: str

    @property
    def is_package(self) -> bool:
        return self.path.endswith("__init__.py")


@dataclass(frozen=True)
class Import:
    target: str  # the module imported ("app.memory.recall"), or "app" for `from app import x`
    line: int


def app_modules() -> list[Module]:
    modules = []
    for path in sorted(APP.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules.append(Module(name, str(path.relative_to(ROOT)), path.read_text("utf-8")))
    return modules


def layer_key(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(body: list[ast.stmt], *, import_time: bool) -> list[ast.stmt]:
    """Every statement, or (`import_time`) those that run when the module is imported: not in
    functions, not under `if TYPE_CHECKING:`."""
    if not import_time:
        return [n for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.stmt)]
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
            out += _statements(stmt.orelse, import_time=True)
            continue
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(stmt, field, []):
                nested = isinstance(child, ast.excepthandler | ast.match_case)
                out += _statements(child.body if nested else [child], import_time=True)
    return out


def imports_of(module: Module, known: set[str], *, import_time: bool = False) -> list[Import]:
    """The `app.*` modules `module` imports (a name imported from a package counts as the
    submodule when there is one, else as the package)."""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    found: list[Import] = []
    tree = ast.parse(module.source, module.path)
    for stmt in _statements(tree.body, import_time=import_time):
        if isinstance(stmt, ast.Import):
            found += [Import(a.name, stmt.lineno) for a in stmt.names if _in_app(a.name)]
        elif isinstance(stmt, ast.ImportFrom):
            base = stmt.module or ""
            if stmt.level:
                anchor = package.split(".")[: len(package.split(".")) - stmt.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if not _in_app(base):
                continue
            for alias in stmt.names:
                sub = f"{base}.{alias.name}"
                found.append(Import(sub if sub in known else base, stmt.lineno))
    return found


def _in_app(name: str) -> bool:
    return name == "app" or name.startswith("app.")


def upward_imports(modules: list[Module]) -> list[str]:
    """One line per import that does not go down the layers (or leaves them)."""
    known = {m.name for m in modules}
    problems = []
    for module in modules:
        source = layer_key(module.name)
        for imp in imports_of(module, known):
            target = layer_key(imp.target)
            if target == source:
                continue
            here, there = RANK.get(source), RANK.get(target)
            if here is None or there is None or there >= here:
                problems.append(
                    f"{module.path}:{imp.line}: {source} (row {here}) imports {imp.target} "
                    f"({target}, row {there})"
                )
    return problems


def import_cycles(modules: list[Module]) -> list[list[str]]:
    """Groups of modules that import each other at import time (strongly connected
    components of two or more, or a module importing itself), by Tarjan's algorithm."""
    known = {m.name for m in modules}
    graph = {
        m.name: sorted({i.target for i in imports_of(m, known, import_time=True)} & known)
        for m in modules
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph[node]:
                cycles.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return cycles


def test_every_module_belongs_to_a_layer() -> None:
    modules = app_modules()
    assert len(modules) > 100  # the scan found the package
    unplaced = sorted({layer_key(m.name) for m in modules} - RANK.keys())
    assert unplaced == [], f"add these to LAYERS (and the README's layout): {unplaced}"


def test_imports_go_down_the_layers() -> None:
    problems = upward_imports(app_modules())
    assert problems == [], "imports that go up or sideways:\n" + "\n".join(problems)


def test_tools_and_storage_import_nothing_of_the_demo() -> None:
    # Tools and storage serve any deployment's backend (app/tools/deps.py); the demo shop is
    # one such backend, so a tool plugged in by a call centre never has to pretend to be it.
    modules = app_modules()
    known = {m.name for m in modules}
    found = [
        f"{m.path}:{imp.line}: {imp.target}"
        for m in modules
        if layer_key(m.name) in ("tools", "storage")
        for imp in imports_of(m, known)
        if layer_key(imp.target) == "demo"
    ]
    assert found == []


def test_no_import_cycles_at_import_time() -> None:
    cycles = import_cycles(app_modules())
    assert cycles == [], f"modules that import each other: {cycles}"


def _synthetic(name: str, source: str) -> Module:
    return Module(name, name.replace(".", "/") + ".py", source)


def test_the_checker_finds_upward_imports_wherever_they_are() -> None:
    modules = [
        _synthetic("app.conversation.loop", "X = 1\n"),
        _synthetic("app.text.tokens", "from app.errors import HermesError\n"),
        _synthetic(
            "app.storage.bad",
            "from typing import TYPE_CHECKING\n"
            "from app.text import tokens\n"  # down: fine
            "if TYPE_CHECKING:\n"
            "    from app.conversation.loop import X\n"
            "def later():\n"
            "    import app.main\n"
            "from app.nlu.types import ParseResult\n",  # sideways-up: storage is below nlu
        ),
        _synthetic("app.plugins.extra", "from app.errors import HermesError\n"),
    ]
    problems = upward_imports(modules)
    assert [p.split(":")[:2] for p in problems] == [
        ["app/storage/bad.py", "4"],
        ["app/storage/bad.py", "6"],
        ["app/storage/bad.py", "7"],
        ["app/plugins/extra.py", "1"],  # a package with no row is never allowed through
    ]
    assert "storage (row 2) imports app.conversation.loop (conversation, row 8)" in problems[0]


def test_the_checker_finds_cycles_only_at_import_time() -> None:
    cyclic = [
        _synthetic("app.memory.service", "from app.memory.sweep import sweep\n"),
        _synthetic("app.memory.sweep", "from app.memory import service\n"),
    ]
    assert import_cycles(cyclic) == [["app.memory.service", "app.memory.sweep"]]
    deferred = [
        cyclic[0],
        _synthetic(
            "app.memory.sweep",
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from app.memory.service import MemoryService\n"
            "def run():\n"
            "    from app.memory import service\n",
        ),
    ]
    assert import_cycles(deferred) == []
