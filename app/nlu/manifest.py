"""The model directory's manifest: what the artefacts were trained from, and checks on load.

Artefacts are committed (they are small) next to `manifest.json`, which records the sha256
of the training data, of the training config and of each artefact. Loading refuses a model
directory whose data hash no longer matches the data on disk (someone edited the data and
did not retrain) or whose artefacts do not match their recorded hashes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import NLUModelError

MANIFEST = "manifest.json"
INTENT_MODEL = "intent.onnx"
SLOT_MODEL = "slots.crfsuite"
FORMAT = 1


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def config_digest(config: dict[str, Any]) -> str:
    return sha256_bytes(json.dumps(config, sort_keys=True).encode())


@dataclass(frozen=True)
class Manifest:
    data_file: str
    data_sha256: str
    examples: int
    config: dict[str, Any]
    config_sha256: str
    artefacts: dict[str, str]  # file name -> sha256
    trained_with: dict[str, str]

    def to_json(self) -> str:
        body = {
            "format": FORMAT,
            "data": {"file": self.data_file, "sha256": self.data_sha256, "examples": self.examples},
            "config": self.config,
            "config_sha256": self.config_sha256,
            "artefacts": self.artefacts,
            "trained_with": self.trained_with,
        }
        return json.dumps(body, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def read(cls, model_dir: Path) -> Manifest:
        path = model_dir / MANIFEST
        if not path.is_file():
            raise NLUModelError(
                str(model_dir), f"no NLU model here (missing {MANIFEST}); run `hermes nlu train`"
            )
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if raw.get("format") != FORMAT:
                raise NLUModelError(str(path), f"unsupported manifest format {raw.get('format')!r}")
            return cls(
                data_file=raw["data"]["file"],
                data_sha256=raw["data"]["sha256"],
                examples=raw["data"]["examples"],
                config=raw["config"],
                config_sha256=raw["config_sha256"],
                artefacts=dict(raw["artefacts"]),
                trained_with=dict(raw["trained_with"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise NLUModelError(str(path), f"not a valid NLU manifest: {exc}") from exc

    def verify(self, model_dir: Path, data_dir: Path | None) -> None:
        """Raise NLUModelError unless the artefacts and (when present) the data match."""
        if config_digest(self.config) != self.config_sha256:
            raise NLUModelError(
                str(model_dir / MANIFEST), "the config hash does not match its config"
            )
        for name in (INTENT_MODEL, SLOT_MODEL):
            path = model_dir / name
            if not path.is_file():
                raise NLUModelError(str(model_dir), f"{name} is missing; run `hermes nlu train`")
            if sha256_bytes(path.read_bytes()) != self.artefacts.get(name):
                raise NLUModelError(
                    str(model_dir),
                    f"{name} does not match the sha256 in {MANIFEST} (corrupt or hand-edited); "
                    "run `hermes nlu train`",
                )
        if data_dir is None:
            return
        data = data_dir / self.data_file
        if not data.is_file():
            return  # an install without the training data: the artefact hashes are the check
        actual = sha256_bytes(data.read_bytes())
        if actual != self.data_sha256:
            raise NLUModelError(
                str(model_dir),
                f"the NLU model here was trained from {self.data_file} with sha256 "
                f"{self.data_sha256[:12]}..., but {data} now has {actual[:12]}...; "
                f"retrain with `hermes nlu train --data {data_dir} --out {model_dir}`",
            )
