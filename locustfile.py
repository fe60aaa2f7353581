"""Load profile for a running Hermes (127.0.0.1 only): `pip install -e '.[load]'`, then
`locust -f locustfile.py --host http://127.0.0.1:8000 --headless -u 20 -r 5 -t 1m`.

Each simulated caller opens a session and talks: mostly plain JSON turns, some streamed turns
over SSE, and history reads, as an agent desktop does. A streamed turn is timed to its terminal
frame (not to the response headers) and counts as a failure when the turn fails
(`turn.failed`), the answer is not 200, or the stream ends without `turn.completed`. A JSON turn
counts as a failure unless its status is `completed`.

For the articles' 200-agent profile with CPU and memory figures, see bench/load.py.
"""

from __future__ import annotations

import json
import random
import time

from locust import HttpUser, between, task
from requests import RequestException, Response

QUESTIONS = [
    "我的订单到哪了",
    "where is my parcel SF123456789CN",
    "订单号 202405201234",
    "I want a refund for order 202405201235",
    "你好",
    "thanks, bye",
]


def follow_turn(response: Response) -> str | None:
    """Read a turn's SSE stream to its terminal frame: None if it completed, else why not."""
    if response.status_code != 200:
        return f"HTTP {response.status_code}"
    event = ""
    try:
        for line in response.iter_lines(decode_unicode=True):
            if line.startswith("event:"):
                event = line[6:].strip()
                if event == "turn.completed":
                    return None
            elif line.startswith("data:") and event == "turn.failed":
                return f"turn.failed: {json.loads(line[5:]).get('code', '?')}"
    except RequestException as exc:
        return f"stream broke: {type(exc).__name__}"
    return "no terminal frame"


class Caller(HttpUser):
    wait_time = between(0.5, 2.0)

    def on_start(self) -> None:
        response = self.client.post("/v1/sessions", json={"user_id": "cust_0001"})
        self.session_id = response.json()["id"]

    @task(6)
    def ask(self) -> None:
        with self.client.post(
            f"/v1/sessions/{self.session_id}/messages",
            json={"content": random.choice(QUESTIONS)},
            name="/v1/sessions/[id]/messages",
            catch_response=True,
        ) as response:
            if response.status_code == 200 and response.json().get("status") != "completed":
                response.failure(f"turn {response.json().get('status')}")

    @task(2)
    def ask_streaming(self) -> None:
        start = time.perf_counter()
        with self.client.post(
            f"/v1/sessions/{self.session_id}/messages",
            json={"content": random.choice(QUESTIONS)},
            headers={"Accept": "text/event-stream"},
            stream=True,
            name="/v1/sessions/[id]/messages (sse)",
            catch_response=True,
        ) as response:
            failure = follow_turn(response)
            # Locust timed the request to its headers; a turn ends at its terminal frame.
            response.request_meta["response_time"] = (time.perf_counter() - start) * 1000
            if failure is None:
                response.success()
            else:
                response.failure(failure)

    @task(1)
    def history(self) -> None:
        self.client.get(
            f"/v1/sessions/{self.session_id}/messages", name="/v1/sessions/[id]/messages (list)"
        )
