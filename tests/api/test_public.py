"""HERMES_PUBLIC_PATHS through HTTP: with authentication on, metrics and the API docs need a
credential (a key, or a signed-in desk's cookie) unless listed; health answers by default; the
desk page and its assets always load, since one signs in on them."""

from __future__ import annotations

from typing import Any

from app.testing import serve
from tests.api.test_sessions import assert_error

AGENT = "acme-agent-key-00001"
GUARDED = ("/metrics", "/docs", "/openapi.json", "/redoc")
ALWAYS_OPEN = ("/", "/assets/desk/desk.js", "/assets/desk/desk.css", "/assets/docs/favicon.png")


async def test_by_default_only_health_and_the_desk_page_are_open(make_settings: Any) -> None:
    settings = make_settings(auth="api_key", api_keys=[f"acme:agent:{AGENT}"])
    async with serve(settings) as svc:
        for path in ("/healthz", "/v1/healthz", *ALWAYS_OPEN):
            assert (await svc.client.get(path)).status_code == 200, path
        for path in GUARDED:
            assert_error(await svc.client.get(path), 401, "unauthorized")
            bad = await svc.client.get(path, headers={"X-API-Key": "not-a-key-at-all-000"})
            assert_error(bad, 401, "unauthorized")
            ok = await svc.client.get(path, headers={"Authorization": f"Bearer {AGENT}"})
            assert ok.status_code == 200, (path, ok.text)
        assert "hermes_" in (await svc.client.get("/metrics", headers={"X-API-Key": AGENT})).text
        # The desk signs in on its page; its cookie then opens the docs in the same browser.
        login = await svc.client.post("/v1/desk/login", json={"api_key": AGENT})
        assert login.status_code == 200, login.text
        for path in GUARDED:
            assert (await svc.client.get(path)).status_code == 200, path


async def test_listed_paths_need_no_key_and_health_can_be_closed(make_settings: Any) -> None:
    settings = make_settings(
        auth="api_key",
        api_keys=[f"acme:agent:{AGENT}"],
        public_paths=["metrics", "docs", "openapi.json", "redoc"],
    )
    async with serve(settings) as svc:
        for path in (*GUARDED, *ALWAYS_OPEN):
            assert (await svc.client.get(path)).status_code == 200, path
        assert_error(await svc.client.get("/healthz"), 401, "unauthorized")
        assert_error(await svc.client.get("/v1/sessions"), 401, "unauthorized")  # the API: never
        healthy = await svc.client.get("/healthz", headers={"X-API-Key": AGENT})
        assert healthy.status_code == 200


async def test_with_auth_off_everything_answers(make_settings: Any) -> None:
    async with serve(make_settings(auth="off")) as svc:
        for path in ("/healthz", *GUARDED, *ALWAYS_OPEN):
            assert (await svc.client.get(path)).status_code == 200, path
