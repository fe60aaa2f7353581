"""The chain as configured: each model on its path, and no LiteLLM (nor the openai SDK, nor
scikit-learn) in a process that serves only the offline model or OpenAI-compatible ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.llm.build import build_chain
from app.llm.catalog import LOCAL_MODEL, ModelApi, ModelConfig
from app.llm.litellm_gateway import LiteLLMModel
from app.llm.local.model import LocalModel
from app.llm.openai_compat import OpenAICompatModel
from app.llm.testing import FakeLLMServer
from app.nlu.testing import ScriptedParser
from tests.conftest import copy_demo
from tests.llm.paths import chain_options


@pytest.mark.parametrize(
    ("api", "expected"),
    [
        ("auto", [OpenAICompatModel, OpenAICompatModel, LiteLLMModel, LocalModel]),
        ("litellm", [LiteLLMModel, LiteLLMModel, LiteLLMModel, LocalModel]),
    ],
)
async def test_each_model_takes_its_path_in_order(
    fake_llm: FakeLLMServer, api: ModelApi, expected: list[type]
) -> None:
    configs = [
        ModelConfig("openai/a", fake_llm.url, "sk-test"),
        ModelConfig("deepseek/deepseek-chat", api_key="sk-test"),
        ModelConfig("anthropic/claude-3-5-haiku", api_key="sk-test"),
        ModelConfig(LOCAL_MODEL),
    ]
    chain = build_chain(configs, chain_options(api), parser=ScriptedParser())
    try:
        assert chain.models == [c.model for c in configs]
        assert [type(link.model) for link in chain._links] == expected
    finally:
        await chain.aclose()


def test_the_local_model_needs_a_parser() -> None:
    with pytest.raises(ValueError, match="parser"):
        build_chain([ModelConfig(LOCAL_MODEL)], chain_options())


_SERVE_ONE_TURN = """
import asyncio, sys
from pathlib import Path
from app.testing import serve
from app.settings import Settings

async def main() -> None:
    tmp, model, base = Path(sys.argv[1]), sys.argv[2], sys.argv[3] or None
    settings = Settings(
        db_path=tmp / "hermes.db", demo_db_path=tmp / "demo.db", model=model,
        model_api_base=base, model_api_key="sk-test", log_json=False,
    )
    async with serve(settings) as svc:
        session = (await svc.client.post("/v1/sessions", json={"user_id": "u1"})).json()["id"]
        reply = await svc.client.post(f"/v1/sessions/{session}/messages", json={"content": "hi"})
        assert reply.status_code == 200, reply.text
        print(reply.json()["model"])
        servers = (await svc.client.get("/v1/mcp/servers")).json()["items"]
        assert servers == [], servers
    heavy = ("litellm", "openai", "sklearn", "mcp", "mcp_types")
    print(",".join(m for m in heavy if m in sys.modules) or "none")

asyncio.run(main())
"""


@pytest.mark.parametrize("model", [LOCAL_MODEL, "openai/test-model"])
def test_serving_without_litellm_never_imports_it(
    model: str, fake_llm: FakeLLMServer, demo_template: Path, tmp_path: Path
) -> None:
    copy_demo(demo_template, tmp_path / "demo.db")
    base = fake_llm.url if model.startswith("openai/") else ""
    result = subprocess.run(
        [sys.executable, "-c", _SERVE_ONE_TURN, str(tmp_path), model, base],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answered_by, heavy = result.stdout.split()
    assert answered_by == model.removeprefix("openai/")
    assert heavy == "none"  # not litellm, the openai SDK, scikit-learn, nor (no servers) MCP
    if base:
        assert fake_llm.requests_for("test-model"), "the direct path did not call the server"
