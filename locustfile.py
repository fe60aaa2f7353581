"""The articles' call-centre profile for locust, against a running Hermes on 127.0.0.1.

    locust -f locustfile.py --host http://127.0.0.1:8000 --headless -u 50 -r 25 -t 60s \
        --demo-db var/demo.db

Each simulated customer is a demo customer (read from the demo database Hermes serves, so the
order and parcel numbers are theirs) in one session, taking turns over SSE with think time
normal(3 s, 1 s); the task mix is 60 % order status, 20 % password reset, 15 % shipment
tracking, 5 % complaint, the same messages as bench/load.py's generator.

Every turn is its own entry, `turn <task>`, timed from its POST to its `turn.completed` frame
(not to the response headers). A turn is a failure when it ends in `turn.failed`, the answer is
not 200, the connection breaks, or no terminal frame comes within `--turn-timeout` seconds.
Time to the first `message.delta` frame, from the same POST, is reported as `ttfd <task>`.
`make load-ci` (bench/load_ci.py) runs this headless and gates on failures and p95.

Two options for long runs (bench/soak.py): `--call-turns N` ends a customer's call after N turns
and starts the next in a new session (0, the default: one session for the whole run), and
`--turn-log FILE` appends one line per turn (`<unix time> <ms> <ok 0|1> <task>`) for per-minute
figures.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from locust import HttpUser, events, task
from locust.env import Environment
from requests import RequestException

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `bench` from this checkout

from bench._load_users import MESSAGES, customers
from bench._locust_turns import read_turn

THINK_MEAN_S, THINK_SD_S = 3.0, 1.0
_people: list[dict[str, Any]] = []


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    parser.add_argument("--demo-db", default="var/demo.db", help="the demo database Hermes serves")
    parser.add_argument("--turn-timeout", type=float, default=30.0, help="seconds per turn")
    parser.add_argument("--call-turns", type=int, default=0, help="turns per session (0: all)")
    parser.add_argument("--turn-log", default="", help="append one line per turn to this file")


_turn_log: list[TextIO] = []


@events.init.add_listener
def _load_customers(environment: Environment, **_: Any) -> None:
    if environment.parsed_options is None:
        return
    if environment.parsed_options.turn_log:
        _turn_log.append(open(environment.parsed_options.turn_log, "a", buffering=1))
    _people.extend(customers(Path(environment.parsed_options.demo_db)))
    if not _people:
        raise SystemExit(f"no demo customers in {environment.parsed_options.demo_db}")


def _log_turn(name: str, seconds: float, *, ok: bool) -> None:
    for log in _turn_log:
        log.write(f"{time.time():.3f} {seconds * 1000:.1f} {int(ok)} {name}\n")


class Customer(HttpUser):
    def wait_time(self) -> float:
        return max(0.0, random.gauss(THINK_MEAN_S, THINK_SD_S))

    def on_start(self) -> None:
        self.me = random.choice(_people)
        options = self.environment.parsed_options
        self.turn_timeout_s = options.turn_timeout if options else 30.0
        self.call_turns = options.call_turns if options else 0
        self.new_call()

    def new_call(self) -> None:
        made = self.client.post("/v1/sessions", json={"user_id": self.me["customer"]})
        made.raise_for_status()
        self.session_id = made.json()["id"]
        self.turns_in_call = 0

    @task(60)
    def order_status(self) -> None:
        self.turn("order_status")

    @task(20)
    def password_reset(self) -> None:
        self.turn("password_reset")

    @task(15)
    def shipment(self) -> None:
        self.turn("shipment")

    @task(5)
    def complaint(self) -> None:
        self.turn("complaint")

    def turn(self, name: str) -> None:
        if self.call_turns and self.turns_in_call >= self.call_turns:
            self.new_call()
        self.turns_in_call += 1
        text = random.choice(MESSAGES[name]).format(
            order=random.choice(self.me["orders"]), parcel=random.choice(self.me["parcels"])
        )
        start = time.perf_counter()
        with self.client.post(
            f"/v1/sessions/{self.session_id}/messages",
            json={"content": text},
            headers={"Accept": "text/event-stream"},
            stream=True,
            timeout=(10, self.turn_timeout_s),
            name=f"turn {name}",
            catch_response=True,
        ) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}")
                _log_turn(name, time.perf_counter() - start, ok=False)
                return
            try:
                reading = read_turn(
                    response.iter_lines(decode_unicode=True), start, self.turn_timeout_s
                )
            except RequestException as exc:
                response.failure(f"stream broke: {type(exc).__name__}")
                _log_turn(name, time.perf_counter() - start, ok=False)
                return
            # Locust timed the request to its headers; the turn ends at its terminal frame.
            response.request_meta["response_time"] = reading.seconds * 1000
            if reading.failure is None:
                response.success()
            else:
                response.failure(reading.failure)
            _log_turn(name, reading.seconds, ok=reading.failure is None)
        if reading.first_delta_s is not None:
            events.request.fire(
                request_type="SSE",
                name=f"ttfd {name}",
                response_time=reading.first_delta_s * 1000,
                response_length=0,
                exception=None,
                context={},
            )
