"""NLU latency and memory: `python -m bench.nlu [--rounds N]`.

Prints p50/p95 per call for the intent half (features + ONNX Runtime), the slot half
(tokens + CRF + normalisers) and a whole `parse`, over the held-out utterances after a
warm-up; the memory the loaded models take (RSS delta around `NLUPipeline.load`, and the
Python-heap share of it from tracemalloc); and, as the baseline measured in the same run,
scikit-learn's single-row `predict_proba` on the same features (the model is retrained from
the committed data first, which is byte-identical to the committed one).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from datetime import date

from app.nlu.dataset import read_jsonl, read_test_set
from app.nlu.features import intent_document
from app.nlu.pipeline import NLUPipeline
from app.nlu.train import TrainConfig, fit_intent
from app.settings import PROJECT_ROOT

DATA = PROJECT_ROOT / "data" / "nlu"
MODELS = PROJECT_ROOT / "models" / "nlu"


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def timed(fn: Callable[[str], object], inputs: Sequence[str], rounds: int) -> list[float]:
    for text in inputs[: min(len(inputs), 200)]:
        fn(text)  # warm-up: caches, first-run allocations in ORT and CRFsuite
    samples = []
    clock = time.perf_counter
    for i in range(rounds):
        text = inputs[i % len(inputs)]
        start = clock()
        fn(text)
        samples.append(clock() - start)
    return samples


def row(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered) * 1e6
    p95 = ordered[int(0.95 * (len(ordered) - 1))] * 1e6
    return f"  {name:<38} p50 {p50:8.1f} us   p95 {p95:8.1f} us   (n={len(samples)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5000)
    args = parser.parse_args()

    held_out = read_test_set(DATA / "test.yaml")
    texts = [e.text for e in held_out.examples]
    documents = [intent_document(t) for t in texts]

    gc.collect()
    before = rss_kib()
    tracemalloc.start()
    nlu = NLUPipeline.load(MODELS, today=lambda: date(2024, 5, 22))
    python_heap, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    loaded = rss_kib() - before

    print(f"NLU models: {MODELS}")
    print(f"  RSS delta around load: {loaded / 1024:.1f} MiB; Python heap (tracemalloc): "
          f"{python_heap / 1024:.0f} KiB")  # fmt: skip
    print(f"latency per call over {len(texts)} held-out utterances, {args.rounds} calls each:")
    print(row("intent: features + ONNX Runtime", timed(nlu.classify, texts, args.rounds)))
    print(row("  of which ONNX Runtime alone", timed(nlu.intents.rank, documents, args.rounds)))
    print(row("slots: tokens + CRF + normalisers", timed(nlu.extract, texts, args.rounds)))
    print(row("parse (both, shared tokens)", timed(nlu.parse, texts, args.rounds)))

    model = fit_intent(read_jsonl(DATA / "train.jsonl"), TrainConfig())
    print("baseline, same features, same run:")
    print(row("scikit-learn predict_proba, 1 row", timed(
        lambda d: model.predict_proba([d]), documents, min(args.rounds, 2000))))  # fmt: skip
    nlu.close()


if __name__ == "__main__":
    main()
