"""Load profile for a running Hermes (127.0.0.1 only): `pip install -e '.[load]'`, then
`locust -f locustfile.py --host http://127.0.0.1:8000 --headless -u 20 -r 5 -t 1m`.

Each simulated caller opens a session and talks: mostly plain JSON turns, some streamed turns
over SSE, and history reads, as an agent desktop does.
"""

from __future__ import annotations

import random

from locust import HttpUser, between, task

QUESTIONS = [
    "我的订单到哪了",
    "where is my parcel SF123456789CN",
    "订单号 202405201234",
    "I want a refund for order 202405201235",
    "你好",
    "thanks, bye",
]


class Caller(HttpUser):
    wait_time = between(0.5, 2.0)

    def on_start(self) -> None:
        response = self.client.post("/v1/sessions", json={"user_id": "cust_0001"})
        self.session_id = response.json()["id"]

    @task(6)
    def ask(self) -> None:
        self.client.post(
            f"/v1/sessions/{self.session_id}/messages",
            json={"content": random.choice(QUESTIONS)},
            name="/v1/sessions/[id]/messages",
        )

    @task(2)
    def ask_streaming(self) -> None:
        with self.client.post(
            f"/v1/sessions/{self.session_id}/messages",
            json={"content": random.choice(QUESTIONS)},
            headers={"Accept": "text/event-stream"},
            stream=True,
            name="/v1/sessions/[id]/messages (sse)",
            catch_response=True,
        ) as response:
            for line in response.iter_lines():
                if line and line.startswith(b"event: turn."):
                    if line.endswith((b"completed", b"failed")):
                        break
            response.success()

    @task(1)
    def history(self) -> None:
        self.client.get(
            f"/v1/sessions/{self.session_id}/messages", name="/v1/sessions/[id]/messages (list)"
        )
