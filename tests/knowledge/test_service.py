"""The knowledge base on a real database, both engines: versions replace their chunks in one
transaction, the same content is a no-op, tenants never see each other's documents, expired
and future policies are never found, a deleted document is gone from search at once."""

from __future__ import annotations

import pytest

from app.errors import DocumentNotFound, DocumentTooLarge, InvalidDocument
from app.knowledge.passages import KnowledgeSearch
from app.knowledge.service import KnowledgeBase
from app.knowledge.snippets import opening
from app.knowledge.store import Wanted
from app.memory.testing import FakeEmbedder, FixedClock
from app.settings import KnowledgeSettings
from app.storage.port import Database

REFUNDS_V1 = b"""# Refunds

## How long refunds take

Refunds to Alipay arrive within 24 hours. Refunds to a credit card take 7 to 15 working days.

## Where the money goes

The money always goes back to the payment method you used.
"""
REFUNDS_V2 = REFUNDS_V1.replace(b"7 to 15", b"3 to 5")
WARRANTY = "# 保修政策\n\n## 保修期\n\n手机和蓝牙耳机保修一年，自签收之日起计算。\n".encode()


async def _add(kb: KnowledgeBase, tenant: str = "acme", source: str = "refunds.md", **kw):
    content = kw.pop("content", REFUNDS_V1)
    return await kb.add(tenant, source=source, content=content, format="markdown", **kw)


async def _chunk_rows(db: Database, document_id: str) -> int:
    row = await db.fetchone(
        "SELECT count(*) FROM knowledge_chunks WHERE document_id = ?", (document_id,)
    )
    return int(row[0])


async def test_adding_the_same_content_again_changes_nothing(kb: KnowledgeBase, db: Database):
    first = await _add(kb)
    again = await _add(kb)

    assert (first.action, first.created, again.action, again.changed) == (
        "added", True, "unchanged", False,
    )  # fmt: skip
    assert again.document == first.document
    assert await kb.count("acme") == 1
    assert await _chunk_rows(db, first.document.id) == first.document.chunk_count == 2


async def test_a_changed_document_is_a_new_version_and_its_old_text_is_never_found(
    kb: KnowledgeBase, db: Database
):
    first = await _add(kb)
    assert [p.section for p in await kb.search("acme", "credit card refund 7 to 15 days")][:1] == [
        "Refunds › How long refunds take"
    ]

    second = await _add(kb, content=REFUNDS_V2)

    assert (second.action, second.document.id, second.document.version) == (
        "updated", first.document.id, 2,
    )  # fmt: skip
    assert await _chunk_rows(db, first.document.id) == 2  # the old chunks went, not added to
    texts = [p.text for p in await kb.search("acme", "how long does a credit card refund take")]
    assert texts and all("7 to 15" not in t for t in texts)
    assert any("3 to 5" in t for t in texts)


async def test_the_same_source_url_under_another_source_is_the_next_version(kb: KnowledgeBase):
    url = "https://help.example.com/refunds"
    first = await _add(kb, source="refunds.md", source_url=url)
    sent = await _add(kb, source=url, source_url=url, content=REFUNDS_V2)
    assert (sent.action, sent.document.id, sent.document.version) == (
        "updated", first.document.id, 2,
    )  # fmt: skip
    assert sent.document.source == "refunds.md"  # its identity is kept
    assert await kb.count("acme") == 1
    found = await kb.search("acme", "credit card refund working days")
    assert found and "3 to 5" in found[0].text
    # another URL is another document
    other = await _add(kb, source="other.md", source_url=url + "-2", content=WARRANTY)
    assert other.action == "added" and await kb.count("acme") == 2
    # another tenant's document with the same URL is its own: acme's is untouched
    theirs = await _add(kb, "globex", source=url, source_url=url, content=WARRANTY)
    assert (theirs.action, theirs.document.version) == ("added", 1)
    assert theirs.document.id != first.document.id
    mine = await kb.get("acme", first.document.id)
    assert (mine.version, mine.content_hash) == (2, sent.document.content_hash)


async def test_another_tenant_sees_nothing(kb: KnowledgeBase):
    added = await _add(kb)

    assert await kb.search("globex", "how long does a credit card refund take") == []
    with pytest.raises(DocumentNotFound):
        await kb.get("globex", added.document.id)
    with pytest.raises(DocumentNotFound):
        await kb.delete("globex", added.document.id)
    assert (await kb.list_documents("globex")).items == []
    assert (await kb.get("acme", added.document.id)).title == "Refunds"


async def test_expired_and_future_documents_are_never_found(kb: KnowledgeBase, clock: FixedClock):
    now = clock()
    await _add(kb, valid_until=now - 1)
    await _add(kb, source="warranty.md", content=WARRANTY, valid_from=now + 86400)

    assert await kb.search("acme", "how long does a credit card refund take") == []
    assert await kb.search("acme", "蓝牙耳机保修多久") == []
    clock.advance(days=2)
    found = await kb.search("acme", "蓝牙耳机保修多久")
    assert [(p.title, p.section, p.language) for p in found][:1] == [
        ("保修政策", "保修政策 › 保修期", "zh")
    ]


async def test_a_deleted_document_is_gone_from_search_at_once(kb: KnowledgeBase, db: Database):
    added = await _add(kb)
    assert await kb.search("acme", "credit card refund")

    await kb.delete("acme", added.document.id)

    assert await kb.search("acme", "credit card refund") == []
    assert await _chunk_rows(db, added.document.id) == 0
    with pytest.raises(DocumentNotFound):
        await kb.get("acme", added.document.id)


async def test_nothing_below_the_threshold_and_at_most_top_k(db: Database, clock: FixedClock):
    strict = KnowledgeBase(db, KnowledgeSettings(threshold=0.99, top_k=1), clock=clock)
    loose = KnowledgeBase(db, KnowledgeSettings(threshold=0.0, top_k=1), clock=clock)
    await _add(loose)

    assert await strict.search("acme", "refund time for laptops bought with bitcoin") == []
    assert len(await loose.search("acme", "refund")) == 1
    assert len(await loose.search("acme", "refund", limit=2)) == 2
    for passage in await loose.search("acme", "refund", limit=5):
        assert 0.0 <= passage.score <= 1.0


CANCELLING = """# 取消订单

## 定制商品

定制商品开始生产后不能取消订单。

## 发货前取消

订单发货前可以在App中自行取消订单。

## 发货后

订单发货后无法取消订单，可以拒收。
""".encode()


async def test_a_passage_whose_own_heading_names_the_question_ranks_first(kb: KnowledgeBase):
    # Every section has the title's words and says "取消订单"; only one is headed by it.
    await _add(kb, source="cancel.zh.md", content=CANCELLING, title="取消订单", language="zh")

    found = await kb.search("acme", "怎么取消订单？")
    assert [p.section for p in found][:1] == ["取消订单 › 发货前取消"]
    assert found[0].score > found[1].score  # not a three-way tie any more


RETURNS = b"""# Return policy

## Seven-day returns

Most items can be returned within 7 days of delivery.

## Where returns go

Send returns to the returns centre in Hangzhou; a return sent elsewhere is returned to you.
"""


async def test_passages_that_score_the_same_come_in_document_order(kb: KnowledgeBase):
    # The index ranks the second section higher (it says "return" three times); the score
    # does not count repeats, so the two tie, and the document's first word on it wins.
    await _add(kb, source="returns.md", content=RETURNS, title="Return policy")

    found = await kb.search("acme", "What is your return policy?")
    assert found[0].score == found[1].score
    assert [p.section for p in found] == [
        "Return policy › Seven-day returns",
        "Return policy › Where returns go",
    ]


async def test_between_documents_that_score_the_same_the_older_comes_first(kb: KnowledgeBase):
    older = await _add(kb, source="returns.md", content=RETURNS, title="Return policy")
    # A copy with its sections the other way round: document order alone would put its
    # "Where returns go" (its first section) before the older one's second section.
    flipped = RETURNS.split(b"## ")
    copy = b"## ".join([flipped[0], flipped[2].rstrip() + b"\n\n", flipped[1]])
    await _add(kb, source="copy.md", content=copy, title="Return policy")

    found = await kb.search("acme", "What is your return policy?", limit=4)
    assert len({p.score for p in found}) == 1
    assert [p.document_id for p in found[:2]] == [older.document.id] * 2


async def test_unknown_questions_find_no_source(kb: KnowledgeBase):
    await _add(kb)
    await _add(kb, source="warranty.md", content=WARRANTY)

    assert await kb.search("acme", "Do you sell laptops?") == []
    assert await kb.search("acme", "你们老板是谁") == []


async def test_documents_are_paged_newest_first(kb: KnowledgeBase, clock: FixedClock):
    ids = []
    for n in range(5):
        clock.advance(seconds=1)
        added = await _add(kb, source=f"doc{n}.md", content=REFUNDS_V1 + str(n).encode())
        ids.append(added.document.id)

    seen, cursor = [], None
    while True:
        page = await kb.list_documents("acme", cursor=cursor, limit=2)
        seen += [d.id for d in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ids[::-1]


async def test_a_bad_document_leaves_nothing_behind(kb: KnowledgeBase):
    with pytest.raises(DocumentTooLarge) as too_large:
        await _add(kb, content=b"x" * (64 * 1024 + 1))
    with pytest.raises(InvalidDocument):
        await kb.add("acme", source="a.pdf", content=b"%PDF-1.4 garbage", format="pdf")
    with pytest.raises(InvalidDocument):
        await _add(kb, content=b"\xff\xfe not utf-8")

    assert too_large.value.code == "document_too_large"
    assert await kb.count("acme") == 0


async def test_with_an_embedder_a_paraphrase_with_no_shared_word_is_found(
    db: Database, clock: FixedClock
):
    # The fake embedder gives both texts the same vector: only the semantic ranking can
    # find the passage, and fusion puts it first.
    vector = [1.0] + [0.0] * 63
    embedder = FakeEmbedder({"Where the money goes": vector, "zzqx": vector})
    kb = KnowledgeBase(db, KnowledgeSettings(), embedder=embedder, clock=clock)
    await _add(kb)
    assert embedder.calls and len(embedder.calls[0]) == 2  # every chunk embedded at ingest

    found = await kb.search("acme", "zzqx")

    assert [p.section for p in found][:1] == ["Refunds › Where the money goes"]
    assert found[0].score == 1.0
    lexical = KnowledgeBase(db, KnowledgeSettings(), clock=clock)
    assert await lexical.search("acme", "zzqx") == []


async def test_the_base_is_the_turns_knowledge_search_and_passages_cite_their_chunk(
    kb: KnowledgeBase,
):
    search: KnowledgeSearch = kb
    added = await _add(kb)

    passage = (await search.search("acme", "credit card refund"))[0]

    assert passage.citation.as_dict() == {
        "document_id": added.document.id,
        "chunk_id": passage.chunk_id,
        "title": "Refunds",
        "section": "Refunds › How long refunds take",
        "snippet": opening(passage.text),
    }


async def test_chunks_ranked_above_but_not_the_tenants_or_not_valid_never_crowd_its_own_out(
    kb: KnowledgeBase, clock: FixedClock
):
    # When many chunks have the wanted terms, the index ranks them before the tenant and
    # validity checks and only the best few times the limit are checked: another tenant's
    # chunks and an expired policy's, ranked above the tenant's own, fill that few here.
    now = clock()
    both = b"# Card refunds\n\n## Card\n\nA card refund takes 7 days.\n"
    for n in range(3):
        await _add(
            kb, tenant="globex", source=f"card-{n}.md", content=both + bytes(str(n), "ascii")
        )
        old = both + b"old" + bytes(str(n), "ascii")
        await _add(kb, source=f"old-{n}.md", content=old, valid_until=now - 1)
    await _add(kb, source="plain.md", content=b"# Refunds\n\n## Refunds\n\nA refund is made.\n")
    refund = Wanted((("refund",),), 1.0, chunks=100)  # "many": the checks come after ranking
    card = Wanted((("card",),), 1.0, chunks=100)

    found = await kb.queries.candidates("acme", [refund, card], now, limit=2)

    assert [c.title for c in found] == ["Refunds"]
    alone = await kb.queries.candidates("acme", [refund, card], now, limit=1)
    assert [c.chunk_id for c in alone] == [c.chunk_id for c in found]
