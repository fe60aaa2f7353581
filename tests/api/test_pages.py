"""What a browser opens is served by Hermes itself: the desk at `/` with a strict content
policy, Swagger UI at `/docs` and ReDoc at `/redoc` with their assets, and nothing from a CDN."""

from __future__ import annotations

import re

import pytest

from app.api.routes.pages import DESK_DIR
from app.testing import LiveService

EXTERNAL = re.compile(r"""(?:src|href)=["']?(?:https?:)?//""", re.I)


@pytest.fixture
def backend() -> str:
    return "sqlite"  # no storage involved


async def test_the_desk_is_served_at_the_root_with_its_own_files_only(
    service: LiveService,
) -> None:
    page = await service.client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert not EXTERNAL.search(page.text)
    assets = re.findall(r"""(?:src|href)="(/assets/desk/[^"]+)""", page.text)
    assert sorted(assets) == [
        "/assets/desk/desk.css",
        "/assets/desk/desk.js",
        "/assets/desk/knowledge.css",
        "/assets/desk/knowledge.js",
    ]
    for asset in assets:
        served = await service.client.get(asset)
        assert served.status_code == 200
        assert served.text == (DESK_DIR / asset.rsplit("/", 1)[1]).read_text("utf-8")
        assert "http://" not in served.text and "https://" not in served.text


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
async def test_the_api_docs_load_their_assets_from_this_service(
    service: LiveService, path: str
) -> None:
    page = await service.client.get(path)
    assert page.status_code == 200
    assert not EXTERNAL.search(page.text), "an asset from another host"
    assert "cdn" not in page.text.lower() and "fonts.googleapis" not in page.text
    assets = re.findall(r"""['"](/assets/docs/[^'"]+)['"]""", page.text)
    assert assets, page.text
    for asset in assets:
        served = await service.client.get(asset)
        assert served.status_code == 200, asset
        assert len(served.content) > 1000
    assert (await service.client.get("/openapi.json")).status_code == 200
