"""Which of the routes outside `/v1` answer without credentials (HERMES_PUBLIC_PATHS).

Health, metrics and the API docs are guarded here, in front of the app (FastAPI serves
`/openapi.json` itself); each needs any valid credential unless its name is listed. The
default lists `healthz` only, so a load balancer can probe. The desk page at `/` and its
assets (`/assets/…`) always load: they hold no data, and one signs in on them; a signed-in
desk's cookie opens the docs too. With HERMES_AUTH=off nothing is guarded.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.deps import request_principal
from app.api.errors import INTERNAL, error_response, wire_for
from app.errors import HermesError

GUARDED = {
    "/healthz": "healthz",
    "/v1/healthz": "healthz",
    "/metrics": "metrics",
    "/docs": "docs",
    "/docs/oauth2-redirect": "docs",
    "/openapi.json": "openapi.json",
    "/redoc": "redoc",
}


class PublicPathsGuard:
    def __init__(self, app: ASGIApp, public: list[str]) -> None:
        self.app = app
        self.guarded = {path for path, name in GUARDED.items() if name not in public}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in self.guarded:
            request = Request(scope, receive)
            try:
                await request_principal(request)
            except HermesError as exc:
                wire = wire_for(type(exc)) or INTERNAL
                response = (
                    JSONResponse(exc.body(), status_code=wire.status)
                    if wire.code is None
                    else error_response(wire.status, wire.code, wire.message or "")
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
