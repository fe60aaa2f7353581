"""The README's settings table names every setting (in full, or as `_SUFFIX` after its
prefix in the same row), so it cannot drift from `app/settings.py`."""

from __future__ import annotations

import re

from app.settings import ENV_PREFIX, PROJECT_ROOT, Settings

ROWS = [
    line
    for line in (PROJECT_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    if line.startswith(f"| `{ENV_PREFIX}")
]


def documented(field: str) -> bool:
    full = f"{ENV_PREFIX}{field.upper()}"
    for row in ROWS:
        if f"`{full}`" in row:
            return True
        for named in re.findall(rf"`{ENV_PREFIX}([A-Z0-9_]+)`", row):
            parts = named.split("_")
            for cut in range(1, len(parts)):
                prefix = ENV_PREFIX + "_".join(parts[:cut]) + "_"
                if full.startswith(prefix) and f"`_{full[len(prefix) :]}`" in row:
                    return True
    return False


def test_every_setting_is_in_the_readme_table() -> None:
    assert [f for f in Settings.model_fields if not documented(f)] == []


def test_the_table_names_no_setting_that_does_not_exist() -> None:
    known = {f"{ENV_PREFIX}{f.upper()}" for f in Settings.model_fields}
    named = {n for row in ROWS for n in re.findall(rf"`({ENV_PREFIX}[A-Z0-9_]+)`", row)}
    assert named - known == set()
