"""Which scenario runs where: in process, jobs are cut into small batches that worker
processes take in turn, and each batch runs a few services at once in one event loop (a
service spends much of a scenario waiting on its own threads and sockets, so a few overlap
well); a running service gets one scenario at a time (they would share its database)."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from app.evaluation.runner import (
    InProcess,
    InProcessHarness,
    Remote,
    RunResult,
    Target,
    demo_template,
    run_remote,
)
from app.evaluation.scenario import Scenario

Job = tuple[Scenario, int]  # a scenario and the index of its run
Progress = Callable[[RunResult], None]

_HARNESS: InProcessHarness | None = None  # one per worker process


def _init_worker(target: InProcess, template: Path) -> None:
    global _HARNESS
    _HARNESS = InProcessHarness(target, template)


def _work(batch: list[Job], concurrency: int) -> list[RunResult]:
    assert _HARNESS is not None
    return asyncio.run(_concurrently(_HARNESS, batch, concurrency, lambda _r: None))


async def _concurrently(
    harness: InProcessHarness, jobs: list[Job], concurrency: int, report: Progress
) -> list[RunResult]:
    gate = asyncio.Semaphore(concurrency)

    async def one(job: Job) -> RunResult:
        async with gate:
            result = await harness.run(*job)
        report(result)
        return result

    return list(await asyncio.gather(*(one(job) for job in jobs)))


def run_all(
    scenarios: list[Scenario],
    target: Target,
    *,
    runs: int = 1,
    workers: int = 1,
    concurrency: int = 1,
    progress: Progress | None = None,
) -> list[RunResult]:
    """Every scenario `runs` times; results in scenario order, then run order."""
    jobs = [(s, r) for r in range(runs) for s in scenarios]
    report = progress or (lambda _r: None)
    if isinstance(target, Remote):
        return _ordered(scenarios, asyncio.run(_one_at_a_time(target, jobs, report)))
    with demo_template(target.demo_seed) as template:
        if workers <= 1 or len(jobs) <= concurrency:
            harness = InProcessHarness(target, template)
            try:
                done = asyncio.run(_concurrently(harness, jobs, concurrency, report))
            finally:
                harness.close()
            return _ordered(scenarios, done)
        size = 2 * concurrency  # small batches: the workers finish together
        batches = [jobs[i : i + size] for i in range(0, len(jobs), size)]
        context = multiprocessing.get_context("spawn")  # no forked event loops or threads
        results: list[RunResult] = []
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(target, template),
        ) as pool:
            for batch in pool.map(_work, batches, [concurrency] * len(batches)):
                for result in batch:
                    report(result)
                results += batch
        return _ordered(scenarios, results)


async def _one_at_a_time(target: Remote, jobs: list[Job], report: Progress) -> list[RunResult]:
    results = []
    for scenario, run in jobs:
        results.append(await run_remote(target, scenario, run))
        report(results[-1])
    return results


def _ordered(scenarios: list[Scenario], results: list[RunResult]) -> list[RunResult]:
    rank = {s.id: i for i, s in enumerate(scenarios)}
    return sorted(results, key=lambda r: (rank[r.scenario], r.run))
