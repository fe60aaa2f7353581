"""The evaluation's side of the HTTP API: sessions, streamed turns with an operator deciding
approvals, the transcript, and the user's memories. Only the public API: the same code runs
against an in-process service and a remote one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.errors import InternalError
from app.evaluation.scenario import Decision, SeedDocument, SeedMemory
from app.events import EventType
from app.testing import post_message_stream, read_events

UNEXPECTED = "rejected by hermes eval: the scenario expects no approval here"


@dataclass
class ToolRun:
    tool: str
    status: str | None = None  # None: started, never completed
    code: str | None = None


@dataclass
class ApprovalSeen:
    tool: str
    decision: str  # approve, reject, or "unexpected" (rejected by the runner)


@dataclass
class TurnRecord:
    say: str
    replies: list[str] = field(default_factory=list)
    # {document_id, chunk_id, title, section} of every reply's `message.completed`
    citations: list[dict[str, Any]] = field(default_factory=list)
    tools: list[ToolRun] = field(default_factory=list)
    approvals: list[ApprovalSeen] = field(default_factory=list)
    recalled: list[str] = field(default_factory=list)
    # Recalled knowledge nodes: the event names them by id only (their keys are hashes of the
    # customer's words); `resolve_recalled` turns them into keys through the memory API.
    recalled_ids: list[str] = field(default_factory=list)
    forgotten: int = 0
    status: str = "completed"  # or the failure code
    memories: list[dict[str, Any]] | None = None

    @property
    def reply(self) -> str:
        return "\n".join(self.replies)


Decide = Callable[[str], Decision | None]  # tool name -> the operator's decision, if any


class ServiceClient:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def _json(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            raise EvalHttpError(response.request.method, response.request.url.path, response)
        return response.json() if response.content else None

    async def create_session(self, user_id: str) -> str:
        body = await self._json(await self.http.post("/v1/sessions", json={"user_id": user_id}))
        return str(body["id"])

    async def turn(self, session_id: str, content: str, decide: Decide) -> TurnRecord:
        record = TurnRecord(content)
        calls: dict[str, ToolRun] = {}
        async with post_message_stream(self.http, session_id, content) as response:
            if response.status_code != 200:
                await response.aread()
                record.status = _error_code(response)
                return record
            async for event in read_events(response):
                data = event.data if isinstance(event.data, dict) else {}
                if event.event == EventType.APPROVAL_REQUESTED:
                    record.approvals.append(await self._decide(session_id, data, decide))
                elif _note(record, calls, event.event, data):
                    break
        return record

    async def _decide(self, session_id: str, data: dict[str, Any], decide: Decide) -> ApprovalSeen:
        tool = str(data.get("tool"))
        decision = decide(tool)
        body: dict[str, Any] = (
            {"decision": "reject", "reason": UNEXPECTED}
            if decision is None
            else {"decision": decision.decision, "reason": decision.reason}
        )
        url = f"/v1/sessions/{session_id}/approvals/{data['approval_id']}"
        await self._json(await self.http.post(url, json=body))
        return ApprovalSeen(tool, "unexpected" if decision is None else decision.decision)

    async def assistant_messages(self, session_id: str) -> list[str]:
        texts: list[str] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 500, **({"cursor": cursor} if cursor else {})}
            url = f"/v1/sessions/{session_id}/messages"
            page = await self._json(await self.http.get(url, params=params))
            texts += [
                m["content"] for m in page["items"] if m["role"] == "assistant" and m["content"]
            ]
            cursor = page.get("next_cursor")
            if not cursor:
                return texts

    async def memories(self, user_id: str) -> list[dict[str, Any]]:
        url = f"/v1/users/{user_id}/memories"
        body = await self._json(await self.http.get(url, params={"limit": 500}))
        return list(body["items"])

    async def resolve_recalled(self, record: TurnRecord, user_id: str) -> None:
        """Name the turn's recalled nodes by their keys, as scenarios do ("note:720b33062af4")."""
        if not record.recalled_ids:
            return
        keys = {str(m["id"]): m.get("key") for m in await self.memories(user_id)}
        record.recalled += [k for i in record.recalled_ids if (k := keys.get(i))]
        record.recalled_ids = []

    async def seed_memory(self, user_id: str, seed: SeedMemory) -> None:
        body = {"key": seed.key, "value": seed.value, "confidence": seed.confidence}
        await self._json(await self.http.post(f"/v1/users/{user_id}/memories", json=body))

    async def add_document(self, document: SeedDocument) -> dict[str, Any]:
        """Add (or, same title or source_url, replace) a knowledge document: {id, version, …}."""
        body = document.as_json()
        return dict(await self._json(await self.http.post("/v1/knowledge/documents", json=body)))

    async def clear_memories(self, user_id: str) -> None:
        """Against a shared service: start each scenario with no memories of its customer."""
        for item in await self.memories(user_id):
            url = f"/v1/users/{user_id}/memories/{item['id']}"
            response = await self.http.delete(url, params={"reason": "hermes_eval_reset"})
            if response.status_code not in (204, 404):
                await self._json(response)


def _note(record: TurnRecord, calls: dict[str, ToolRun], kind: str, data: dict[str, Any]) -> bool:
    """Record one event of the turn; True when it ends the turn."""
    if kind == EventType.MESSAGE_COMPLETED:
        record.replies.append(str(data.get("text") or ""))
        record.citations += [c for c in data.get("citations") or [] if isinstance(c, dict)]
    elif kind == EventType.TOOL_STARTED:
        calls[data["call_id"]] = run = ToolRun(data["tool"])
        record.tools.append(run)
    elif kind == EventType.TOOL_COMPLETED:
        run = calls.get(data["call_id"]) or ToolRun(data["tool"])
        if data["call_id"] not in calls:
            record.tools.append(run)
        run.status = data.get("status")
        error = (data.get("result") or {}).get("error") or {}
        run.code = error.get("code") if isinstance(error, dict) else None
    elif kind == EventType.MEMORY_RECALLED:
        for item in data.get("items", []):
            if item.get("key"):
                record.recalled.append(item["key"])
            elif item.get("id") is not None:
                record.recalled_ids.append(str(item["id"]))
    elif kind == EventType.MEMORY_FORGOTTEN:
        record.forgotten += int(data.get("count", 0))
    elif kind == EventType.TURN_FAILED:
        record.status = str(data.get("code") or "turn_failed")
        return True
    return kind == EventType.TURN_COMPLETED


class EvalHttpError(InternalError):
    """The service answered a setup or read call of the evaluation with an error: the
    scenario can't be judged (a failed *turn* is recorded and judged instead)."""

    code = "eval_http_error"

    def __init__(self, method: str, path: str, response: httpx.Response) -> None:
        super().__init__(f"{method} {path}: {response.status_code} {_error_code(response)}")


def _error_code(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return f"http_{response.status_code}"
