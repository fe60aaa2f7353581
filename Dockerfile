# Hermes Agent: slim image, non-root, SQLite on a volume at /data.
FROM python:3.11-slim AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    HERMES_DB_PATH=/data/hermes.db \
    HERMES_DEMO_DB_PATH=/data/demo.db

RUN useradd --create-home --uid 10001 hermes \
    && mkdir -p /data && chown hermes:hermes /data

WORKDIR /app
# Dependencies first, so code changes don't reinstall them.
COPY pyproject.toml README.md ./
RUN mkdir app && touch app/__init__.py && pip install . && pip uninstall -y hermes-agent
COPY . .
RUN pip install --no-deps -e . && chown -R hermes:hermes /app

USER hermes
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"
CMD ["hermes", "serve", "--host", "0.0.0.0", "--port", "8000"]
