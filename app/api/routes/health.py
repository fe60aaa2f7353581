"""Liveness/readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app import __version__
from app.api.deps import RuntimeDep
from app.api.schemas import Health
from app.observability import metrics
from app.runtime import health_status

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz(runtime: RuntimeDep) -> Response:
    checks = await runtime.health_checks()
    status = health_status(checks)
    body = Health(status=status, version=__version__, uptime_s=runtime.uptime_s(), checks=checks)
    # 503 only when this process cannot serve: a load balancer takes it out of rotation. A
    # degraded one (Redis away) serves every request and stays in.
    return JSONResponse(body.model_dump(), status_code=503 if status == "failing" else 200)


@router.get("/metrics", include_in_schema=False)
async def prometheus(runtime: RuntimeDep) -> Response:
    metrics.ACTIVE_SESSIONS.set(runtime.manager.active_sessions())
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)
