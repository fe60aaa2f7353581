"""The FastAPI application: routers, error shape, middleware, and the runtime in the lifespan."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from app import __version__
from app.api.auth import Authenticator
from app.api.errors import install_error_handlers
from app.api.middleware import BodyLimitMiddleware, ObservabilityMiddleware
from app.api.openapi import install_openapi
from app.api.public import PublicPathsGuard
from app.api.routes import (
    approvals,
    audit,
    credentials,
    handoffs,
    health,
    keys,
    knowledge,
    mcp,
    memories,
    nlu,
    sessions,
    steps,
    tools,
    turns,
)
from app.api.routes.pages import install_pages
from app.api.tokens import TokenSigner
from app.llm.gateway import ChatModel
from app.runtime import open_runtime
from app.settings import Settings, load_settings

# Response headers a browser client on another origin must be able to read: that a POST was a
# replay of an earlier one, and the request id to quote in a support ticket.
EXPOSED_HEADERS = ("Idempotent-Replayed", "X-Request-ID")


def create_app(settings: Settings | None = None, *, model: ChatModel | None = None) -> FastAPI:
    settings = settings or load_settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime(settings, model=model) as runtime:
            app.state.runtime = runtime
            app.state.auth.attach(runtime.db, settings)
            # LiteLLM and the models leave a large, long-lived object graph behind at start-up;
            # moving it out of the collector's reach keeps GC pauses off the request path.
            gc.collect()
            gc.freeze()
            yield

    app = FastAPI(
        title="Hermes Agent",
        version=__version__,
        description="Agent runtime for call-centre frontends.",
        lifespan=lifespan,
        docs_url=None,  # served from local assets by install_pages: no CDN
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.auth = Authenticator.from_settings(settings)
    secret = settings.auth.secret
    app.state.signer = TokenSigner(secret.get_secret_value().encode() if secret else None)
    install_error_handlers(app)
    install_openapi(app, auth_required=settings.auth.mode != "off")
    app.include_router(health.router)
    app.include_router(health.router, prefix="/v1", include_in_schema=False)
    app.include_router(sessions.router)
    app.include_router(turns.router)
    app.include_router(approvals.router)
    app.include_router(handoffs.router)
    app.include_router(tools.router)
    app.include_router(steps.router)
    app.include_router(nlu.router)
    app.include_router(memories.router)
    app.include_router(knowledge.router)
    app.include_router(mcp.router)
    app.include_router(credentials.router)
    app.include_router(keys.router)
    install_pages(app)
    app.include_router(audit.router)
    if settings.http.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.http.cors_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=[
                "Authorization",
                "X-API-Key",
                "Content-Type",
                "Last-Event-ID",
                "X-Request-ID",
            ],
            # Without these a script on another origin cannot read them from a response.
            expose_headers=list(EXPOSED_HEADERS),
        )
    if settings.auth.mode != "off":
        app.add_middleware(PublicPathsGuard, public=settings.auth.public_paths)
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.http.max_body_bytes,
        paths={knowledge.DOCUMENTS_PATH: knowledge.body_limit(settings.knowledge)},
    )
    app.add_middleware(ObservabilityMiddleware)
    return app


def worker_app() -> FastAPI:
    """The app of one `hermes serve --workers N` process: uvicorn starts each worker fresh, so
    each reads the settings from the environment and sets up its own logging."""
    from app.observability.logs import configure_logging

    settings = load_settings()
    configure_logging(settings.observability.log_level, settings.observability.log_json)
    return create_app(settings)
