"""`hermes nlu train | eval | datagen`.

Hooked into the main parser by `app.cli.build_parser` with `register(sub)`. Training needs the
`train` extra (scikit-learn, skl2onnx, onnx); imports happen inside the commands so that
`hermes serve` never pays for them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from app.nlu.dataset import TEST_FILE
from app.settings import PROJECT_ROOT

DATA_DIR = PROJECT_ROOT / "data" / "nlu"


def _model_dir() -> Path:
    return Path(os.environ.get("HERMES_NLU_MODEL_DIR", PROJECT_ROOT / "models" / "nlu"))


def _train(args: argparse.Namespace) -> int:
    from app.nlu.kernels import PORTABLE_KERNELS

    if any(os.environ.get(k) != v for k, v in PORTABLE_KERNELS.items()):
        return _train_in_portable_process(args, PORTABLE_KERNELS)
    try:
        from app.nlu.train import TrainConfig, train
    except ImportError as exc:
        print(f"hermes: training needs the train extra ({exc}); pip install -e '.[train]'",
              file=sys.stderr)  # fmt: skip
        return 2
    from app.errors import NLUModelError

    out: Path = args.out or _model_dir()
    started = time.perf_counter()
    try:
        config = TrainConfig() if args.seed is None else TrainConfig(seed=args.seed)
        result = train(args.data, out, config)
    except NLUModelError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 2
    manifest = result.manifest
    print(f"trained on {manifest.examples} examples from {args.data} "
          f"in {time.perf_counter() - started:.1f} s (seed {config.seed})")  # fmt: skip
    kernels = " ".join(f"{k}={os.environ.get(k, '(unset)')!r}" for k in PORTABLE_KERNELS)
    print(f"  math kernels: {kernels}")
    for name, digest in sorted(manifest.artefacts.items()):
        size = (out / name).stat().st_size
        print(f"  {out / name}  {size / 1024:.0f} KiB  sha256 {digest[:16]}")
    return 0


def _train_in_portable_process(args: argparse.Namespace, kernels: dict[str, str]) -> int:
    """The same command in a child process whose math kernels are the same on every machine
    (numpy and OpenBLAS choose theirs when they load: see app/nlu/train.py)."""
    command = [sys.executable, "-m", "app.cli", "nlu", "train", "--data", str(args.data)]
    if args.out is not None:
        command += ["--out", str(args.out)]
    if args.seed is not None:
        command += ["--seed", str(args.seed)]
    done = subprocess.run(
        command, env={**os.environ, **kernels}, capture_output=True, text=True, check=False
    )
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


def _eval(args: argparse.Namespace) -> int:
    from app.errors import NLUModelError
    from app.nlu.dataset import read_test_set
    from app.nlu.evaluate import evaluate, format_report
    from app.nlu.pipeline import NLUPipeline

    test = read_test_set(args.test)
    model_dir: Path = args.model_dir or _model_dir()
    try:
        pipeline = NLUPipeline.load(model_dir, data_dir=args.data, today=lambda: test.today)
    except NLUModelError as exc:
        print(f"hermes: {exc}", file=sys.stderr)
        return 2
    try:
        report = evaluate(pipeline, test.examples)
    finally:
        pipeline.close()
    print(f"{args.test}: {len(test.examples)} utterances, today = {test.today}")
    print(format_report(report, show_misses=args.errors))
    return 0


def _datagen(args: argparse.Namespace) -> int:
    from app.nlu.datagen import main

    print(f"wrote {main(args.data)}")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    nlu = subparsers.add_parser("nlu", help="train and evaluate the NLU models")
    sub = nlu.add_subparsers(dest="nlu_command", required=True)

    train = sub.add_parser("train", help="train the intent (ONNX) and slot (CRF) models")
    train.add_argument("--data", type=Path, default=DATA_DIR, help="dir with train.jsonl")
    train.add_argument("--out", type=Path, help="model dir (default HERMES_NLU_MODEL_DIR)")
    train.add_argument("--seed", type=int, help="data order and solver seed (default 7)")
    train.set_defaults(func=_train)

    ev = sub.add_parser("eval", help="score a model on the held-out test set")
    ev.add_argument("--model-dir", type=Path, help="default HERMES_NLU_MODEL_DIR")
    ev.add_argument("--test", type=Path, default=DATA_DIR / TEST_FILE)
    ev.add_argument("--data", type=Path, default=DATA_DIR, help="training data to check against")
    ev.add_argument("--errors", action="store_true", help="list every misclassified utterance")
    ev.set_defaults(func=_eval)

    gen = sub.add_parser("datagen", help="regenerate train.jsonl from templates.yaml")
    gen.add_argument("--data", type=Path, default=DATA_DIR)
    gen.set_defaults(func=_datagen)
