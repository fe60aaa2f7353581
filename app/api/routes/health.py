"""Liveness/readiness and Prometheus metrics."""

from __future__ import annotations

import time

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app import __version__
from app.api.deps import RuntimeDep
from app.api.schemas import Health
from app.observability import metrics

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz(runtime: RuntimeDep) -> Response:
    checks: dict[str, str] = {}
    try:
        await runtime.db.fetchone("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"error: {type(exc).__name__}"
    ok = all(v == "ok" for v in checks.values())
    body = Health(
        status="ok" if ok else "degraded",
        version=__version__,
        uptime_s=round(time.time() - runtime.started_at, 3),
        checks=checks,
    )
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


@router.get("/metrics", include_in_schema=False)
async def prometheus(runtime: RuntimeDep) -> Response:
    metrics.ACTIVE_SESSIONS.set(runtime.manager.active_sessions())
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)
