"""The README's configuration tables, one per group, made from the settings models: `hermes
settings` prints them, `hermes settings --readme` writes them into README.md between the
markers; tests/test_readme.py fails when the README's copy differs."""

from __future__ import annotations

import inspect
from pathlib import Path

from pydantic.fields import FieldInfo

from app.settings import ENV_PREFIX, GROUPS, PROJECT_ROOT, variable

BEGIN = "<!-- settings: made by `hermes settings --readme` from app/settings/groups.py -->"
END = "<!-- settings: end -->"
README = PROJECT_ROOT / "README.md"


def markdown() -> str:
    """Every group: what it is for, then a row per variable: name, default, meaning."""
    parts = []
    for group, model in GROUPS.items():
        intro = " ".join(inspect.cleandoc(model.__doc__ or "").split())
        rows = [
            f"| `{ENV_PREFIX}{variable(name, field).upper()}` | {shown_default(field)}"
            f" | {field.description} |"
            for name, field in model.model_fields.items()
        ]
        table = "\n".join(["| variable | default | meaning |", "|---|---|---|", *rows])
        parts.append(f"**`settings.{group}`**: {intro}\n\n{table}\n")
    return "\n".join(parts)


def shown_default(field: FieldInfo) -> str:
    extra = field.json_schema_extra
    if isinstance(extra, dict) and "shown" in extra:
        return str(extra["shown"])
    value = field.get_default(call_default_factory=True)
    if value is None or value == []:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return f"{value:,.10g}".replace(",", "")
    if isinstance(value, Path):
        return f"`{value.relative_to(PROJECT_ROOT) if value.is_absolute() else value}`"
    if isinstance(value, list):
        return f"`{','.join(value)}`"
    return f"`{value}`"


def readme_section(text: str) -> str:
    """What stands between the markers in `text`."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip("\n")


def write_readme(path: Path = README) -> bool:
    """Put the tables between the markers; True if that changed the file."""
    text = path.read_text(encoding="utf-8")
    new = text.replace(readme_section(text), markdown().rstrip("\n"), 1)
    if new == text:
        return False
    path.write_text(new, encoding="utf-8")
    return True
