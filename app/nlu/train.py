"""Training: TF-IDF + logistic regression -> ONNX for intents, CRF for slots.

Reproducible: the data order comes from the seed, scikit-learn's lbfgs and CRFsuite's
L-BFGS are deterministic, BLAS runs on one thread while fitting, and nothing time- or
machine-dependent goes into the artefacts or the manifest. The same data and config give
byte-identical files (tests/nlu/test_train.py checks it against the committed model) — on
any x86-64 machine with AVX2 when run as `hermes nlu train`, which starts training in a
process with `PORTABLE_KERNELS` set: numpy and OpenBLAS otherwise pick their math kernels by
CPU at start-up (AVX-512 ones where there are), and those differ in the last bits
(app/nlu/kernels.py).

Needs the `train` extra (scikit-learn, skl2onnx, onnx); serving does not.
"""

from __future__ import annotations

import os
import random
import tempfile
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pycrfsuite

from app.errors import NLUModelError
from app.nlu.dataset import TRAIN_FILE, Example, read_jsonl
from app.nlu.features import intent_document
from app.nlu.intent import CLASSES_KEY
from app.nlu.manifest import (
    INTENT_MODEL,
    MANIFEST,
    SLOT_MODEL,
    Manifest,
    config_digest,
    sha256_bytes,
)
from app.nlu.slot_features import bio_labels, sentence_features
from app.text.fold import fold, tokenize


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 7
    tfidf_min_df: int = 1
    # Presence, not counts: skl2onnx computes sublinear tf as log(1 + tf) where scikit-learn
    # uses 1 + log(tf), so only binary term frequencies convert exactly.
    tfidf_binary: bool = True
    lr_c: float = 20.0
    lr_max_iter: int = 3000
    crf_c1: float = 0.05
    crf_c2: float = 0.02
    crf_max_iterations: int = 150
    crf_blind_share: float = 1.0  # share of sentences with products also added blinded
    onnx_opset: int = 17
    onnx_ml_opset: int = 3


@dataclass
class TrainResult:
    out_dir: Path
    manifest: Manifest
    intent_model: Any  # the fitted sklearn Pipeline, for parity checks and the baseline bench


def build_intent_model(config: TrainConfig) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    return Pipeline(
        [
            (
                "tfidf",
                TfidfVectorizer(
                    analyzer="word",
                    token_pattern=r"\S+",  # the documents are pre-tokenised, space-separated
                    lowercase=False,
                    min_df=config.tfidf_min_df,
                    binary=config.tfidf_binary,
                    dtype=np.float32,
                ),
            ),
            (
                "clf",
                LogisticRegression(
                    C=config.lr_c, max_iter=config.lr_max_iter, random_state=config.seed
                ),
            ),
        ]
    )


def fit_intent(examples: list[Example], config: TrainConfig) -> Any:
    from threadpoolctl import threadpool_limits

    model = build_intent_model(config)
    with threadpool_limits(limits=1):
        model.fit([intent_document(e.text) for e in examples], [e.intent for e in examples])
    return model


def to_onnx(model: Any, config: TrainConfig) -> bytes:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    onx = convert_sklearn(
        model,
        name="hermes_intent",
        initial_types=[("text", StringTensorType([None, 1]))],
        options={TfidfVectorizer: {"separators": [" "]}, LogisticRegression: {"zipmap": False}},
        target_opset={"": config.onnx_opset, "ai.onnx.ml": config.onnx_ml_opset},
    )
    # skl2onnx collects the opset domains in a set: fix their order so the bytes are stable.
    imports = sorted((o.domain, o.version) for o in onx.opset_import)
    del onx.opset_import[:]
    for domain, opset in imports:
        added = onx.opset_import.add()
        added.domain, added.version = domain, opset
    entry = onx.metadata_props.add()
    entry.key, entry.value = CLASSES_KEY, ",".join(model.classes_)
    data: bytes = onx.SerializeToString()
    return data


def fit_slots(examples: list[Example], config: TrainConfig, path: Path) -> None:
    trainer = pycrfsuite.Trainer(verbose=False)
    rng = random.Random(config.seed)
    for example in examples:
        tokens = tokenize(example.text)
        folded = fold(example.text)
        spans = [(s.name, s.start, s.end) for s in example.slots]
        labels = bio_labels(tokens, spans)
        trainer.append(sentence_features(folded, tokens), labels)
        products = [i for i, label in enumerate(labels) if label.endswith("-product")]
        if products and rng.random() < config.crf_blind_share:
            trainer.append(sentence_features(folded, tokens, blind=frozenset(products)), labels)
    trainer.set_params(
        {
            "c1": config.crf_c1,
            "c2": config.crf_c2,
            "max_iterations": config.crf_max_iterations,
            "feature.possible_transitions": True,
        }
    )
    trainer.train(str(path))


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, 0o644)  # mkstemp makes it private; these are ordinary, committed files
    os.replace(tmp, path)


def train(data_dir: Path, out_dir: Path, config: TrainConfig | None = None) -> TrainResult:
    config = config or TrainConfig()
    data_path = data_dir / TRAIN_FILE
    if not data_path.is_file():
        raise NLUModelError(str(data_path), "no training data")
    raw = data_path.read_bytes()
    examples = read_jsonl(data_path)
    random.Random(config.seed).shuffle(examples)

    out_dir.mkdir(parents=True, exist_ok=True)
    intent_model = fit_intent(examples, config)
    onnx_bytes = to_onnx(intent_model, config)
    _write_atomic(out_dir / INTENT_MODEL, onnx_bytes)
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        crf_tmp = Path(tmp) / SLOT_MODEL
        fit_slots(examples, config, crf_tmp)
        crf_bytes = crf_tmp.read_bytes()
    _write_atomic(out_dir / SLOT_MODEL, crf_bytes)

    settings = asdict(config)
    manifest = Manifest(
        data_file=TRAIN_FILE,
        data_sha256=sha256_bytes(raw),
        examples=len(examples),
        config=settings,
        config_sha256=config_digest(settings),
        artefacts={INTENT_MODEL: sha256_bytes(onnx_bytes), SLOT_MODEL: sha256_bytes(crf_bytes)},
        trained_with={
            name: version(name) for name in ("scikit-learn", "skl2onnx", "onnx", "python-crfsuite")
        },
    )
    _write_atomic(out_dir / MANIFEST, manifest.to_json().encode())
    return TrainResult(out_dir, manifest, intent_model)
