"""The optional semantic path: vectors as blobs, cosine with numpy, a real LiteLLM call."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import numpy as np
import pytest

from app.memory.embeddings import LiteLLMEmbedder, cosine, pack, unpack
from app.memory.service import MemoryService
from app.memory.testing import FakeEmbedder, FixedClock
from app.storage.session_writer import NO_SESSION
from tests.memory.conftest import ALICE, BOB


def test_vectors_are_stored_unit_length_and_compared_by_cosine():
    blob = pack([3.0, 4.0])
    assert np.allclose(unpack(blob), [0.6, 0.8])
    sims = cosine(np.array([1.0, 0.0]), [pack([1, 0]), pack([0, 1]), pack([1, 1]), pack([1, 2, 3])])
    assert np.allclose(sims, [1.0, 0.0, 2**-0.5, 0.0])  # a size mismatch scores 0
    assert cosine(np.zeros(2), [blob]).tolist() == [0.0]


async def test_a_memory_with_no_shared_words_is_recalled_by_meaning(db, clock: FixedClock):
    embedder = FakeEmbedder(table={"金毛": [1.0, 0.0, 0.0], "狗": [0.96, 0.28, 0.0]}, dim=3)
    memory = MemoryService(db, clock=clock, embedder=embedder)
    await memory.upsert(ALICE, "note:pet", "家里养了一只金毛", tier="node")
    await memory.upsert(BOB, "note:pet", "家里养了一只金毛", tier="node")
    lexical_only = MemoryService(db, clock=clock)
    assert (
        await lexical_only.recall(ALICE, "上次说的那条狗", writer=NO_SESSION, force=True)
    ).items == []
    got = await memory.recall(ALICE, "上次说的那条狗", writer=NO_SESSION, force=True)
    assert [(s.item.user_id, s.item.value) for s in got.items] == [("alice", "家里养了一只金毛")]
    assert got.items[0].lexical == pytest.approx(0.96, abs=0.01)


async def test_a_failing_embedder_never_fails_a_write_or_a_recall(db, clock: FixedClock):
    embedder = FakeEmbedder()
    embedder.fail = True
    memory = MemoryService(db, clock=clock, embedder=embedder)
    written = await memory.upsert(ALICE, "preference.courier", "顺丰")
    assert written.action == "created"
    got = await memory.recall(ALICE, "还是用上次的快递", writer=NO_SESSION)
    assert [s.item.value for s in got.items] == ["顺丰"]
    assert len(embedder.calls) == 2  # one for the write, one for the query


class _Embeddings(BaseHTTPRequestHandler):
    inputs: ClassVar[list[list[str]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.inputs.append(list(body["input"]))
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(text)), 1.0, 0.0]}
            for i, text in enumerate(body["input"])
        ]
        payload = json.dumps(
            {"object": "list", "data": data, "model": body["model"],
             "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        ).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def embedding_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Embeddings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_litellm_embedder_calls_an_openai_compatible_endpoint(embedding_server: str):
    embedder = LiteLLMEmbedder("openai/fake-embed", api_base=embedding_server, api_key="sk-test")
    vectors = await embedder.embed(["abc", "hello"])
    assert vectors == [[3.0, 1.0, 0.0], [5.0, 1.0, 0.0]]
    assert _Embeddings.inputs[-1] == ["abc", "hello"]
