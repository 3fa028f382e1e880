"""One plan before spending (issue 60 item 2): from a fit request and the public facts to what the
run will do — δ, the ε split, the family's noise plan and sampling shape, the steps to expect.

The run (`pipeline.build`), the model page's preview, the forecast and the time estimate all take
their plan from a `RunPlan`. A preview makes one with `plan_run` from the count it expects; the run
makes one from the count it released and what its ledger has left. δ and the split are computed in
the privacy layer (privacy.split); the noise is the family's own (`SynthModel.plan_privacy`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .models import model_class_for
from .privacy.split import Split, before_training, planned_delta, planned_split
from .request import FitRequest
from .schema import Schema


@dataclass
class RunPlan:
    """A run's plan. `request`: resolved (auto's choice applied); `rows`: the count it plans for
    (public or the noisy count; a preview: the count it expects); `alongside`: the measurements
    composed with training (None: those the split plans); `model`: the run's own untrained model
    (a preview's is made on the CPU when first asked for)."""
    request: FitRequest
    schema: Any                     # Schema or LinkedSchema: the run's
    rows: int
    delta: float
    split: Split
    other_delta: float | None = None  # the δ a noisy count may lead the run to instead
    alongside: tuple | None = None
    model: Any = None
    _noise: Any = field(default=None, repr=False)

    @property
    def family(self) -> type:
        return model_class_for(self.request.model, self.schema)

    def synth(self):
        """The family's model for this plan (untrained): the run's, or one on the CPU."""
        if self.model is None:
            request = self.request
            self.model = self.family(self.schema, preset=request.preset, device="cpu", seed=0,
                                     **(request.options or {}))
        return self.model

    @property
    def noise(self):
        """The family's noise plan (NoisePlan or RhoPlan): its sampling shape, steps and noise,
        calibrated to what the split leaves, composed with the measurements alongside."""
        if self._noise is None:
            request = self.request
            alongside = self.alongside
            if alongside is None:
                alongside = self.split.alongside(self.delta, self.synth().full_schema,
                                                 request.accountant)
            self._noise = self.synth().plan_privacy(self.rows, self.split.left, self.delta,
                                                    request.accountant, alongside)
        return self._noise

    @property
    def steps(self) -> int:
        """The steps or rounds to expect: the number the estimate, the train page and the report
        start from."""
        return self.synth().expected_steps(self.noise)

    @property
    def most_steps(self) -> int:
        """The most steps or rounds the run may take (an adaptive mechanism's may end earlier)."""
        return self.synth().most_steps(self.noise)

    @property
    def batch(self) -> int:
        """The expected rows in a step (the sampling shape's)."""
        return max(1, int(round(self.noise.expected_batch_size)))

    def count_noise(self) -> float | None:
        """The σ of each column's counts the family's own measurements carry (None: DP-SGD
        alone)."""
        return self.synth().count_noise(self.noise)

    def summary(self):
        """The plan in a steward's words (models.plan_words), for the model page."""
        request = self.request
        return self.synth().plan_summary(
            self.noise, self.rows, request.epsilon, request.accountant,
            bounds=before_training(request.bounds_epsilon, request.values_epsilon) > 0,
            statistics=self.split.marginals > 0)


def plan_run(request: FitRequest, schema: Schema, rows: int) -> RunPlan:
    """The plan a run of `request` would make on a table of `rows` rows (units: the shape's) with
    this public schema, before anything is spent: δ from the count it expects (and the other one a
    noisy count may lead to), the ε split as `fit` splits it, auto's choice applied. Raises
    BudgetError (ε, δ or a share unusable) or ValueError (an option) as the run would."""
    rows_public = getattr(schema, "rows", None) is not None
    resolved = request.resolved(schema, rows)
    delta, other = planned_delta(resolved.delta, resolved.epsilon, rows, rows_public)
    split = planned_split(resolved.epsilon, delta,
                          before_training(resolved.bounds_epsilon, resolved.values_epsilon),
                          rows_public, resolved.calibration_share or 0.0,
                          resolved.quantile_share or 0.0)
    return RunPlan(resolved, schema, rows, delta, split, other)
