"""What a request writes for a session names the session's `SessionWriter`: the session's lane,
no lease (its worker holds that). Nothing reads the URL to pick a lane: the service call that
writes names the session it writes for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.llm.testing import FakeLLMServer, Reply
from app.storage.session_writer import SessionWriter
from app.testing import LiveService
from tests.conftest import new_session


def writers_of(service: LiveService) -> list[SessionWriter | None]:
    """The handle of every write submitted to the service's database from now on, in order."""
    db: Any = service.runtime.db
    seen: list[SessionWriter | None] = []
    submit = db.submit

    def spy(writer: SessionWriter | None, fn: Callable[..., Any], on_commit: Any = None) -> Any:
        seen.append(writer)
        return submit(writer, fn, on_commit)

    db.submit = spy
    return seen


def of_sessions(seen: list[SessionWriter | None]) -> set[SessionWriter]:
    return {w for w in seen if w is not None}


async def test_a_requests_writes_take_its_sessions_lane_under_no_lease(
    service: LiveService,
) -> None:
    seen = writers_of(service)
    session_id = await new_session(service)
    # Created on its own lane, where every later write of it goes.
    assert of_sessions(seen) == {SessionWriter(session_id)}

    seen.clear()
    deleted = await service.client.delete(f"/v1/sessions/{session_id}")
    assert deleted.status_code == 204, deleted.text
    assert seen and of_sessions(seen) == {SessionWriter(session_id)}


async def test_a_message_is_accepted_on_its_sessions_lane_and_its_turn_writes_there_too(
    service: LiveService, fake_llm: FakeLLMServer
) -> None:
    fake_llm.enqueue(Reply("Hello."))
    session_id = await new_session(service)
    seen = writers_of(service)
    posted = await service.client.post(
        f"/v1/sessions/{session_id}/messages", json={"content": "hello"}
    )
    assert posted.status_code == 200, posted.text  # answered: the turn's writes are in
    assert {w.session_id for w in of_sessions(seen)} == {session_id}
    accepted = seen[0]
    assert accepted == SessionWriter(session_id)  # the request's: no lease
