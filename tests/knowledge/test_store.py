"""The per-unit document frequencies of migration 0022 on both engines: every add, new version
and delete leaves them equal to a count over the chunks stored, per tenant."""

from __future__ import annotations

from collections import Counter

from app.knowledge.service import KnowledgeBase
from app.storage.port import Database

REFUNDS = (
    b"# Refunds\n\n## Alipay\n\nRefunds to Alipay arrive within 24 hours.\n\n"
    b"## Cards\n\nCards take 7 days.\n"
)
WARRANTY = "# 保修政策\n\n## 保修期\n\n手机保修一年，退款另计。\n".encode()


async def _recounted(db: Database, tenant: str) -> dict[str, int]:
    rows = await db.fetchall("SELECT terms FROM knowledge_chunks WHERE tenant_id = ?", (tenant,))
    counts = Counter(unit for row in rows for unit in row["terms"].split())
    return {"": len(rows), **counts} if rows else {}


async def _stored(db: Database, tenant: str) -> dict[str, int]:
    rows = await db.fetchall("SELECT unit, df FROM knowledge_units WHERE tenant_id = ?", (tenant,))
    return {row["unit"]: int(row["df"]) for row in rows}


async def test_the_unit_counts_follow_every_add_version_and_delete(kb: KnowledgeBase, db: Database):
    async def add(tenant: str, source: str, content: bytes):
        return await kb.add(tenant, source=source, content=content, format="markdown")

    refunds = await add("acme", "refunds.md", REFUNDS)
    await add("acme", "warranty.md", WARRANTY)
    await add("other", "refunds.md", REFUNDS)
    assert await _stored(db, "acme") == await _recounted(db, "acme")
    assert (await _stored(db, "acme"))["refund"] == 2  # the title is in every chunk's units
    assert (await _stored(db, "acme"))[""] == 3

    await add("acme", "refunds.md", REFUNDS.replace(b"Cards take 7 days.", b"Refunds take a week."))
    assert await _stored(db, "acme") == await _recounted(db, "acme")
    assert (await _stored(db, "acme"))["week"] == 1
    assert "7" not in await _stored(db, "acme")

    await kb.delete("acme", refunds.document.id)
    assert await _stored(db, "acme") == await _recounted(db, "acme")
    assert "alipay" not in await _stored(db, "acme")
    assert await _stored(db, "other") == await _recounted(db, "other")
    assert await kb.queries.frequencies("other", ["alipay", "保修"]) == {"": 2, "alipay": 1}
