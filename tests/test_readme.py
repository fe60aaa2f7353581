"""The README's configuration tables are made from the settings models: every variable, its
default and its meaning, as app/settings/groups.py declares them."""

from __future__ import annotations

import re

from app.settings import ENV_PREFIX, VARIABLES
from app.settings.table import README, markdown, readme_section


def test_the_readme_tables_are_the_ones_the_settings_make() -> None:
    readme = readme_section(README.read_text(encoding="utf-8"))
    assert readme == markdown().rstrip("\n"), "run `hermes settings --readme`"


def test_every_variable_has_one_row_with_a_meaning() -> None:
    rows = re.findall(
        rf"^\| `({ENV_PREFIX}[A-Z0-9_]+)` \| [^|]+ \| [^|]*\S[^|]* \|$", markdown(), re.M
    )
    assert sorted(rows) == sorted(f"{ENV_PREFIX}{name.upper()}" for name in VARIABLES)
