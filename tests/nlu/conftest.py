"""NLU fixtures: the committed model loaded once, and one training run from the committed data."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import pytest

from app.nlu.dataset import EvalSet, read_test_set
from app.nlu.pipeline import NLUPipeline
from app.nlu.train import TrainResult, train
from app.settings import PROJECT_ROOT

DATA_DIR = PROJECT_ROOT / "data" / "nlu"
MODEL_DIR = PROJECT_ROOT / "models" / "nlu"
TODAY = date(2024, 5, 22)  # a Wednesday; the test set's `today`


@pytest.fixture(scope="session")
def held_out() -> EvalSet:
    """test.yaml and the questions-against-requests list of issue 27, both never tuned on."""
    main = read_test_set(DATA_DIR / "test.yaml")
    return EvalSet(main.today, main.examples + policy_set().examples)


def policy_set() -> EvalSet:
    return read_test_set(DATA_DIR / "policy_test.yaml")


@pytest.fixture(scope="session")
def nlu() -> Iterator[NLUPipeline]:
    pipeline = NLUPipeline.load(MODEL_DIR, today=lambda: TODAY)
    yield pipeline
    pipeline.close()


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    """`hermes nlu train` on the committed data, into a fresh directory (about 6 s)."""
    return train(DATA_DIR, tmp_path_factory.mktemp("trained"))
