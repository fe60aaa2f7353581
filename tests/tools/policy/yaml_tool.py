"""One tool from a tools file written for the test, and a call's context for it: what the
policy tests (precheck, confirmation) run their tool's own functions with."""

from __future__ import annotations

from pathlib import Path

from app.storage.session_writer import SessionWriter
from app.tools.context import ToolContext, TurnScope
from app.tools.loader import load_tools, resolve_python
from app.tools.spec import ToolSpec


def load_one(tmp_path: Path, text: str) -> ToolSpec:
    path = tmp_path / "tools.yaml"
    path.write_text(text)
    return load_tools(path, resolve=resolve_python)[0]


def call_context(tool: str) -> ToolContext:
    return ToolContext(
        TurnScope("t", "u", "s", "turn", writer=SessionWriter("s")), "c1", tool, "idem", None
    )
