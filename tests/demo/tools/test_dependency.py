"""The demo tools take the shop as their one dependency, `ToolContext[ShopBackend]`, which
`app.demo.backend:SHOP` provides; a tools file that lists them without it stops at load."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.demo.backend import SHOP, ShopBackend
from app.errors import ToolsFileError
from app.knowledge.passages import KnowledgeSearch
from app.settings import PROJECT_ROOT
from app.tools.deps import RUNTIME_GIVEN
from app.tools.loader import load_tools_file, resolve_python

TOOLS = PROJECT_ROOT / "tools.yaml"


def test_every_demo_tool_needs_the_shop_and_the_clock_needs_nothing() -> None:
    tools = load_tools_file(TOOLS, resolve=resolve_python)
    needs = {spec.name: spec.dependency for spec in tools.tools}
    assert needs.pop("get_current_time") is None
    # The built-in knowledge search takes what the runtime gives it, no provider of the file's.
    assert needs.pop("search_knowledge") is KnowledgeSearch and KnowledgeSearch in RUNTIME_GIVEN
    assert len(needs) == 8 and set(needs.values()) == {ShopBackend}
    assert tools.needed() == [SHOP]


def test_demo_tools_without_the_shop_provider_stop_at_the_first_of_them(tmp_path: Path) -> None:
    text = TOOLS.read_text(encoding="utf-8")
    text = text.replace("providers:\n  - app.demo.backend:SHOP\n", "providers: []\n")
    path = tmp_path / "tools.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ToolsFileError) as info:
        load_tools_file(path, resolve=resolve_python)
    line = text.splitlines().index("      python: app.demo.tools.orders:query_order_status") + 1
    assert str(info.value) == (
        f"{path}:{line}: query_order_status: its handler needs app.demo.backend.ShopBackend, "
        "which no entry under `providers:` gives"
    )
