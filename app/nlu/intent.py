"""The intent classifier, served by ONNX Runtime on one thread without spinning.

The session is built for a 2-core machine shared with the web server: one intra-op and one
inter-op thread, and no busy-waiting between runs (spinning would burn a core for nothing
on sub-millisecond requests).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort

from app.errors import NLUModelError
from app.nlu.features import intent_document
from app.nlu.types import INTENTS, IntentScore

CLASSES_KEY = "hermes.intents"


def session_options() -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.log_severity_level = 3
    return options


class IntentClassifier:
    def __init__(self, path: Path) -> None:
        try:
            self._session = ort.InferenceSession(
                str(path), session_options(), providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # ORT raises its own untyped errors for unreadable models
            raise NLUModelError(str(path), f"cannot load the intent model: {exc}") from exc
        meta = self._session.get_modelmeta().custom_metadata_map
        self.classes: tuple[str, ...] = tuple(meta.get(CLASSES_KEY, "").split(","))
        if sorted(self.classes) != sorted(INTENTS):
            raise NLUModelError(
                str(path), f"predicts {self.classes}, expected the labels {INTENTS}"
            )
        self._input = self._session.get_inputs()[0].name
        outputs = [o.name for o in self._session.get_outputs()]
        self._label_output, self._proba_output = outputs[0], outputs[1]

    def probabilities(self, documents: Sequence[str]) -> np.ndarray:
        """Class probabilities (rows follow `documents`, columns follow `classes`)."""
        feed = np.array(documents, dtype=object).reshape(-1, 1)
        (proba,) = self._session.run([self._proba_output], {self._input: feed})
        result: np.ndarray = proba
        return result

    def labels(self, documents: Sequence[str]) -> list[str]:
        """The graph's own label output (used by the parity test)."""
        feed = np.array(documents, dtype=object).reshape(-1, 1)
        (labels,) = self._session.run([self._label_output], {self._input: feed})
        return [str(label) for label in labels]

    def rank(self, document: str, top: int = 3) -> list[IntentScore]:
        proba = self.probabilities([document])[0]
        order = np.argsort(-proba, kind="stable")[:top]
        return [IntentScore(self.classes[i], float(proba[i])) for i in order]

    def classify(self, text: str, top: int = 3) -> list[IntentScore]:
        return self.rank(intent_document(text), top)

    def close(self) -> None:
        # ORT frees the session when it is collected; dropping the reference is the close.
        del self._session
