"""`hermes nlu train | eval | datagen`, through the argparse hook that app/cli.py calls."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from app.nlu.cli import register
from app.nlu.datagen import TEMPLATES_FILE
from app.nlu.dataset import TRAIN_FILE, read_jsonl, write_jsonl
from app.nlu.kernels import PORTABLE_KERNELS
from app.nlu.manifest import Manifest
from tests.nlu.conftest import DATA_DIR


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="hermes")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    code: int = args.func(args)
    return code


def test_eval_prints_per_intent_scores_slot_f1_and_confusions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run("nlu", "eval") == 0
    out = capsys.readouterr().out
    assert "intent macro-F1" in out
    assert "slot F1 (exact span + value)" in out
    assert "confusions" in out
    for intent in ("order_status", "password_reset", "out_of_scope"):
        assert intent in out


def test_train_writes_a_model_that_eval_can_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    sample = read_jsonl(DATA_DIR / TRAIN_FILE)[::10]
    write_jsonl(data / TRAIN_FILE, sample)
    out = tmp_path / "model"
    assert run("nlu", "train", "--data", str(data), "--out", str(out), "--seed", "3") == 0
    assert f"trained on {len(sample)} examples" in capsys.readouterr().out
    assert Manifest.read(out).config["seed"] == 3
    assert run("nlu", "eval", "--model-dir", str(out), "--data", str(data), "--errors") == 0
    assert "errors" in capsys.readouterr().out


def test_eval_without_a_model_fails_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("nlu", "eval", "--model-dir", str(tmp_path)) == 2
    assert "run `hermes nlu train`" in capsys.readouterr().err


def test_datagen_rewrites_the_training_set_from_the_templates(tmp_path: Path) -> None:
    shutil.copy(DATA_DIR / TEMPLATES_FILE, tmp_path / TEMPLATES_FILE)
    assert run("nlu", "datagen", "--data", str(tmp_path)) == 0
    assert (tmp_path / TRAIN_FILE).read_bytes() == (DATA_DIR / TRAIN_FILE).read_bytes()


def test_train_runs_in_a_process_on_the_portable_kernels_when_these_are_not_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    sample = read_jsonl(DATA_DIR / TRAIN_FILE)[::10]
    write_jsonl(data / TRAIN_FILE, sample)
    assert run("nlu", "train", "--data", str(data), "--out", str(tmp_path / "here")) == 0
    capsys.readouterr()
    for name in PORTABLE_KERNELS:
        monkeypatch.delenv(name)
    assert run("nlu", "train", "--data", str(data), "--out", str(tmp_path / "child")) == 0
    out = capsys.readouterr().out
    assert f"trained on {len(sample)} examples" in out  # the child's report, passed on
    assert "OPENBLAS_CORETYPE='Haswell'" in out  # what the child ran on; this process hasn't it
    # This process runs on the portable kernels (tests/conftest.py): the child, which set
    # them itself, trained the same bytes.
    for name in ("intent.onnx", "slots.crfsuite", "manifest.json"):
        assert (tmp_path / "child" / name).read_bytes() == (tmp_path / "here" / name).read_bytes()
