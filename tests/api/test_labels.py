"""Names and labels people pick rows by (key names, session metadata, handoff reasons) cannot
carry NUL, bidirectional overrides or zero-width characters into a listing: through HTTP and
`hermes keys`, on both engines, what is stored and listed is what a reader sees."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.memory.records import Scope
from app.settings import Settings
from app.testing import LiveService, serve
from tests.api.test_keys_cli import hermes_keys

ADMIN = "acme-admin-key-0001"
PEPPER = "pepper-for-the-cli-tests-0001"  # hermes_keys' own
SPOOFED = "ivr\x00 front\u202eend\u200b\U000e0041"  # NUL, right-to-left override, ZWSP, tag
SHOWN = "ivr frontend"


def _as(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def label_settings(make_settings: Any) -> Settings:
    settings: Settings = make_settings(
        auth="api_key", api_keys=[f"acme:admin:{ADMIN}"], key_pepper=PEPPER
    )
    return settings


@pytest.fixture
async def svc(label_settings: Settings) -> AsyncIterator[LiveService]:
    async with serve(label_settings) as service:
        service.client.headers.update(_as(ADMIN))
        yield service


async def test_a_key_name_is_stored_and_listed_as_it_reads(
    svc: LiveService, label_settings: Settings
) -> None:
    made = await svc.client.post("/v1/keys", json={"role": "agent", "name": SPOOFED})
    assert made.status_code == 201, made.text
    assert made.json()["name"] == SHOWN
    code, _out, err = await hermes_keys(
        label_settings, "create", "--tenant", "acme", "--role", "agent", "--name", "cli\u202ekey"
    )
    assert code == 0, err
    names = sorted(k["name"] for k in (await svc.client.get("/v1/keys")).json()["items"])
    assert names == ["clikey", SHOWN]


async def test_session_metadata_is_stored_and_listed_as_it_reads(svc: LiveService) -> None:
    metadata = {"chan\u200bnel": "we\x00b", "tags": ["vi\u202ep", 3], "caller": {"name\n": "Li"}}
    created = await svc.client.post("/v1/sessions", json={"user_id": "u1", "metadata": metadata})
    assert created.status_code == 201, created.text
    clean = {"channel": "web", "tags": ["vip", 3], "caller": {"name ": "Li"}}
    assert created.json()["metadata"] == clean
    listed = (await svc.client.get("/v1/sessions")).json()["items"]
    assert [s["metadata"] for s in listed] == [clean]


async def test_a_handoff_reason_is_queued_as_it_reads(svc: LiveService) -> None:
    created = await svc.client.post("/v1/sessions", json={"user_id": "u1"})
    session_id = created.json()["id"]
    asked = await svc.client.post(
        f"/v1/sessions/{session_id}/handoff", json={"reason": "VIP\u202e pinwheel\x00"}
    )
    assert asked.status_code == 202, asked.text
    [item] = (await svc.client.get("/v1/handoffs")).json()["data"]
    assert item["reason"] == "VIP pinwheel"


async def test_a_forget_reason_of_invisible_characters_only_is_the_default_one(
    svc: LiveService,
) -> None:
    base = "/v1/users/u1/memories"
    made = await svc.client.post(base, json={"key": "pref.courier", "value": "SF"})
    assert made.status_code == 201, made.text
    memory_id = made.json()["id"]
    # Schema-valid (one character), nothing left once cleaned: the fuzz stage found it a 422.
    gone = await svc.client.delete(f"{base}/{memory_id}", params={"reason": "\x80\u200b"})
    assert gone.status_code == 204, gone.text
    trail = await svc.runtime.memory.queries.audit(Scope("acme", "u1"))
    assert [(x["action"], x["reason"]) for x in trail] == [("deleted", "operator_request")]
