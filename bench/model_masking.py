"""What the model masking policy costs per model call: hiding the values in a request's messages
(every call, every tool round) and reading a streamed answer back.

    .venv/bin/python -m bench.model_masking [--turns 20]

The context is `--turns` turns of a call-centre conversation (a customer message with a phone
number or an email, a tool call and its JSON result, a reply), the system prompt first: about
the size the 32,000-token budget lets through after 20 turns. Prints the median of 200 runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from app.llm.messages import ChatMessage
from app.llm.pseudonyms import KINDS, Pseudonyms
from app.settings import DEFAULT_SYSTEM_PROMPT


def context(turns: int) -> list[ChatMessage]:
    messages: list[ChatMessage] = [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT}]
    for n in range(turns):
        said = (
            f"我的手机号是1381234{n:04d}，订单202405201{n:03d}还没到，能帮我查一下吗？"
            if n % 2
            else f"Please send the confirmation to customer{n}@example.com, order 202405201{n:03d}."
        )
        result = {
            "status": "success",
            "data": {"order_id": f"202405201{n:03d}", "status": "shipped", "items": ["x"] * 5},
        }
        messages += [
            {"role": "user", "content": said},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{n}",
                        "type": "function",
                        "function": {
                            "name": "query_order_status",
                            "arguments": json.dumps({"order_id": f"202405201{n:03d}"}),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{n}", "content": json.dumps(result)},
            {"role": "assistant", "content": "Your order has shipped and arrives tomorrow. " * 3},
        ]
    return messages


def median_ms(run: object, repeat: int = 200) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    messages = context(args.turns)
    chars = sum(len(json.dumps(m, ensure_ascii=False)) for m in messages)
    for mode in ("mask", "pseudonymise"):
        hide = median_ms(lambda m=mode: Pseudonyms(m, KINDS, b"k").hide_messages(messages))
        print(f"{mode:13s} hide {len(messages)} messages ({chars} chars): {hide:.2f} ms")
    table = Pseudonyms("pseudonymise", KINDS, b"k")
    hidden = table.hide_messages(messages)
    reply = (str(hidden[1]["content"]) + " ") * 4
    pieces = [reply[i : i + 4] for i in range(0, len(reply), 4)]

    def stream() -> None:
        revealer = table.revealer()
        for piece in pieces:
            revealer.feed(piece)
        revealer.flush()

    print(f"reveal a {len(reply)}-char reply in {len(pieces)} pieces: {median_ms(stream):.3f} ms")


if __name__ == "__main__":
    main()
