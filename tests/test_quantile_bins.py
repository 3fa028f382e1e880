"""Numeric bins at DP quantiles (issue 15, item 5): quantiles released by a Gaussian mechanism on
public histograms, paid from ε and recorded, carried by the run's schema, followed by every model's
bins."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from synth_core import api
from synth_core.encoding import TokenEncoder
from synth_core.privacy import BudgetError, PrivacyLedger
from synth_core.privacy.ledger import QUANTILES
from synth_core.privacy.measurements import QUANTILE_LEVELS, measure_quantiles, quantile_columns
from synth_core.schema import ColumnSpec, Schema, SchemaError


def _skewed(n: int = 6000, seed: int = 0) -> tuple[pd.DataFrame, Schema]:
    rng = np.random.default_rng(seed)
    table = pd.DataFrame({
        "gain": np.where(rng.random(n) < 0.8, 0, rng.integers(100, 20_000, n)),   # a spike at zero, a long tail
        "ratio": np.round(rng.gamma(2.0, 0.15, n).clip(0, 3), 2),                 # mass in a tenth of the range
        "kids": rng.integers(0, 5, n),                                             # few values: one bin each
        "sex": rng.choice(["F", "M"], n),
    })
    schema = Schema(columns=[ColumnSpec("gain", "integer", lower=0, upper=99_999, binning="log"),
                             ColumnSpec("ratio", "continuous", lower=0.0, upper=3.0, decimals=2),
                             ColumnSpec("kids", "integer", lower=0, upper=4),
                             ColumnSpec("sex", "categorical", categories=["F", "M"])])
    return table, schema


def test_released_quantiles_follow_the_data_and_are_paid_for():
    table, schema = _skewed()
    ledger = PrivacyLedger(target_epsilon=1.0, target_delta=1e-6, n_rows=len(table))
    out, mechanism = measure_quantiles(table, schema, 0.3, 1e-6, ledger)
    # a column with few values keeps one bin per value
    assert quantile_columns(schema) == ["gain", "ratio"]
    # the steward's schema untouched
    assert out["kids"].quantiles is None and schema["ratio"].quantiles is None
    levels = np.arange(1, QUANTILE_LEVELS) / QUANTILE_LEVELS
    error = np.abs(np.array(out["ratio"].quantiles) - np.quantile(table["ratio"], levels))
    uniform = np.abs(schema["ratio"].from_unit(levels) - np.quantile(table["ratio"], levels))
    # The noise is secret, so the bounds hold for every draw (1,000 draws: median error at most
    # 0.03, mean at most 0.12; the top level moves most, with the noisy total): evenly spread levels
    # are 1.1 off on average.
    assert np.median(error) < 0.06 and error.mean() < 0.3 < uniform.mean()
    assert out["gain"].quantiles[:10] == [0.0] * 10  # the spike
    entry = ledger.entries[-1]
    assert entry.kind == QUANTILES and entry.epsilon == 0.3 and entry.gaussian() == mechanism
    assert entry.details["columns"] == ["gain", "ratio"]
    out.check()
    assert Schema.from_dict(out.to_dict())["ratio"].quantiles == out["ratio"].quantiles


def test_bins_at_quantiles_give_a_spike_its_own_bin_and_lower_the_binning_floor():
    table, schema = _skewed()
    releases = [measure_quantiles(table, schema, 0.5, 1e-6, PrivacyLedger(1.0, 1e-6, len(table)))[0] for _ in range(5)]
    out = releases[0]
    edges = out["gain"].edges(50)
    assert edges[0] == -0.5 and edges[1] == 0.5  # zero alone in its bin
    assert np.all(np.diff(edges) > 0) and edges[-1] == 99_999.5 and np.all((edges % 1) == 0.5)
    assert out["kids"].edges(50).tolist() == [-0.5, 0.5, 1.5, 2.5, 3.5, 4.5]
    # the real rows through the bins and back: closer to themselves with bins at the quantiles
    # on average over independent releases: one draw's floor ranges 0.02-0.07 (150 draws), uniform
    # bins' is 0.089
    def floor(spec):
        enc = TokenEncoder(Schema(columns=[spec]), n_bins=20)
        back = enc.decode(enc.encode(table[[spec.name]]), np.random.default_rng(0))
        bins = np.quantile(table[spec.name], np.linspace(0, 1, 21))
        a = np.histogram(table[spec.name], bins)[0] / len(table)
        b = np.histogram(back[spec.name].clip(bins[0], bins[-1]), bins)[0] / len(table)
        return 0.5 * np.abs(a - b).sum()
    assert np.mean([floor(r["ratio"]) for r in releases]) < 0.7 * floor(schema["ratio"])


def test_quantiles_outside_the_bounds_or_unsorted_are_refused():
    with pytest.raises(SchemaError, match="quantiles"):
        ColumnSpec("x", "continuous", lower=0.0, upper=1.0, quantiles=[0.5, 0.2]).check()
    with pytest.raises(SchemaError, match="quantiles"):
        ColumnSpec("x", "continuous", lower=0.0, upper=1.0, quantiles=[0.5, 2.0]).check()


def test_a_run_with_quantile_bins_stays_within_its_budget_and_reloads_the_same_bins(tmp_path):
    table, schema = _skewed(3000)
    result = api.fit(table, schema, model="dp-tbart", epsilon=2.0, preset="tiny", accountant="rdp",
                     options={"epochs": 1, "batch_size": 256, "n_bins": 20}, quantile_share=0.2,
                     calibration_share=0.2, run_dir=tmp_path / "run")
    kinds = [e.kind for e in result.ledger.entries]
    assert QUANTILES in kinds and result.ledger.spent_epsilon <= 2.0
    assert result.model.full_schema["ratio"].quantiles is not None
    reloaded = api.load_model(tmp_path / "run")
    assert np.array_equal(reloaded.encoder.codecs[1].edges, result.model.encoder.codecs[1].edges)
    assert not np.array_equal(result.model.encoder.codecs[1].edges, np.linspace(0, 3, 21))
    rows, _ = api.sample(tmp_path / "run", 200, seed=0)
    assert rows["ratio"].between(0, 3).all() and rows["gain"].between(0, 99_999).all()
    with pytest.raises(BudgetError, match="quantile share"):
        api.fit(table, schema, model="dp-tbart", epsilon=1.0, preset="tiny", quantile_share=0.5)


def test_a_number_with_few_values_at_its_precision_gets_a_bin_per_value():
    """Public facts alone (bounds and decimals): a rating 1.0-5.0 written to one decimal has 41
    values, so with 50 bins each has its own, and the real rows come back through the bins unchanged
    (no binning floor)."""
    spec = ColumnSpec("rating", "continuous", lower=1.0, upper=5.0, decimals=1)
    # 20 bins: too few, evenly cut as before
    assert len(spec.edges(50)) == 42 and len(spec.edges(20)) == 21
    encoder = TokenEncoder(Schema(columns=[spec]), n_bins=50)
    table = pd.DataFrame({"rating": np.round(np.random.default_rng(0).uniform(1, 5, 500), 1)})
    back = encoder.decode(encoder.encode(table), np.random.default_rng(1))
    assert np.allclose(back["rating"], table["rating"])
