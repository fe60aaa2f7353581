"""Generate the demo backend: the fixtures, then a few hundred seeded random customers with
orders, shipments and after-sales history, written to their own SQLite file (WAL).

Everything derives from the seed and a fixed reference time (the "now" of the demo world),
never from the clock, so the same seed always produces the same file contents.
"""

from __future__ import annotations

import os
import random
import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from app.demo import vocab
from app.demo.fixtures import add_fixtures
from app.demo.schema import DDL, SCHEMA_VERSION, TABLES
from app.demo.texts import TRACKING
from app.demo.world import CST, Event, Item, World, iso
from app.errors import Fault

DEFAULT_SEED = 20240520
EXTRA_CUSTOMERS = 300
REFERENCE = datetime(2024, 5, 22, 10, 0, tzinfo=CST)

T = TypeVar("T")

_ORDER_STATUS = (
    ("pending", 5), ("paid", 14), ("shipped", 26),
    ("delivered", 39), ("cancelled", 8), ("refunded", 8),
)  # fmt: skip
_IN_FLIGHT = (("created", 10), ("in_transit", 55), ("out_for_delivery", 25), ("exception", 10))
# Tracking stages in order, with the hours each one takes after the previous one.
_STAGES = (
    ("created", 0, 0),
    ("picked_up", 2, 8),
    ("departed", 3, 8),
    ("arrived", 12, 40),
    ("out_for_delivery", 6, 14),
)
_LAST_STAGE = {"created": 1, "in_transit": 3, "out_for_delivery": 5, "exception": 5}


class DemoDataError(Fault):
    """The demo file is missing pieces or from another version; regenerating fixes it."""


def _weighted(rng: random.Random, options: Sequence[tuple[T, int]]) -> T:
    return rng.choices([o for o, _ in options], weights=[w for _, w in options])[0]


class _Filler:
    def __init__(self, rng: random.Random, world: World) -> None:
        self.rng = rng
        self.world = world

    def populate(self, customers: int) -> None:
        for n in range(customers):
            self._customer(f"cust_{n + 3:04d}")

    # -- customers ------------------------------------------------------------------------------

    def _customer(self, cid: str) -> None:
        rng = self.rng
        language = "en" if rng.random() < 0.25 else "zh"
        if language == "zh":
            (surname, s_py), (given, g_py) = (
                rng.choice(vocab.SURNAMES),
                rng.choice(vocab.GIVEN_NAMES),
            )
            name, local = surname + given, f"{g_py}.{s_py}"
        else:
            first, last = rng.choice(vocab.FIRST_NAMES), rng.choice(vocab.LAST_NAMES)
            name, local = f"{first} {last}", f"{first}.{last}".lower()
        city = rng.choice(vocab.CITIES)
        address = self._address(city, language)
        self.world.customer(
            cid,
            name=name,
            language=language,
            phone=self._phone(),
            email=self._email(local),
            address=address,
            created_at=REFERENCE - timedelta(days=rng.uniform(30, 1500)),
        )
        orders = [
            self._order(cid, language, address, city)
            for _ in range(rng.choice((1, 1, 2, 2, 2, 3, 3, 4)))
        ]
        if rng.random() < 0.25:
            category, zh, en = rng.choice(vocab.TICKET_SUMMARIES)
            self.world.ticket(
                customer_id=cid,
                order_id=rng.choice(orders) if rng.random() < 0.6 else None,
                category=category,
                priority=_weighted(rng, (("low", 2), ("normal", 6), ("high", 2))),
                status=_weighted(rng, (("open", 3), ("resolved", 5), ("closed", 2))),
                summary=zh if language == "zh" else en,
                created_at=REFERENCE - timedelta(hours=rng.uniform(2, 2000)),
            )
        if rng.random() < 0.1:
            self.world.contact_change(
                customer_id=cid,
                field="address",
                old_value=self._address(rng.choice(vocab.CITIES), language),
                new_value=address,
                created_at=REFERENCE - timedelta(days=rng.uniform(160, 400)),
            )

    def _address(self, city: vocab.City, language: str) -> str:
        rng = self.rng
        district, street = rng.choice(city.districts), rng.choice(city.streets)
        number, floor, room = rng.randint(1, 399), rng.randint(2, 32), rng.randint(1, 12)
        if language == "zh":
            return f"{city.zh}{district[0]}{street[0]}{number}号{floor}楼{floor}{room:02d}室"
        return f"Room {floor}{room:02d}, {number} {street[1]}, {district[1]}, {city.en}"

    def _phone(self) -> str:
        while True:
            phone = "1" + self.rng.choice("3456789") + f"{self.rng.randrange(10**9):09d}"
            if phone not in self.world.phones:
                return phone

    def _email(self, local: str) -> str:
        domain = self.rng.choice(vocab.EMAIL_DOMAINS)
        email = f"{local}@{domain}"
        while email in self.world.emails:
            email = f"{local}{self.rng.randint(1, 999)}@{domain}"
        return email

    # -- orders ---------------------------------------------------------------------------------

    def _order(self, cid: str, language: str, address: str, city: vocab.City) -> str:
        rng = self.rng
        status = _weighted(rng, _ORDER_STATUS)
        items = [self._item(language) for _ in range(rng.choice((1, 1, 1, 2, 2, 3)))]
        hours = timedelta(hours=1)
        events: list[Event] = []
        carrier = rng.choice(vocab.CARRIERS)
        ship_state = ""
        if status == "shipped":
            ship_state = _weighted(rng, _IN_FLIGHT)
            events = self._events(carrier, city, language, ship_state)
            shift = events[-1].time - (REFERENCE - rng.uniform(0.5, 20) * hours)
            events = [Event(e.time - shift, e.location, e.description) for e in events]
            created = events[0].time - rng.uniform(1, 20) * hours
            updated = events[1].time if len(events) > 1 else events[0].time
        else:
            age = {
                "pending": (0.01, 0.8),
                "paid": (0.05, 1.7),
                "delivered": (6, 150),
                "refunded": (20, 150),
            }.get(status, (1, 150))
            created = REFERENCE - timedelta(days=rng.uniform(*age))
            updated = created + rng.uniform(0.02, 0.2) * hours
            shipped_first = status == "delivered" or (status == "refunded" and rng.random() < 0.5)
            if shipped_first:
                ship_state = "delivered"
                events = self._events(carrier, city, language, "delivered")
                shift = events[0].time - (created + rng.uniform(1, 20) * hours)
                events = [Event(e.time - shift, e.location, e.description) for e in events]
                updated = events[-1].time
        if status == "pending":
            updated = created
        oid = self._order_id(created)
        total = self.world.order(
            oid,
            customer_id=cid,
            status=status,
            items=items,
            ship_to=address,
            created_at=created,
            updated_at=updated,
        )
        if events:
            eta = None
            if ship_state != "delivered":
                eta = (events[0].time + timedelta(days=3)).date().isoformat()
            self.world.shipment(
                self._tracking(carrier),
                order_id=oid,
                carrier=carrier.name,
                status=ship_state,
                estimated_delivery=eta,
                events=events,
            )
        self._after_sales(
            oid, cid, status, total, updated, returned=bool(events), zh=language == "zh"
        )
        return oid

    def _after_sales(
        self,
        oid: str,
        cid: str,
        status: str,
        total: int,
        after: datetime,
        *,
        returned: bool,
        zh: bool,
    ) -> None:
        rng = self.rng
        refunded = status == "refunded" or (status == "cancelled" and rng.random() < 0.5)
        if not refunded:
            return
        at = after + timedelta(days=rng.uniform(0.1, 0.9 if status == "cancelled" else 6))
        if status == "refunded" and returned:
            self.world.return_(
                order_id=oid,
                customer_id=cid,
                reason="不想要了" if zh else "No longer needed",
                status="completed",
                created_at=at,
            )
            at += timedelta(days=rng.uniform(2, 5))
        self.world.refund(
            order_id=oid,
            customer_id=cid,
            amount_cents=total,
            reason=("订单取消" if zh else "Order cancelled")
            if status == "cancelled"
            else ("退货退款" if zh else "Returned"),
            status="approved",
            created_at=at,
        )

    def _item(self, language: str) -> Item:
        rng = self.rng
        product = rng.choice(vocab.PRODUCTS)
        yuan = rng.randint(product.min_cents // 100, product.max_cents // 100)
        yuan = yuan - yuan % 10 + 9  # prices end in 9, as shops like them to
        return Item(
            product.zh if language == "zh" else product.en,
            _weighted(rng, ((1, 8), (2, 3), (3, 1))),
            yuan * 100,
        )

    def _order_id(self, created: datetime) -> str:
        while True:
            oid = f"{created.astimezone(CST):%Y%m%d}{self.rng.randrange(10_000):04d}"
            if oid not in self.world.order_ids:
                return oid

    def _tracking(self, carrier: vocab.Carrier) -> str:
        while True:
            digits = f"{self.rng.randrange(10 ** (carrier.digits - 1), 10**carrier.digits)}"
            prefix = carrier.prefix
            if len(prefix) == 1:
                prefix += self.rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ")
            number = f"{prefix}{digits}{carrier.suffix}"
            if number not in self.world.tracking_numbers:
                return number

    def _events(
        self, carrier: vocab.Carrier, city: vocab.City, language: str, state: str
    ) -> list[Event]:
        """The tracking history up to `state`, starting at the reference time (shifted later)."""
        rng = self.rng
        texts = TRACKING[language]
        origin_zh, origin_en = rng.choice(vocab.ORIGINS)
        origin = origin_zh if language == "zh" else origin_en
        dest = city.zh if language == "zh" else city.en
        carrier_name = carrier.zh if language == "zh" else carrier.name
        short = {"zh": origin_zh[-3:-1], "en": origin_en.split(",")[0]}[language]
        here = {"created": origin, "picked_up": origin, "departed": origin}
        place = {"departed": short, "arrived": dest.removesuffix("市")}
        last = _LAST_STAGE.get(state, len(_STAGES))
        moment = REFERENCE
        events = []
        for stage, low, high in _STAGES[:last]:
            moment += timedelta(hours=rng.uniform(low, high))
            text = texts[stage].format(carrier=carrier_name, place=place.get(stage, ""))
            events.append(Event(moment, here.get(stage, dest), text))
        if state in ("delivered", "exception"):
            moment += timedelta(hours=rng.uniform(1, 6))
            events.append(Event(moment, dest, texts[state]))
        return events


def build_world(seed: int = DEFAULT_SEED, customers: int = EXTRA_CUSTOMERS) -> World:
    world = World()
    add_fixtures(world)
    _Filler(random.Random(seed), world).populate(customers)
    return world


def write_world(conn: sqlite3.Connection, world: World, seed: int) -> dict[str, int]:
    """Create the tables and insert the world in one transaction (`conn` in autocommit mode)."""
    conn.executescript(DDL)
    conn.execute("BEGIN")
    counts: dict[str, int] = {}
    for table in TABLES:
        rows = world.rows.get(table, [])
        counts[table] = len(rows)
        if rows:
            cols = list(rows[0])
            conn.executemany(
                f"INSERT INTO {table} ({', '.join(cols)})"
                f" VALUES ({', '.join(':' + c for c in cols)})",
                rows,
            )
    conn.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?)",
        [
            ("schema_version", str(SCHEMA_VERSION)),
            ("seed", str(seed)),
            ("reference", iso(REFERENCE)),
        ],
    )
    conn.execute("COMMIT")
    return {t: n for t, n in counts.items() if t != "meta"}


def regenerate(path: Path | str, seed: int = DEFAULT_SEED) -> dict[str, int]:
    """(Re)build the demo file at `path` and return the row count per table.

    Built beside the target and moved over it in one step, so a reader never sees half a
    file. Stop the service first: open connections would keep reading the old file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.building-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        counts = write_world(conn, build_world(seed), seed)
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(tmp, path)
    return counts


def ensure(path: Path | str, seed: int = DEFAULT_SEED) -> bool:
    """Create the demo file if it is missing; True when it was created. An existing file of
    another schema version is refused with the command that rebuilds it."""
    path = Path(path)
    if not path.exists():
        regenerate(path, seed)
        return True
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        row, reason = None, str(exc)
    else:
        reason = "no schema version" if row is None else f"schema version {row[0]}"
    if row is None or row[0] != str(SCHEMA_VERSION):
        raise DemoDataError(
            f"{path} is not a demo database of schema version {SCHEMA_VERSION} ({reason}); "
            f"rebuild it with: hermes demo-data --path {path}"
        )
    return False
