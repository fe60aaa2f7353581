"""`hermes keys` as a separate process against a running service's database (both engines): a key
the command makes works in the service at once, is printed once and never listed, and a
rotation or revocation from the command holds in the service within HERMES_KEY_CACHE_TTL_S."""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.settings import Settings
from app.testing import LiveService, serve
from tests.api.test_sessions import assert_error

ADMIN = "acme-admin-key-0001"
PEPPER = "pepper-for-the-cli-tests-0001"
CACHE_TTL_S = 0.5


@pytest.fixture
def cli_settings(make_settings: Any) -> Settings:
    settings: Settings = make_settings(
        auth="api_key",
        api_keys=[f"acme:admin:{ADMIN}"],
        key_pepper=PEPPER,
        key_cache_ttl_s=CACHE_TTL_S,
    )
    return settings


@pytest.fixture
async def svc(cli_settings: Settings) -> AsyncIterator[LiveService]:
    async with serve(cli_settings) as service:
        yield service


async def hermes_keys(settings: Settings, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env["HERMES_KEY_PEPPER"] = PEPPER
    env["HERMES_DB_PATH"] = str(settings.storage.db_path)
    if settings.storage.postgres_url is not None:
        env["HERMES_DATABASE_URL"] = settings.storage.postgres_url
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app.cli",
        "keys",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _as(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _refused_within(svc: LiveService, key: str, bound_s: float) -> float:
    """Seconds until the service refuses `key` (failing after `bound_s`)."""
    start = time.monotonic()
    while time.monotonic() - start < bound_s:
        response = await svc.client.get("/v1/sessions", headers=_as(key))
        if response.status_code == 401:
            return time.monotonic() - start
        assert response.status_code == 200, response.text
        await asyncio.sleep(0.05)
    raise AssertionError(f"the key still worked after {bound_s} s")


async def test_keys_made_by_the_command_work_in_the_service(
    svc: LiveService, cli_settings: Settings
) -> None:
    code, out, err = await hermes_keys(
        cli_settings, "create", "--tenant", "acme", "--role", "customer", "--user", "u1",
        "--expires", "90d", "--name", "ivr",
    )  # fmt: skip
    assert code == 0, err
    key = out.strip()
    assert out.count("\n") == 1 and key.startswith("hk_")  # the key alone, once
    assert "tenant acme, role customer, user u1" in err and "shown this once" in err
    key_id = "key_" + key.split("_")[1]
    assert key_id in err and key not in err

    created = await svc.client.post("/v1/sessions", json={"user_id": "u1"}, headers=_as(key))
    assert created.status_code == 201, created.text

    code, out, err = await hermes_keys(cli_settings, "list", "--tenant", "acme")
    assert code == 0, err
    assert key_id in out and "role=customer" in out and "user=u1" in out and "status=active" in out
    assert key.split("_", 2)[2] not in out  # the secret (it may hold "_" itself)

    code, out, err = await hermes_keys(cli_settings, "rotate", key_id)
    assert code == 0, err
    new_key = out.strip()
    assert new_key.startswith("hk_") and new_key != key and f"{key_id} is revoked" in err
    # The service cached the old key's row: it holds for at most the cache's lifetime.
    assert await _refused_within(svc, key, CACHE_TTL_S + 5) <= CACHE_TTL_S + 5
    assert (await svc.client.get("/v1/sessions", headers=_as(new_key))).status_code == 200
    new_id = "key_" + new_key.split("_")[1]

    code, _out, err = await hermes_keys(cli_settings, "revoke", new_id)
    assert code == 0 and f"revoked {new_id}" in err
    await _refused_within(svc, new_key, CACHE_TTL_S + 5)
    refused = await svc.client.get("/v1/sessions", headers=_as(new_key))
    assert "revoked" in assert_error(refused, 401, "unauthorized")["message"]

    code, out, _err = await hermes_keys(cli_settings, "list")
    assert code == 0 and out == ""  # revoked keys are listed only with --all
    code, out, _err = await hermes_keys(cli_settings, "list", "--all")
    assert out.count("status=revoked") == 2

    trail = await svc.client.get("/v1/audit", headers=_as(ADMIN))
    entries = trail.json()["items"]
    assert [e["action"] for e in entries] == ["key.created", "key.rotated", "key.revoked"]
    assert {e["actor"] for e in entries} == {f"cli:{getpass.getuser()}"}
    assert key not in trail.text and new_key not in trail.text


async def test_the_command_refuses_what_it_cannot_do(cli_settings: Settings) -> None:
    code, _out, err = await hermes_keys(
        cli_settings, "create", "--tenant", "acme", "--role", "agent", "--expires", "soon"
    )
    assert code == 2 and "not a duration" in err
    code, _out, err = await hermes_keys(cli_settings, "revoke", "key_0123456789abcdef")
    assert code == 1 and "no key key_0123456789abcdef" in err
    code, _out, err = await hermes_keys(
        cli_settings, "create", "--tenant", "acme", "--role", "boss"
    )
    assert code == 2 and "invalid choice" in err
