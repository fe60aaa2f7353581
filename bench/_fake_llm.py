"""Run the fake OpenAI-compatible server on a port until killed (used by benchmarks)."""

from __future__ import annotations

import argparse
import threading

from app.llm.testing import FakeLLMServer, Reply


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument(
        "--reply", default="Your order 202405201234 has shipped and arrives tomorrow."
    )
    args = parser.parse_args()
    server = FakeLLMServer(default=Reply(args.reply)).start()
    server.requests = _Discard()  # type: ignore[assignment]  # don't grow memory during a bench
    with open(args.port_file, "w") as f:
        f.write(str(server.port))
    threading.Event().wait()


class _Discard(list):  # type: ignore[type-arg]
    def append(self, _item: object) -> None:
        return None


if __name__ == "__main__":
    main()
