"""Memory at scale: 1,000 users and 100,000 memories in a temporary SQLite file (WAL).

Prints, with a baseline measured in the same run:
- upsert throughput: plain one-row INSERT jobs through the same writer (baseline) against
  memory writes (select, insert, history row, FTS postings), bulk (100 drafts per job) and
  single upserts that update existing keys (newer wins), all batched by the one writer;
- recall p50/p95/p99 (target p95 < 5 ms) against a plain indexed read through the same
  read connections (baseline);
- forget p50/p95 (hard delete + FTS optimize);
- sweeper time over the whole set, its slowest batch, and the worst latency a concurrent
  one-row writer saw meanwhile.

    python bench/memory.py [--users 1000] [--per-user 100] [--recalls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.memory.records import Draft, Scope
from app.memory.service import MemoryService
from app.storage.port import Database
from app.storage.session_writer import NO_SESSION, SessionWriter
from app.storage.sqlite import SqliteDatabase
from app.storage.tx import Tx

MIGRATIONS = [
    Path(__file__).resolve().parents[1] / "migrations" / name
    for name in ("0003_memory.sql", "0007_memory_origin.sql")
]
COURIERS = ["顺丰", "京东物流", "中通", "圆通", "EMS", "DHL"]
LANGS = ["简体中文", "繁体中文", "English"]
NOTES = [
    "家里有一只{pet}，送货前请先打电话",
    "小区{gate}门的门禁密码是{n}",
    "工作日白天不在家，包裹放{place}",
    "Prefers deliveries after {h} pm on weekdays",
    "上次投诉{thing}包装破损，已补偿{n}元",
    "我决定选择方案{plan}：先退款后补发",
    "Agreed to replace the {thing} instead of a refund",
    "发票抬头是{company}有限公司",
]
PIECES = {
    "pet": ["金毛", "柯基", "橘猫", "泰迪"],
    "gate": ["东", "南", "西", "北"],
    "place": ["快递柜", "门卫室", "前台", "邻居家"],
    "thing": ["耳机", "键盘", "咖啡机", "台灯", "headphones", "kettle"],
    "company": ["星河", "蓝海", "远航", "晨光"],
    "plan": ["A", "B", "C"],
}
QUERIES = [
    ("还是用上次的快递", "return_request"),
    ("我的邮箱还是之前那个吗", None),
    ("上次说的门禁密码是多少", None),
    ("那个方案现在进度怎样", None),
    ("帮我把这件退回去", "return_request"),
    ("same as before, ship it with the usual courier", None),
    ("my email is still the same as last time?", None),
    ("上次投诉的耳机包装的事", "complaint"),
    ("发票抬头还是上次那个", "refund_request"),
    ("Do you remember my delivery preference?", None),
]


def note(rng: random.Random) -> str:
    text = rng.choice(NOTES)
    fields = {k: rng.choice(v) for k, v in PIECES.items()}
    return text.format(n=rng.randint(100, 9999), h=rng.randint(1, 9), **fields)


def user_drafts(rng: random.Random, u: int, count: int) -> list[Draft]:
    drafts = [
        Draft(key="preference.courier", value=rng.choice(COURIERS), confidence=0.9),
        Draft(key="preference.language", value=rng.choice(LANGS), confidence=0.9),
        Draft(key="contact.email", value=f"user{u}@example.com", confidence=1.0),
        Draft(key="contact.phone", value=f"13{rng.randint(100000000, 999999999)}"),
        Draft(key="preference.invoice_format", value=rng.choice(["PDF", "纸质"])),
    ]
    while len(drafts) < count:
        text = note(rng)
        kind = "decision" if ("决定" in text or "Agreed" in text) else "note"
        status = "pending" if rng.random() < 0.03 else "active"
        drafts.append(
            Draft(
                key=f"{kind}:{len(drafts)}",
                value=text,
                tier="node",
                fact_type=kind,
                confidence=rng.uniform(0.5, 1.0),
                status=status,  # type: ignore[arg-type]
                source="model" if status == "pending" else "user",
            )
        )
    return drafts[:count]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def quantiles(values: list[float]) -> str:
    return "  ".join(f"p{int(q * 100)} {ms(pct(values, q))}" for q in (0.5, 0.95, 0.99))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def gather_in_waves(jobs: list[Callable[[], Awaitable[Any]]], wave: int) -> None:
    for i in range(0, len(jobs), wave):
        await asyncio.gather(*(job() for job in jobs[i : i + wave]))


async def observed(
    memory: MemoryService, db: Database, work: Callable[[], Awaitable[Any]]
) -> tuple[Any, list[float], list[float]]:
    """Run `work` while timing each of the service's write jobs and probing the writer with a
    one-row write every 5 ms: how long does anybody else wait for it?"""
    steps: list[float] = []
    probe: list[float] = []
    original = memory.transact

    async def transact(writer: Any, fn: Any) -> Any:
        start = time.perf_counter()
        try:
            return await original(writer, fn)
        finally:
            steps.append(time.perf_counter() - start)

    done = asyncio.Event()

    async def prober() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await db.write(NO_SESSION, lambda c: Tx(c).execute("SELECT 1"))
            probe.append(time.perf_counter() - start)
            await asyncio.sleep(0.005)

    memory.transact = transact  # type: ignore[method-assign]
    task = asyncio.create_task(prober())
    try:
        result = await work()
    finally:
        done.set()
        await task
        memory.transact = original  # type: ignore[method-assign]
    return result, steps, probe


async def main(users: int, per_user: int, recalls: int) -> None:
    rng = random.Random(7)
    workdir = Path(tempfile.mkdtemp(prefix="hermes-bench-memory-"))
    (workdir / "migrations").mkdir()
    for migration in MIGRATIONS:
        shutil.copy(migration, workdir / "migrations" / migration.name)
    db = SqliteDatabase(workdir / "memory.db", migrations_dir=workdir / "migrations")
    await db.open()
    try:
        await run(db, rng, users, per_user, recalls)
    finally:
        await db.close()
        shutil.rmtree(workdir, ignore_errors=True)


async def run(db: Database, rng: random.Random, users: int, per_user: int, recalls: int) -> None:
    now = time.time()
    memory = MemoryService(db, clock=lambda: now)
    scopes = [Scope(f"tenant{u % 10}", f"user{u}") for u in range(users)]
    total = users * per_user
    print(f"memory bench: {users} users x {per_user} memories = {total} rows, SQLite WAL")

    # -- upserts ---------------------------------------------------------------------------
    await db.write(
        NO_SESSION, lambda c: c.execute("CREATE TABLE bench_plain (k TEXT PRIMARY KEY, v TEXT)")
    )

    def plain_insert(i: int) -> Callable[[], Awaitable[Any]]:
        return lambda: db.write(
            NO_SESSION, lambda c: c.execute("INSERT INTO bench_plain VALUES (?, ?)", (f"k{i}", "v"))
        )

    plain = [plain_insert(i) for i in range(20000)]
    elapsed = await timed(lambda: gather_in_waves(plain, 1000))
    print(f"  baseline: plain 1-row INSERT jobs      {20000 / elapsed:>10,.0f} rows/s")

    batches = [user_drafts(rng, u, per_user) for u in range(users)]
    ages = [rng.uniform(0, 96) * 3600 for _ in range(users)]  # written 0-96 h ago
    bulk = [
        (lambda s=s, b=b, a=a: memory.write(s, b, actor="bench", now=now - a))
        for s, b, a in zip(scopes, batches, ages, strict=True)
    ]
    elapsed = await timed(lambda: gather_in_waves(bulk, 50))
    print(f"  memory bulk write (100 per job)         {total / elapsed:>10,.0f} rows/s"
          f"   ({elapsed:.1f} s for {total:,})")  # fmt: skip

    updates = [
        (lambda s=s: memory.upsert(s, "contact.email", f"new-{s.user_id}@example.com"))
        for s in rng.sample(scopes, min(users, 1000))
    ] * 5
    elapsed = await timed(lambda: gather_in_waves(updates, 250))
    print(f"  memory single upserts (newer wins)      {len(updates) / elapsed:>10,.0f} upserts/s"
          f"   ({len(updates):,} updates of existing keys)")  # fmt: skip

    # -- recall ----------------------------------------------------------------------------
    base: list[float] = []
    for _ in range(recalls):
        s = rng.choice(scopes)
        start = time.perf_counter()
        await db.fetchall(
            "SELECT * FROM memories WHERE tenant_id = ? AND user_id = ? AND key = ?",
            (s.tenant_id, s.user_id, "preference.courier"),
        )
        base.append(time.perf_counter() - start)
    lat: list[float] = []
    found = 0
    for _ in range(recalls):
        s = rng.choice(scopes)
        text, intent = rng.choice(QUERIES)
        start = time.perf_counter()
        got = await memory.recall(s, text, intent=intent, writer=SessionWriter("bench"))
        lat.append(time.perf_counter() - start)
        found += len(got.items)
    await memory.drain()
    print(f"  baseline: indexed read (1 row)          {quantiles(base)}")
    print(f"  recall ({recalls} queries, zh/en)        {quantiles(lat)}"
          f"  mean items {found / recalls:.2f}")  # fmt: skip

    # -- forget ----------------------------------------------------------------------------
    forget_lat: list[float] = []

    async def forget_some() -> None:
        for s in rng.sample(scopes, 20):
            forget_lat.append(
                await timed(
                    lambda s=s: memory.forget(s, key="contact.phone", actor="b", reason="b")
                )
            )

    _, steps, probe = await observed(memory, db, forget_some)
    print(f"  forget by key (delete, FTS merged)      {quantiles(forget_lat)}")
    print(f"    write jobs: slowest {ms(max(steps))}; a concurrent 1-row write waited"
          f" max {ms(max(probe))}, p95 {ms(pct(probe, 0.95))}")  # fmt: skip

    # -- sweeper ---------------------------------------------------------------------------
    for label, at in (
        ("archive (decayed)", now + 24 * 3600),
        ("purge (+95 days)", now + 95 * 86400),
    ):
        start = time.perf_counter()
        report, steps, probe = await observed(memory, db, lambda at=at: memory.sweep(now=at))
        elapsed = time.perf_counter() - start
        print(f"  sweep, {label:<18} {elapsed:6.2f} s: archived {report.archived:,},"
              f" rejected {report.rejected:,}, purged {report.purged:,};"
              f" {report.batches} batches + {report.index_steps} index merge steps")  # fmt: skip
        print(f"    write jobs: slowest {ms(max(steps))}; a concurrent 1-row write waited"
              f" max {ms(max(probe))}, p95 {ms(pct(probe, 0.95))}")  # fmt: skip
    size = await asyncio.to_thread(lambda: db.path.stat().st_size / 1e6)
    print(f"  database file after the run: {size:.1f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--per-user", type=int, default=100)
    parser.add_argument("--recalls", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(main(args.users, args.per_user, args.recalls))
