"""What a browser opens: the agent desk at `/` and the API docs at `/docs` and `/redoc`.

Everything is served from this process, nothing from a CDN: the desk is plain HTML, CSS and
JavaScript in `app/api/static/desk/` (no build step), and Swagger UI's and ReDoc's assets come
from the `fastapi-offline` package, which ships them.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import FileResponse, HTMLResponse
from fastapi.staticfiles import StaticFiles

DESK_DIR = Path(__file__).resolve().parents[1] / "static" / "desk"
DOCS_ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"

# The desk loads only its own files and talks only to this origin; nothing may frame it.
DESK_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)

router = APIRouter(include_in_schema=False)


@router.get("/")
async def desk() -> FileResponse:
    return FileResponse(
        DESK_DIR / "index.html",
        headers={
            "Content-Security-Policy": DESK_CSP,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache",
        },
    )


@router.get("/docs")
async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="Hermes Agent - Swagger UI",
        oauth2_redirect_url="/docs/oauth2-redirect",
        swagger_js_url="/assets/docs/swagger-ui-bundle.js",
        swagger_css_url="/assets/docs/swagger-ui.css",
        swagger_favicon_url="/assets/docs/favicon.png",
    )


@router.get("/docs/oauth2-redirect")
async def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc")
async def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url="/openapi.json",
        title="Hermes Agent - ReDoc",
        redoc_js_url="/assets/docs/redoc.standalone.js",
        redoc_favicon_url="/assets/docs/favicon.png",
        with_google_fonts=False,
    )


def install_pages(app: FastAPI) -> None:
    """The desk, its files, the docs and their assets (the app is made with docs_url=None)."""
    app.include_router(router)
    app.mount("/assets/desk", StaticFiles(directory=DESK_DIR), name="desk-assets")
    app.mount("/assets/docs", StaticFiles(directory=DOCS_ASSETS), name="docs-assets")
