"""The built-in `search_knowledge` as tools.yaml declares it: the name the turn finds its calls
by (SEARCH_TOOL) is the name the model is offered, and it runs this module's handler."""

from __future__ import annotations

from app.knowledge.passages import SEARCH_TOOL
from app.settings import PROJECT_ROOT
from app.tools.builtin import knowledge
from app.tools.loader import load_tools, resolve_python
from app.tools.spec import PythonHandler


def test_tools_yaml_declares_the_search_tool_by_its_one_name() -> None:
    specs = {s.name: s for s in load_tools(PROJECT_ROOT / "tools.yaml", resolve=resolve_python)}

    spec = specs[SEARCH_TOOL]

    assert spec.handler == PythonHandler(knowledge.__name__, knowledge.search_knowledge.__name__)
    assert spec.risk == "read" and spec.always_on
