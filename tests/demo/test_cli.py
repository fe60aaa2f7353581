"""`python -m app.demo` (the `hermes demo-data` command) rebuilds the file from its seed."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from app.demo.fixtures import LI_LEI
from tests.demo.conftest import dump, query


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    return subprocess.run(
        [sys.executable, "-m", "app.demo", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_regenerates_a_changed_file_identically(tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    first = run("--path", str(path))
    assert first.returncode == 0, first.stderr
    assert "302 customers" in first.stdout
    before = dump(path)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM order_items")
    conn.close()
    second = run("--path", str(path))
    assert second.returncode == 0, second.stderr
    assert dump(path) == before


def test_default_path_comes_from_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere" / "demo.db"
    result = run("--seed", "11", HERMES_DEMO_DB_PATH=str(path))
    assert result.returncode == 0, result.stderr
    assert query(path, "SELECT value FROM meta WHERE key = 'seed'") == [("11",)]
    assert query(path, "SELECT name FROM customers WHERE id = ?", LI_LEI) == [("李雷",)]
