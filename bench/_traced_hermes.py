"""`hermes serve` with tracemalloc on, for bench/soak.py --tracemalloc: SIGUSR1 writes a snapshot
of the live allocations to `<dir>/<n>.snap` (n counts from 0); the directory is the first
argument, the rest are `hermes` arguments. A debugging aid kept out of the service: the service
itself never traces allocations.

    python bench/_traced_hermes.py /tmp/snaps serve --port 8000 --db var/hermes.db
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType

# Run as a file, this folder comes first on sys.path and its `mcp.py` would hide the SDK.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(int(os.environ.get("BENCH_TRACEMALLOC_FRAMES", "1")))
    numbers = itertools.count()

    def dump(_signum: int, _frame: FrameType | None) -> None:
        path = out / f"{next(numbers)}.snap"
        tracemalloc.take_snapshot().dump(str(path) + ".tmp")
        os.replace(str(path) + ".tmp", path)  # a reader never sees half a snapshot

    signal.signal(signal.SIGUSR1, dump)
    sys.argv = ["hermes", *sys.argv[2:]]
    from app.cli import main as hermes  # after tracing starts: its imports are counted too

    sys.exit(hermes())


if __name__ == "__main__":
    main()
