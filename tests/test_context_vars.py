"""No context variable decides where or whether a write goes.

A write's lane and its lease fence are the `SessionWriter` its caller passes down
(app/storage/session_writer.py), visible at every call site, never a value set far away and
inherited by tasks. This test reads the source with `ast`, like tests/test_layers.py: nothing in
app/storage uses `contextvars`, and the context variables elsewhere are the ones listed here,
each with why it is not about writes. A new one needs a line here and a reason."""

from __future__ import annotations

import ast
from pathlib import Path

from app.settings import PROJECT_ROOT

APP = PROJECT_ROOT / "app"

ALLOWED = {
    "app/resilience/deadline.py": "the running turn's deadline: how long a call may still take,"
    " never where a write goes or whether it may",
    "app/observability/logs.py": "the request id stamped on the request's log lines",
}


def uses_context_vars(path: Path) -> list[int]:
    """The lines of `path` that import `contextvars` or name a `ContextVar`."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import) and any(a.name == "contextvars" for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "contextvars":
            lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id == "ContextVar":
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "ContextVar":
            lines.append(node.lineno)
    return sorted(set(lines))


def found(under: Path) -> dict[str, list[int]]:
    return {
        str(path.relative_to(PROJECT_ROOT)): lines
        for path in sorted(under.rglob("*.py"))
        if (lines := uses_context_vars(path))
    }


def test_no_context_variable_in_storage() -> None:
    assert found(APP / "storage") == {}, (
        "a write's lane and fence are the SessionWriter passed to it, not a context variable"
    )


def test_the_context_variables_elsewhere_are_the_listed_ones() -> None:
    assert sorted(found(APP)) == sorted(ALLOWED)


def test_the_scan_sees_a_context_variable(tmp_path: Path) -> None:
    planted = tmp_path / "lane.py"
    planted.write_text(
        "import contextvars\nlane: contextvars.ContextVar[str] = contextvars.ContextVar('lane')\n"
    )
    assert uses_context_vars(planted) == [1, 2]
