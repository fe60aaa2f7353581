"""Playing a scenario over the API, seen from the wire: a session's knowledge documents are
added (as the operator, before the session starts) and each reply's citations are recorded
from its `message.completed`. The service is an `httpx.MockTransport` that answers as the
knowledge API is specified (issue 27) and records what it was sent."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import yaml

from app.evaluation.checks import judge_scenario
from app.evaluation.client import EvalHttpError, ServiceClient
from app.evaluation.load import parse_scenario
from app.evaluation.play import play
from app.events import EventType

SCENARIO = """
title: a document changed between two sessions
language: en
intents: [policy_question]
tags: [knowledge]
customer: cust_0001
goal: g
sessions:
  - documents:
      - {title: Gift wrapping, content: "Gift wrapping costs CNY 5.", valid_until: 2099-12-31}
    turns:
      - say: How much is gift wrapping?
        expect: {cited: [Gift wrapping], contains: [CNY 5]}
  - documents:
      - {title: Gift wrapping, content: "Gift wrapping costs CNY 8.", format: text}
    turns:
      - say: How much is gift wrapping?
        expect: {cited: [Gift wrapping], contains: [CNY 8], not_contains: [CNY 5]}
"""


class Service:
    """The API calls `play` makes, answered from a list of documents (the last version of a
    title wins) and logged in order."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.documents: dict[str, dict[str, Any]] = {}
        self.replies: dict[str, list[str]] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.log.append(f"{request.method} {request.url.path}")
        path = request.url.path
        if path == "/v1/knowledge/documents":
            body = json.loads(request.content)
            old = self.documents.get(body["title"], {"version": 0})
            self.documents[body["title"]] = body | {"id": "doc_1", "version": old["version"] + 1}
            return httpx.Response(201, json=self.documents[body["title"]])
        if path == "/v1/sessions":
            session_id = f"ses_{len(self.replies) + 1}"
            self.replies[session_id] = []
            return httpx.Response(201, json={"id": session_id})
        if path.endswith("/messages") and request.method == "POST":
            return self._turn(path.split("/")[3])
        if path.endswith("/messages"):
            items = [{"role": "assistant", "content": t} for t in self.replies[path.split("/")[3]]]
            return httpx.Response(200, json={"items": items, "next_cursor": None})
        if path.endswith("/memories"):
            return httpx.Response(200, json={"items": []})
        return httpx.Response(404, json={"error": {"code": "not_found"}})

    def _turn(self, session_id: str) -> httpx.Response:
        document = self.documents["Gift wrapping"]
        self.replies[session_id].append(document["content"])
        citation = {"document_id": document["id"], "chunk_id": f"chk_{document['version']}",
                    "title": document["title"], "section": ""}  # fmt: skip
        events = [
            (EventType.MESSAGE_COMPLETED, {"text": document["content"], "citations": [citation]}),
            (EventType.TURN_COMPLETED, {}),
        ]
        body = "".join(f"event: {kind}\ndata: {json.dumps(data)}\n\n" for kind, data in events)
        return httpx.Response(200, text=body, headers={"content-type": "text/event-stream"})


async def test_documents_go_in_before_their_session_and_citations_are_recorded() -> None:
    scenario = parse_scenario(yaml.safe_load(SCENARIO), "evals/knowledge/x.yaml")
    service = Service()
    transport = httpx.MockTransport(service)
    async with httpx.AsyncClient(transport=transport, base_url="http://hermes") as http:
        played = await play(scenario, ServiceClient(http))
    assert service.log[:3] == [
        "POST /v1/knowledge/documents",
        "POST /v1/sessions",
        "POST /v1/sessions/ses_1/messages",
    ]
    assert service.log.count("POST /v1/knowledge/documents") == 2
    assert service.documents["Gift wrapping"]["version"] == 2
    assert service.documents["Gift wrapping"]["format"] == "text"
    assert played.sessions[1].turns[0].citations[0]["chunk_id"] == "chk_2"
    assert judge_scenario(scenario, played) == []


async def test_a_refused_document_stops_the_scenario_before_its_session() -> None:
    scenario = parse_scenario(yaml.safe_load(SCENARIO), "evals/knowledge/x.yaml")

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"error": {"code": "forbidden", "message": "no"}})

    async with httpx.AsyncClient(
        transport=httpx.MockTransport(refuse), base_url="http://hermes"
    ) as http:
        with pytest.raises(EvalHttpError, match=r"^POST /v1/knowledge/documents: 403 forbidden$"):
            await play(scenario, ServiceClient(http))  # the runner reports it as an error
