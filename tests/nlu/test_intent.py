"""The ONNX intent model predicts what the trained scikit-learn model predicts."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from app.nlu.dataset import EvalSet
from app.nlu.features import intent_document
from app.nlu.intent import IntentClassifier, session_options
from app.nlu.manifest import INTENT_MODEL
from app.nlu.train import TrainResult
from app.nlu.types import INTENTS
from tests.nlu.conftest import MODEL_DIR


def test_onnx_and_sklearn_agree_on_every_test_utterance(
    trained: TrainResult, held_out: EvalSet
) -> None:
    documents = [intent_document(e.text) for e in held_out.examples]
    sk_labels = list(trained.intent_model.predict(documents))
    sk_proba = trained.intent_model.predict_proba(documents)

    onnx = IntentClassifier(MODEL_DIR / INTENT_MODEL)  # the committed model, not the retrained one
    assert list(onnx.classes) == list(trained.intent_model.classes_)
    assert onnx.labels(documents) == sk_labels
    proba = onnx.probabilities(documents)
    assert [onnx.classes[i] for i in proba.argmax(axis=1)] == sk_labels
    np.testing.assert_allclose(proba, sk_proba, rtol=0, atol=1e-5)


def test_parity_holds_one_utterance_at_a_time(trained: TrainResult, held_out: EvalSet) -> None:
    onnx = IntentClassifier(MODEL_DIR / INTENT_MODEL)
    for example in held_out.examples[::10]:
        document = intent_document(example.text)
        (expected,) = trained.intent_model.predict([document])
        ranking = onnx.rank(document)
        assert ranking[0].intent == expected


def test_ranking_is_the_top_three_best_first_from_a_distribution() -> None:
    onnx = IntentClassifier(MODEL_DIR / INTENT_MODEL)
    ranking = onnx.classify("where is my parcel SF123456789CN")
    assert ranking[0].intent == "track_shipment"
    assert len(ranking) == 3
    assert ranking[0].confidence >= ranking[1].confidence >= ranking[2].confidence
    full = onnx.probabilities([intent_document("where is my parcel")])[0]
    assert abs(float(full.sum()) - 1.0) < 1e-5
    assert sorted(onnx.classes) == sorted(INTENTS)


def test_the_session_runs_on_one_thread_without_spinning() -> None:
    options = session_options()
    assert options.intra_op_num_threads == 1
    assert options.inter_op_num_threads == 1
    assert options.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"


def test_features_split_chinese_into_characters_and_bigrams_and_mask_ids() -> None:
    doc = intent_document("订单202405201234到哪了?").split()
    assert {"z:订", "z:单", "zz:订单", "<num12>", "zz:到哪", "p:?"} <= set(doc)
    doc = intent_document("reset my pasword, phone 13800138000").split()
    assert {"w:reset", "ww:reset_my", "<num11>", "c:#pa", "c:wor"} <= set(doc)
    assert intent_document("track SF123456789CN").split()[-2:] == ["<trk>", "ww:track_<trk>"]
    assert intent_document("   ") == "<empty>"
