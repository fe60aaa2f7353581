"""The write lane of a request: a request naming a session writes on that session's lane."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.storage import writer
from app.testing import LiveService
from tests.conftest import new_session


async def test_a_request_under_a_session_writes_on_its_lane(service: LiveService) -> None:
    db: Any = service.runtime.db
    seen: list[str | None] = []
    submit = db.submit

    def spy(fn: Callable[..., Any], on_commit: Any = None) -> Any:
        seen.append(writer.lane.get())
        return submit(fn, on_commit)

    db.submit = spy
    try:
        seen.clear()
        created = await service.client.post("/v1/sessions", json={"user_id": "u1"})
        assert created.status_code == 201
        assert seen and set(seen) == {None}  # no session named yet: the first lane
        session_id = await new_session(service)
        seen.clear()
        deleted = await service.client.delete(f"/v1/sessions/{session_id}")
        assert deleted.status_code == 204, deleted.text
        assert seen and set(seen) == {session_id}
    finally:
        db.submit = submit
