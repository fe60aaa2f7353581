"""Erased means gone from the files: after a session is deleted, or a memory forgotten, none of
its text is left in the SQLite database file or its WAL (secure_delete, then the WAL
checkpointed and truncated before the request answers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.llm.testing import FakeLLMServer, Reply
from app.testing import LiveService
from tests.conftest import new_session

PLANTED = "QX7-PLANTED-Z93K"  # nothing else in the database could hold these bytes


@pytest.fixture
def sqlite_only(backend: str) -> None:
    if backend != "sqlite":
        pytest.skip("reads the SQLite files themselves")


def _on_disk(service: LiveService, needle: str) -> list[str]:
    """The database files that hold `needle`, byte for byte."""
    db = Path(service.runtime.settings.storage.db_path)
    files = [db, db.with_name(db.name + "-wal")]
    return [f.name for f in files if f.exists() and needle.encode() in f.read_bytes()]


@pytest.mark.usefixtures("sqlite_only")
async def test_a_deleted_session_leaves_nothing_in_the_database_or_its_wal(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply(f"Noted: {PLANTED}"), Reply("Hello."))
    session_id = await new_session(service, "cust_0001")
    turn = await service.client.post(
        f"/v1/sessions/{session_id}/messages", json={"content": f"my code is {PLANTED}"}
    )
    assert turn.status_code == 200, turn.text
    # Another session's rows share the pages: they stay, so only zeroing takes the text out.
    other = await new_session(service, "cust_0002")
    kept = await service.client.post(f"/v1/sessions/{other}/messages", json={"content": "hi"})
    assert kept.status_code == 200, kept.text
    assert _on_disk(service, PLANTED)  # stored: in the WAL at least, until now

    deleted = await service.client.delete(f"/v1/sessions/{session_id}")
    assert deleted.status_code == 204
    assert _on_disk(service, PLANTED) == []
    assert (await service.client.get(f"/v1/sessions/{other}/messages")).json()["items"]


@pytest.mark.usefixtures("sqlite_only")
async def test_a_forgotten_memory_leaves_nothing_in_the_database_or_its_wal(
    service: LiveService,
) -> None:
    memories = "/v1/users/cust_0001/memories"
    created = await service.client.post(
        memories, json={"key": "note.code", "value": f"door code {PLANTED}"}
    )
    assert created.status_code == 201, created.text
    assert _on_disk(service, PLANTED)

    forgot = await service.client.post(f"{memories}:forget", json={"key": "note.code"})
    assert forgot.status_code == 200 and forgot.json()["deleted"] == [created.json()["id"]]
    assert _on_disk(service, PLANTED) == []
