"""DP randomness is secret: the noise and the Poisson batches never come from the run's seed.

The attack this guards against (issue 13): the seed is 0 by default and stored in the run folder. An
attacker who knows the code, the seed and every row but one replays training with and without the
target row and compares with what was released. With seeded noise the replay with the row is
bit-identical to the real run, so membership is read off with certainty, whatever ε says. With
secret noise the replays differ from the real run however much the attacker knows.
"""
import numpy as np
import pandas as pd
import pytest
import torch

from synth_core import api
from synth_core.training.engine import run_steps
from synth_core.models import MODELS, get_model_class
from synth_core.privacy import PrivacyLedger, gaussian_noise, secret_generator, secret_rng
from synth_core.privacy.bounds import estimate_missing_bounds
from synth_core.schema import ColumnSpec, Schema


def _weights(model) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.weights_to_save().values()]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


def _fit(table, schema, model="dp-tbart", seed=0, **options):
    return api.fit(table, schema, model=model, epsilon=1.0, preset="tiny", seed=seed, accountant="rdp",
                   options={"epochs": 2, "batch_size": 64, **options}, public_table=True)


def test_replaying_training_with_the_seed_does_not_reproduce_the_released_model(toy_schema, toy_table):
    """The replay attack at tiny scale: 400 rows, target row in or out, seed known."""
    rows = toy_table.iloc[:400].reset_index(drop=True)
    released = _fit(rows, toy_schema).model
    released_rows = released.sample(300, seed=5)  # the attacker also knows the sampling seed

    replay_in = _fit(rows, toy_schema).model
    replay_out = _fit(rows.iloc[1:].reset_index(drop=True), toy_schema).model
    real = _weights(released)
    assert not _same(_weights(replay_in), real), "the replay with the target row reproduced the released model"
    assert not _same(_weights(replay_out), real)
    # nor does the replayed model give the released synthetic table back
    assert not replay_in.sample(300, seed=5).equals(released_rows)
    # ...while the user's seed still governs sampling from a trained model
    pd.testing.assert_frame_equal(released.sample(300, seed=5), released_rows)


def test_the_seed_still_governs_the_initial_weights(toy_schema):
    klass = get_model_class("dp-tbart")
    a, b = klass(toy_schema, preset="tiny", seed=3), klass(toy_schema, preset="tiny", seed=3)
    assert _same(_weights(a), _weights(b))
    c = klass(toy_schema, preset="tiny", seed=4)
    assert not _same(_weights(a), _weights(c))


@pytest.mark.parametrize("family", sorted(set(MODELS) - {"dp-tbart"}))
def test_every_family_trains_differently_from_the_same_seed(family, toy_schema, toy_table):
    rows = toy_table.iloc[:200].reset_index(drop=True)
    options = {"epochs": 1, "batch_size": 32} if get_model_class(family).uses_dp_sgd else {}
    first = api.fit(rows, toy_schema, model=family, epsilon=1.0, preset="tiny", seed=0, accountant="rdp",
                    options=options, public_table=True).model
    second = api.fit(rows, toy_schema, model=family, epsilon=1.0, preset="tiny", seed=0, accountant="rdp",
                     options=options, public_table=True).model
    assert first.train_result.steps_done > 0
    assert not _same(_weights(first), _weights(second)), f"{family}: the same seed reproduced DP training"


def test_poisson_batches_are_not_reproducible_from_any_global_seed():
    def batches():
        torch.manual_seed(0)
        np.random.seed(0)
        seen = []
        run_steps(lambda idx: seen.append(sorted(int(i) for i in idx)) or 0.0, n=500, sample_rate=0.1,
                  planned=5)
        return seen
    first, second = batches(), batches()
    assert all(len(b) < 500 for b in first)  # Poisson batches, not the whole table
    assert first != second


def test_secret_generators_ignore_the_global_seeds():
    torch.manual_seed(0)
    a = torch.rand(8, generator=secret_generator())
    torch.manual_seed(0)
    b = torch.rand(8, generator=secret_generator())
    assert not torch.equal(a, b)
    np.random.seed(0)
    assert secret_rng().random() != secret_rng().random()


def test_secure_mode_noise_has_the_planned_scale():
    noise = gaussian_noise(3.0, torch.zeros(200_000), secret_generator())
    assert float(noise.std()) == pytest.approx(3.0, rel=0.02)
    assert abs(float(noise.mean())) < 0.05
    assert torch.count_nonzero(gaussian_noise(0.0, torch.zeros(10), secret_generator())) == 0


def test_dp_bounds_are_not_replayable_from_the_seed():
    """A bin holding about as many rows as the threshold passes or not by its secret noise, whatever
    seeds."""
    schema = Schema(columns=[ColumnSpec("x", "continuous")])
    # ~21 rows in [500, 1000): τ ≈ 21 at ε = 0.5
    table = pd.DataFrame({"x": [50.0] * 300 + [700.0] * 21})
    uppers = set()
    for _ in range(16):
        torch.manual_seed(0)
        np.random.seed(0)
        ledger = PrivacyLedger(target_epsilon=1.0, target_delta=1e-5, n_rows=len(table))
        out = estimate_missing_bounds(table, schema, 0.5, ledger, coarse_range=(-1000.0, 1000.0))
        uppers.add(out["x"].upper)
    assert len(uppers) > 1


def test_measurements_draw_secure_noise_and_keep_whole_counts(toy_schema, toy_table, monkeypatch):
    """Marginals, quantile histograms and AIM's rounds take Opacus' secure-mode noise (never NumPy's
    single floating-point Gaussian draw), from a secret generator, and keep their noisy counts
    rounded."""
    from synth_core.privacy.measurements import measure_marginals, measure_quantiles
    from synth_core.privacy.randomness import secure_gaussian
    from synth_core.privacy.selection import RhoBudget
    from synth_core.schema import validate_table

    from synth_core.privacy import randomness
    secure = []
    monkeypatch.setattr(randomness, "gaussian_noise", lambda *a: secure.append(1) or gaussian_noise(*a))
    clean, _ = validate_table(toy_table, toy_schema)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        ledger = PrivacyLedger(target_epsilon=2.0, target_delta=1e-5, n_rows=len(clean))
        marginals, _ = measure_marginals(clean, toy_schema, 0.5, 1e-6, ledger, rows=len(clean), accountant="rdp")
        runs.append(np.concatenate([m.counts.ravel() for m in marginals.marginals]))
        schema, _ = measure_quantiles(clean, toy_schema, 0.5, 1e-6, ledger, accountant="rdp")
        assert schema["hours"].quantiles is not None
    for counts in runs:
        assert np.array_equal(counts, np.round(counts))
    assert not np.array_equal(runs[0], runs[1])  # the same seeds, other noise
    measured = RhoBudget(1.0).measure(np.arange(10.0), 2.0, np.random.default_rng(0))
    assert np.array_equal(measured, np.round(measured))
    # every measurement's noise, secure
    assert len(secure) == 2 * (len(marginals.marginals) + 1) + 1
    assert float(np.std(secure_gaussian(2.0, 100_000))) == pytest.approx(2.0, rel=0.02)
