"""Run the fake OpenAI-compatible server on a port until killed (used by benchmarks).

By default every call gets the same short text reply at once (bench/turn_overhead.py). With
`--rules` each call is answered from its own messages by `RuleModel` (tool calls for order
numbers, tracking numbers, complaints; text after a tool result), each after `--delay` seconds,
so many sessions can talk to it at once (bench/load.py).
"""

from __future__ import annotations

import argparse
import os
import threading

from app.llm.testing import FakeLLMServer, Reply
from app.llm.testing_rules import RuleModel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument(
        "--reply", default="Your order 202405201234 has shipped and arrives tomorrow."
    )
    parser.add_argument("--rules", action="store_true", help="answer with RuleModel")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    args = parser.parse_args()
    responder = RuleModel(delay=args.delay) if args.rules else None
    server = FakeLLMServer(default=Reply(args.reply, delay=args.delay), responder=responder)
    server.start()
    server.requests = _Discard()  # type: ignore[assignment]  # don't grow memory during a bench
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.port))
    # Renamed into place so a reader never sees a half-written file.
    os.replace(args.port_file + ".tmp", args.port_file)
    threading.Event().wait()


class _Discard(list):  # type: ignore[type-arg]
    def append(self, _item: object) -> None:
        return None


if __name__ == "__main__":
    main()
