"""Routes are thin: they take services from `app/api/deps.py` and never reach below them."""

from __future__ import annotations

import ast
from pathlib import Path

from app.settings import PROJECT_ROOT

ROUTES = sorted((PROJECT_ROOT / "app" / "api" / "routes").glob("*.py"))


def _imports(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def _reads_app_state(tree: ast.AST) -> bool:
    # `request.app.state` (or any `<x>.app.state`): the state belongs to deps.py alone.
    return any(
        isinstance(node, ast.Attribute)
        and node.attr == "state"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "app"
        for node in ast.walk(tree)
    )


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [
        f"imports {name}"
        for name in _imports(tree)
        if name == "app.storage" or name.startswith("app.storage.")
    ]
    if _reads_app_state(tree):
        found.append("reads request.app.state")
    return found


def test_routes_use_services_from_deps_only() -> None:
    assert len(ROUTES) > 5
    problems = {path.name: v for path in ROUTES if (v := _violations(path))}
    assert problems == {}


def test_the_check_catches_both_kinds(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from app.storage.steps import Step\n"
        "def get(request):\n"
        "    return request.app.state.runtime\n"
    )
    assert _violations(bad) == ["imports app.storage.steps", "reads request.app.state"]
