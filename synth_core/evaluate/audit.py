"""ε audit: an empirical lower bound on a model family's privacy loss, from ONE training run.

Method (Steinke, Nasr & Jagielski 2023, "Privacy auditing with one (1) training run", NeurIPS):
1. draw m canary rows at random from the PUBLIC schema (uniform over categories and bounds: rows
   unlike the real ones, so a model that memorises them shows it);
2. include each canary in the training table independently with probability 1/2 (a fair coin per
   canary, secret from the "attacker");
3. train the model once, exactly as `fit` does (same engine, same noise calibration), on the base table
   plus the included canaries;
4. score each canary by the trained model's log-likelihood of it (higher = more likely trained on);
   guess "included" for the k+ highest scores, "excluded" for the k− lowest, abstain on the rest;
5. if the training were (ε, δ)-DP, the number of correct guesses v out of r would be stochastically
   dominated by Binomial(r, e^ε / (1 + e^ε)) up to a δ term (their Theorem 3.3 / Algorithm 2 below);
   the largest ε whose p-value for v is below 1 − confidence is the lower bound: with 95% confidence
   the implementation's real ε is at least that.
k+ = k− is tried at three preset sizes (5%, 10%, 20% of m) with a Bonferroni correction, so choosing
the best of them keeps the stated confidence.

What it CAN show: an implementation that does not keep its promise. If the lower bound exceeds the
claimed ε, the claim is false for this code (up to the 5% error rate): e.g. noise that is off, or
clipping that does not bound a row's influence. It is cheap (one run) and uses the real training
code.

What it CANNOT show: that the model IS private. A lower bound below ε proves nothing about the
guarantee; it only means this attack found no violation. One-run audits with a black-box loss score
are far from tight (for correct DP-SGD the bound is typically well below the true ε, often 0); a bug
that only matters for other data, other columns or worst-case neighbours can pass. Only the
accounting proof (the ledger) gives the guarantee; the audit is a smoke test of the code against it.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy import stats
from sklearn.metrics import roc_auc_score

from ..models import get_model_class
from ..schema import Schema, random_table, validate_table

# tiny preset, wider and trained longer: enough capacity and passes that a model WITHOUT privacy
# memorises canaries (the audit can only see what the model can memorise), and seconds on one core
AUDIT_OPTIONS = {"epochs": 60, "n_embd": 32, "batch_size": 256}
AUDIT_BASE_ROWS = 300

BROKEN = {
    None: "correct: the library's DP-SGD as `fit` runs it",
    "noise-off": "broken on purpose: no clipping and no noise (the engine's non-private mode), ε still claimed",
    "epsilon-x1000": "broken on purpose: noise calibrated for 1000·ε while ε is claimed (a unit or budget bug)",
    "clip-off": ("broken on purpose: clipping norm multiplied by 10^6 while the noise stays calibrated to the "
                 "original norm (a sensitivity bug), ε still claimed"),
}


# --------------------------------------------------------------------------------------------------
# the statistics (Steinke, Nasr & Jagielski 2023, Algorithm 2 / their appendix code)
# --------------------------------------------------------------------------------------------------
def p_value_dp_audit(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """Probability of ≥ v correct guesses out of r under the null hypothesis that training is (ε,
    δ)-DP; m canaries, each included independently with probability 1/2."""
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 ≤ v ≤ r ≤ m, got v={v}, r={r}, m={m}")
    q = 1.0 / (1.0 + math.exp(-eps))               # accuracy of ε-DP randomised response
    beta = float(stats.binom.sf(v - 1, r, q))       # P[Binomial(r, q) ≥ v]
    alpha, total = 0.0, 0.0                         # total = P[v > Binomial(r, q) ≥ v − i]
    for i in range(1, v + 1):
        total += float(stats.binom.pmf(v - i, r, q))
        if total > i * alpha:
            alpha = total / i
    return min(beta + alpha * delta * 2 * m, 1.0)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, p: float = 0.05) -> float:
    """The largest ε (bisection, 1e-6 precision) the guesses reject at significance p; 0 if none."""
    if r == 0 or p_value_dp_audit(m, r, v, 0.0, delta) >= p:
        return 0.0
    lo, hi = 0.0, 1.0
    while p_value_dp_audit(m, r, v, hi, delta) < p:
        lo, hi = hi, 2 * hi
        if hi > 1e3:
            return lo
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2
        if p_value_dp_audit(m, r, v, mid, delta) < p:
            lo = mid
        else:
            hi = mid
    return lo


def guesses(scores: np.ndarray, included: np.ndarray, k_plus: int, k_minus: int) -> tuple[int, int]:
    """(r, v): guess "in" for the k+ highest scores and "out" for the k− lowest; v of the r are
    right."""
    order = np.argsort(-scores, kind="stable")
    top, bottom = order[:k_plus], order[len(order) - k_minus:] if k_minus else order[:0]
    v = int(included[top].sum() + (~included[bottom]).sum())
    return k_plus + k_minus, v


@dataclass
class AuditResult:
    model: str
    setting: str
    claimed_epsilon: float
    delta: float
    epsilon_lower_bound: float
    confidence: float
    n_canaries: int
    n_included: int
    n_base_rows: int
    guesses: list[dict]
    # ROC-AUC of the scores for included vs excluded canaries (0.5 = no signal)
    canary_auc: float
    seconds: float
    # lower bound above the claimed ε: the implementation breaks its promise
    violation: bool
    preset: str
    options: dict = field(default_factory=dict)
    spent_epsilon_reported: float | None = None
    can_prove: str = ("a violation: a lower bound above the claimed ε shows, with the stated confidence, that "
                      "this code does not give the claimed guarantee")
    cannot_prove: str = ("privacy: a bound below ε only means this attack found no violation; the guarantee "
                         "rests on the accounting (the ledger), not on the audit")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        verdict = ("VIOLATION: the measured lower bound exceeds the claimed ε" if self.violation
                   else "no violation found (this does not prove the guarantee)")
        return (f"{self.model} [{self.setting}], claimed ε = {self.claimed_epsilon:g} (δ = {self.delta:g}): "
                f"ε lower bound {self.epsilon_lower_bound:.3f} at {self.confidence:.0%} confidence from "
                f"{self.n_canaries} canaries ({self.n_included} included, canary AUC {self.canary_auc:.3f}); "
                f"{verdict}")


# more canaries than this make one training run take hours on a CPU and say little more (the bound's
# confidence grows with the square root of the guesses)
MAX_CANARIES = 100_000


def _canary_scores(model: Any, canaries: pd.DataFrame) -> np.ndarray:
    """Log-likelihood per row under the trained model (minus the per-row mean token loss)."""
    net = model.net
    net.eval()
    with torch.no_grad():
        data = model.encode(canaries).to(model.device)
        losses = torch.cat([model.loss_fn(net, chunk) for chunk in torch.split(data, 4096)])
    return -losses.cpu().numpy().astype(float)


def run_audit(model: str = "dp-tbart", epsilon: float = 1.0, delta: float = 1e-5,
              broken: str | None = None, table: pd.DataFrame | None = None, schema: Schema | None = None,
              n_canaries: int = 1000, preset: str = "tiny", options: dict | None = None,
              accountant: str = "rdp", confidence: float = 0.95, seed: int = 0) -> AuditResult:
    """One audited training run of `model` claiming (ε, δ); see the module docstring.

    table/schema: the base rows the canaries hide among (default: 300 rows of the built-in demo
    table). `broken`: a key of BROKEN. `options` override AUDIT_OPTIONS (the tiny preset, width 32,
    60 epochs: enough that a model without privacy memorises canaries)."""
    if broken not in BROKEN:
        raise ValueError(f"broken must be one of {', '.join(str(b) for b in BROKEN)}, not {broken!r}")
    if isinstance(n_canaries, bool) or not isinstance(n_canaries, int) or not 2 <= n_canaries <= MAX_CANARIES:
        raise ValueError(f"the number of canaries must be a whole number from 2 to {MAX_CANARIES:,} (an audit "
                         f"trains on them and scores each), not {n_canaries!r}")
    t0 = time.perf_counter()
    if table is None or schema is None:
        from ..demo import demo_schema, demo_table
        schema = demo_schema() if schema is None else schema
        table = demo_table(AUDIT_BASE_ROWS, seed=seed + 11) if table is None else table
    # random canaries need not obey the rules; DP-SGD is audited
    schema = dataclasses.replace(schema, rules=[])
    base, _ = validate_table(table, schema)
    rng = np.random.default_rng(seed)
    canaries, _ = validate_table(random_table(schema, n_canaries, seed=seed + 1), schema)
    included = rng.random(n_canaries) < 0.5
    train_table = pd.concat([base, canaries[included]], ignore_index=True)
    train_table = train_table.iloc[rng.permutation(len(train_table))].reset_index(drop=True)
    if not 0 < delta < 1:
        raise ValueError(f"δ must lie strictly between 0 and 1, not {delta!r}")

    opts = {**AUDIT_OPTIONS, **(options or {})}
    klass = get_model_class(model)
    synth = klass(schema, preset=preset, device="cpu", seed=seed, **opts)
    spent = None
    if broken == "noise-off":
        from ..training.engine import train
        synth.train_result = train(synth.net, synth.encode(train_table), synth.loss_fn, synth.train_config, plan=None)
    else:
        plan = synth.plan_privacy(len(train_table), epsilon, delta, accountant)
        if broken == "epsilon-x1000":
            real_plan = synth.plan_privacy(len(train_table), 1000 * epsilon, delta, accountant)
            plan = dataclasses.replace(plan, noise_multiplier=real_plan.noise_multiplier)
        elif broken == "clip-off":
            plan = dataclasses.replace(plan, max_grad_norm=plan.max_grad_norm * 1e6,
                                       noise_multiplier=plan.noise_multiplier / 1e6)
        synth.fit(train_table, epsilon, delta, accountant, plan=plan)
        spent = float(synth.train_result.epsilon_spent) if broken is None else None

    scores = _canary_scores(synth, canaries)
    p = 1.0 - confidence
    sizes = sorted({max(1, int(round(f * n_canaries))) for f in (0.05, 0.10, 0.20)})
    rows = []
    for k in sizes:
        r, v = guesses(scores, included, k, k)
        # Bonferroni over the sizes
        lb = epsilon_lower_bound(n_canaries, r, v, delta, p / len(sizes))
        rows.append({"k_plus": k, "k_minus": k, "guesses": r, "correct": v, "epsilon_lower_bound": lb})
    best = max(row["epsilon_lower_bound"] for row in rows)
    auc = float(roc_auc_score(included, scores)) if 0 < included.sum() < n_canaries else float("nan")
    return AuditResult(model=model, setting=BROKEN[broken], claimed_epsilon=float(epsilon), delta=float(delta),
                       epsilon_lower_bound=float(best), confidence=confidence, n_canaries=n_canaries,
                       n_included=int(included.sum()), n_base_rows=len(base), guesses=rows, canary_auc=auc,
                       seconds=time.perf_counter() - t0, violation=bool(best > epsilon), preset=preset,
                       options=opts, spent_epsilon_reported=spent)
