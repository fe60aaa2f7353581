"""Training is reproducible, and the committed artefacts are what training makes of the data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.nlu.datagen import TEMPLATES_FILE, generate, load_spec
from app.nlu.dataset import TRAIN_FILE, EvalSet, read_jsonl, write_jsonl
from app.nlu.manifest import INTENT_MODEL, MANIFEST, SLOT_MODEL, Manifest
from app.nlu.normalise import normalise
from app.nlu.train import TrainConfig, TrainResult, train
from app.nlu.types import INTENTS
from tests.nlu.conftest import DATA_DIR, MODEL_DIR


@pytest.mark.parametrize("name", [INTENT_MODEL, SLOT_MODEL, MANIFEST])
def test_training_the_committed_data_reproduces_the_committed_artefacts(
    trained: TrainResult, name: str
) -> None:
    # If this fails after editing data/nlu, run `hermes nlu train` and commit models/nlu.
    assert (trained.out_dir / name).read_bytes() == (MODEL_DIR / name).read_bytes()


def test_the_same_data_and_seed_give_byte_identical_models(tmp_path: Path) -> None:
    small = tmp_path / "data"
    write_jsonl(small / TRAIN_FILE, read_jsonl(DATA_DIR / TRAIN_FILE)[::8])
    config = TrainConfig(crf_max_iterations=30)
    first = train(small, tmp_path / "a", config)
    second = train(small, tmp_path / "b", config)
    for name in (INTENT_MODEL, SLOT_MODEL, MANIFEST):
        assert (first.out_dir / name).read_bytes() == (second.out_dir / name).read_bytes()
    assert first.manifest.examples == len(read_jsonl(small / TRAIN_FILE))


def test_the_manifest_records_the_data_the_config_and_the_artefacts(
    trained: TrainResult,
) -> None:
    manifest = Manifest.read(trained.out_dir)
    assert manifest == trained.manifest
    assert manifest.data_file == TRAIN_FILE
    assert manifest.config["seed"] == TrainConfig().seed
    assert set(manifest.artefacts) == {INTENT_MODEL, SLOT_MODEL}
    body = json.loads((trained.out_dir / MANIFEST).read_text())
    assert "time" not in json.dumps(body)  # nothing that changes from one run to the next


def test_the_committed_training_data_is_what_the_generator_writes(tmp_path: Path) -> None:
    spec = load_spec(DATA_DIR / TEMPLATES_FILE)
    write_jsonl(tmp_path / TRAIN_FILE, generate(spec))
    assert (tmp_path / TRAIN_FILE).read_bytes() == (DATA_DIR / TRAIN_FILE).read_bytes()


def test_the_training_set_is_large_balanced_and_bilingual() -> None:
    examples = read_jsonl(DATA_DIR / TRAIN_FILE)
    assert len(examples) >= 1500
    per_intent: dict[str, int] = {}
    for example in examples:
        per_intent[example.intent] = per_intent.get(example.intent, 0) + 1
    assert len(per_intent) == len(INTENTS)
    assert max(per_intent.values()) <= 1.2 * min(per_intent.values())
    chinese = sum(1 for e in examples if any("\u4e00" <= ch <= "\u9fff" for ch in e.text))
    assert 0.35 < chinese / len(examples) < 0.65


def test_every_generated_value_is_what_the_normalisers_make_of_its_text() -> None:
    # The generator computes values from what it chose, independently of the normalisers.
    today = load_spec(DATA_DIR / TEMPLATES_FILE)["today"]
    wrong = [
        (example.text, span)
        for example in read_jsonl(DATA_DIR / TRAIN_FILE)
        for span in example.slots
        if normalise(span.name, example.text[span.start : span.end], today) != span.value
    ]
    assert wrong == []


def test_the_test_set_is_held_out(held_out: EvalSet) -> None:
    def key(text: str) -> str:
        return text.lower().rstrip(".!?。？！~ ")

    train_texts = {key(e.text) for e in read_jsonl(DATA_DIR / TRAIN_FILE)}
    shared = [e for e in held_out.examples if key(e.text) in train_texts]
    # Stock phrases ("hi", "再见", "I forgot my password") are bound to coincide with what the
    # templates produce; no utterance with a slot value may, and the stock ones stay rare.
    assert [e.text for e in shared if e.slots] == []
    assert len(shared) < 0.1 * len(held_out.examples)
    assert len(held_out.examples) >= 300
