"""First start: the knowledge folder is loaded into the default tenant while it has no
documents, once; later starts leave the tenant's documents as they are."""

from __future__ import annotations

from pathlib import Path

from app.memory.service import MemoryService
from app.runtime.steps import start_knowledge
from app.settings import PROJECT_ROOT, Settings
from app.storage.port import Database


async def test_the_demo_documents_load_once_and_answer_policy_questions(db: Database):
    settings = Settings(knowledge={"dir": PROJECT_ROOT / "data" / "knowledge"})
    memory = MemoryService(db)

    knowledge = await start_knowledge(settings, db, memory)

    assert await knowledge.count("default") == 31
    found = await knowledge.search("default", "退货运费谁承担", language="zh")
    assert found and found[0].title == "退货运费由谁承担"
    page = await knowledge.list_documents("default", limit=1)
    await knowledge.delete("default", page.items[0].id)
    again = await start_knowledge(settings, db, memory)
    assert await again.count("default") == 30  # not loaded again: the tenant has documents


async def test_an_empty_setting_loads_nothing(db: Database, tmp_path: Path):
    settings = Settings(knowledge={"dir": ""})

    knowledge = await start_knowledge(settings, db, MemoryService(db))

    assert settings.knowledge.dir is None
    assert await knowledge.count("default") == 0
