"""Loading refuses a model directory that does not match its data or its own manifest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.errors import NLUModelError
from app.nlu.dataset import TRAIN_FILE
from app.nlu.manifest import INTENT_MODEL, MANIFEST, SLOT_MODEL
from app.nlu.pipeline import NLUPipeline
from tests.nlu.conftest import DATA_DIR, MODEL_DIR


@pytest.fixture
def copies(tmp_path: Path) -> tuple[Path, Path]:
    model_dir, data_dir = tmp_path / "model", tmp_path / "data"
    shutil.copytree(MODEL_DIR, model_dir)
    data_dir.mkdir()
    shutil.copy(DATA_DIR / TRAIN_FILE, data_dir / TRAIN_FILE)
    return model_dir, data_dir


def test_the_committed_model_matches_the_committed_data() -> None:
    NLUPipeline.load(MODEL_DIR, data_dir=DATA_DIR).close()


def test_edited_training_data_is_refused_until_retrained(copies: tuple[Path, Path]) -> None:
    model_dir, data_dir = copies
    with (data_dir / TRAIN_FILE).open("a", encoding="utf-8") as fh:
        fh.write('{"text": "在不在", "intent": "greeting", "slots": []}\n')
    with pytest.raises(NLUModelError, match="retrain with `hermes nlu train") as info:
        NLUPipeline.load(model_dir, data_dir=data_dir)
    assert "was trained from train.jsonl" in str(info.value)


def test_without_training_data_on_disk_the_artefacts_alone_are_checked(
    copies: tuple[Path, Path],
) -> None:
    model_dir, data_dir = copies
    (data_dir / TRAIN_FILE).unlink()
    NLUPipeline.load(model_dir, data_dir=data_dir).close()
    NLUPipeline.load(model_dir, data_dir=None).close()


@pytest.mark.parametrize("name", [INTENT_MODEL, SLOT_MODEL])
def test_a_changed_artefact_is_refused(copies: tuple[Path, Path], name: str) -> None:
    model_dir, data_dir = copies
    path = model_dir / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(NLUModelError, match=f"{name} does not match the sha256"):
        NLUPipeline.load(model_dir, data_dir=data_dir)


def test_a_missing_model_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(NLUModelError, match="run `hermes nlu train`"):
        NLUPipeline.load(tmp_path, data_dir=None)


def test_a_hand_edited_config_is_refused(copies: tuple[Path, Path]) -> None:
    model_dir, data_dir = copies
    body = json.loads((model_dir / MANIFEST).read_text())
    body["config"]["lr_c"] = 1.0
    (model_dir / MANIFEST).write_text(json.dumps(body))
    with pytest.raises(NLUModelError, match="config hash"):
        NLUPipeline.load(model_dir, data_dir=data_dir)


def test_a_broken_manifest_is_refused(copies: tuple[Path, Path]) -> None:
    model_dir, _ = copies
    (model_dir / MANIFEST).write_text("{not json")
    with pytest.raises(NLUModelError, match="not a valid NLU manifest"):
        NLUPipeline.load(model_dir, data_dir=None)


def test_the_artefacts_stay_small() -> None:
    sizes = {name: (MODEL_DIR / name).stat().st_size for name in (INTENT_MODEL, SLOT_MODEL)}
    assert sum(sizes.values()) < 2 * 1024 * 1024, sizes
