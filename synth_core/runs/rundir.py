"""A run directory on disk: what one training run was asked, did and produced.

    config.json     model family, preset, options, ε, δ, accountant, the noise plan
    schema.json     the public schema the run used (with its provenance)
    ledger.json     every mechanism that touched the private table and its ε
    events.jsonl    one JSON line per optimizer step (step, epoch, loss, ε, samples/s)
    status.json     running / completed / cancelled / failed, with a message
    model/          weights (model.pt) and the model's own description (model.json)
    samples/        synthetic tables written by `sample`

Every JSON file is written atomically (write to a temporary file, then rename), so a reader never sees a
half-written file; a crash or a cancel leaves a readable directory whose status says what happened.
The private table itself is never written here.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from ..privacy import PrivacyLedger
from ..schema import Schema
from ..files import write_atomic

STATES = ("created", "running", "completed", "cancelled", "failed")


class RunError(RuntimeError):
    """A run directory is missing, unreadable or not in a state that allows the operation."""


class RunDir:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    # --- creation -----------------------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike, overwrite: bool = False) -> "RunDir":
        run = cls(path)
        if run.path.exists() and any(run.path.iterdir()):
            if not overwrite:
                raise RunError(f"{run.path} already holds a run; choose another directory or allow overwriting")
            if run.exists() and run.status().get("state") == "running":
                raise RunError(f"{run.path} holds a run that is still running")
        run.path.mkdir(parents=True, exist_ok=True)
        os.chmod(run.path, 0o700)  # the run describes private data: owner only
        (run.path / "events.jsonl").write_text("")
        run.set_status("created")
        return run

    def exists(self) -> bool:
        return (self.path / "status.json").exists()

    def require(self) -> "RunDir":
        if not self.exists():
            raise RunError(f"no run at {self.path} (status.json is missing)")
        return self
        
    # --- JSON files ---------------------------------------------------------------------------------
    def _write_json(self, name: str, data: Any) -> None:
        write_atomic(self.path / name, json.dumps(data, indent=2, default=_json_default))

    def _read_json(self, name: str) -> Any:
        try:
            return json.loads((self.path / name).read_text())
        except FileNotFoundError:
            raise RunError(f"the run at {self.path} has no {name}") from None
        except json.JSONDecodeError as e:
            raise RunError(f"{self.path / name} is not valid JSON: {e}") from None

    def set_status(self, state: str, message: str | None = None, **extra) -> None:
        assert state in STATES, state
        self._write_json("status.json", {"state": state, "message": message, "time": time.time(), **extra})

    def status(self) -> dict:
        return self._read_json("status.json")

    def write_config(self, config: dict) -> None:
        self._write_json("config.json", config)

    def config(self) -> dict:
        return self._read_json("config.json")

    def write_schema(self, schema: Schema) -> None:
        schema.save(self.path / "schema.json")

    def schema(self) -> Schema:
        return Schema.load(self.path / "schema.json")

    def write_ledger(self, ledger: PrivacyLedger) -> None:
        self._write_json("ledger.json", ledger.to_dict())

    def ledger(self) -> PrivacyLedger:
        return PrivacyLedger.from_dict(self._read_json("ledger.json"))

    def write_json(self, name: str, data: Any) -> None:
        self._write_json(name, data)

    def read_json(self, name: str) -> Any:
        return self._read_json(name)

    # --- events -------------------------------------------------------------------------------------
    def append_event(self, event: dict) -> None:
        with open(self.path / "events.jsonl", "a") as f:
            f.write(json.dumps(event, default=_json_default) + "\n")

    def events(self) -> list[dict]:
        """Every complete event line; a line cut short by a crash is skipped."""
        out = []
        try:
            with open(self.path / "events.jsonl") as f:
                for line in f:
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue
        except FileNotFoundError:
            pass
        return out

    # --- model and samples --------------------------------------------------------------------------
    @property
    def model_dir(self) -> Path:
        return self.path / "model"

    @property
    def samples_dir(self) -> Path:
        return self.path / "samples"

    def has_model(self) -> bool:
        return (self.model_dir / "model.pt").exists() and (self.model_dir / "model.json").exists()

    def summary(self) -> dict:
        status = self.status()
        out = {"path": str(self.path), "state": status.get("state"), "message": status.get("message")}
        try:
            cfg = self.config()
            out.update(model=cfg.get("model"), epsilon=cfg.get("epsilon"), delta=cfg.get("delta"))
        except RunError:
            pass
        try:
            out["spent_epsilon"] = self.ledger().spent_epsilon
        except RunError:
            pass
        return out


def _json_default(obj):
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")
