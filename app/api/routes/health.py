"""Liveness/readiness and Prometheus metrics."""

from __future__ import annotations

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
    checks = await runtime.health_checks()
    ok = all(v == "ok" for v in checks.values())
    body = Health(
        status="ok" if ok else "degraded",
        version=__version__,
        uptime_s=runtime.uptime_s(),
        checks=checks,
    )
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


@router.get("/metrics", include_in_schema=False)
async def prometheus(runtime: RuntimeDep) -> Response:
    metrics.ACTIVE_SESSIONS.set(runtime.manager.active_sessions())
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)
