"""The ledger of every mechanism that touched the private table, and what it cost.

Each entry says what its mechanism would cost alone. The run's total is the tighter of two upper
bounds on its privacy loss: the basic-composition sum of the entries, and the accountant's
composition of its Gaussian mechanisms (DP-SGD, marginal measurements) and zCDP mechanisms (an
adaptive mechanism's selections and measurements, known by their ρ; `accounting.compose`) plus the
sum of the others.
Training is written by `record_training` from the noise plan and the steps taken, whether the
training ended, was cancelled or failed; a training process that died is charged by
`charge_interrupted`. Entries are told apart by their `kind`, never by their wording.
"""
from __future__ import annotations

import dataclasses
import datetime
import math
from dataclasses import asdict, dataclass, field

from .accounting import ZCDP, Gaussian, accountant_for, compose, zcdp_epsilon
from .planning import NoisePlan, RhoPlan
from .budget import delta_warning

# kinds of mechanisms in a ledger
TRAINING = "dp-sgd"            # DP-SGD steps (any model's private training)
BOUNDS = "dp-bounds"           # numeric bounds the schema lacked
# numeric value sets and point masses the schema lacked (privacy.value_sets)
VALUE_SETS = "value-sets"
COUNT = "noisy-count"          # the row count, when the schema does not declare it public
MARGINALS = "marginals"        # Gaussian measurements of marginals (calibration of the samples)
# Gaussian measurement of numeric columns' histograms, read as quantiles (their bins)
QUANTILES = "quantiles"
# marginals chosen by the exponential mechanism and measured (AIM): zCDP, by ρ
SELECTED = "selected-marginals"
ZCDP_MECHANISM = "zcdp-mechanism"  # a family's own mechanism (no DP-SGD) paid from ρ: zCDP, by ρ
# a run whose process died before training: the rest of its ε, charged in full
UNFINISHED = "unfinished"
# the kinds that charge a family's private training: DP-SGD, or its own mechanism paid in ρ
TRAINED = (TRAINING, SELECTED, ZCDP_MECHANISM)


@dataclass
class LedgerEntry:
    mechanism: str
    epsilon: float
    delta: float = 0.0
    accountant: str | None = None
    details: dict = field(default_factory=dict)
    # the day it was recorded: a time to the second would tell how long training took, which grows
    # with the number of rows
    time: str = field(default_factory=lambda: datetime.date.today().isoformat())
    kind: str | None = None

    def gaussian(self) -> Gaussian | None:
        """The entry as a Gaussian mechanism the accountant composes (None: counted by its ε
        alone)."""
        d = self.details
        if self.delta <= 0 or int(d.get("group_size", 1) or 1) > 1 or not d.get("steps"):
            return None
        try:
            return Gaussian(float(d["noise_multiplier"]), float(d["sample_rate"]), int(d["steps"]))
        except (KeyError, TypeError, ValueError):
            return None

    def accounted(self) -> Gaussian | ZCDP | None:
        """The entry as the accountant composes it: a Gaussian mechanism, a zCDP mechanism (its ρ),
        or None (counted by its ε alone)."""
        rho = self.details.get("rho")
        if rho is not None and self.delta > 0:
            try:
                return ZCDP(float(rho))
            except (TypeError, ValueError):
                return None
        return self.gaussian()


@dataclass
class PrivacyLedger:
    """Every mechanism that touched the private table, and what it cost.

    spent ε is the tighter of the entries' sum (basic composition) and their composition by the
    accountant (`composed_epsilon`); what reports show.
    """

    target_epsilon: float
    target_delta: float
    # the row count as released: declared public, or noisy (see rows_public);
    n_rows: int | None
    #                                 None until a noisy count is measured
    schema_provenance: dict = field(default_factory=dict)
    entries: list[LedgerEntry] = field(default_factory=list)
    # False: n_rows is a noisy count paid from ε (an entry of kind COUNT)
    rows_public: bool = True
    # signature -> composed ε
    _composed: dict = field(default_factory=dict, repr=False, compare=False)
    # called with the ledger after every entry (a run writes it to its folder: a process that dies
    # mid-run leaves every mechanism it recorded on disk)
    on_record: object = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict:  # pickled (sent to torchrun's other ranks) without its listener
        return {**self.__dict__, "on_record": None}

    @property
    def sum_epsilon(self) -> float:
        """The entries' ε summed (basic composition)."""
        return float(sum(e.epsilon for e in self.entries))

    def _composition(self) -> tuple[tuple, float]:
        gaussians = tuple(g for g in (e.accounted() for e in self.entries) if g is not None)
        rest = [e for e in self.entries if e.accounted() is None]
        delta_left = self.target_delta - sum(e.delta for e in rest)
        return (gaussians, round(delta_left, 15), self.target_epsilon), sum(e.epsilon for e in rest)

    @property
    def composed_epsilon(self) -> float | None:
        """ε of the run by the accountant: its Gaussian mechanisms composed (at what δ the other
        entries leave of the target δ), plus the others' ε. None where there is nothing to
        compose."""
        signature, rest = self._composition()
        gaussians, delta_left, _ = signature
        if len(gaussians) < 2 or delta_left <= 0:
            return None
        if signature not in self._composed:
            self._composed.clear()
            self._composed[signature] = compose(gaussians, delta_left, accountant_for(self.target_epsilon, "prv"))
        return rest + self._composed[signature]

    def _spent(self) -> tuple[float, float]:
        """(ε, δ) spent: the accountant's composition (at the target δ) where the ledger has one, or
        the sum, whichever has the smaller ε among those within the target δ."""
        total = (self.sum_epsilon, float(sum(e.delta for e in self.entries)))
        composed = self.composed_epsilon
        if composed is None:
            return total
        if total[1] <= self.target_delta * (1 + 1e-9) and total[0] <= composed:
            return total
        return composed, float(self.target_delta)

    @property
    def composition(self) -> str:
        """How the entries add up to what was spent, in words."""
        if self.spent_epsilon == self.sum_epsilon:
            return "basic composition (the entries' ε summed)"
        gaussians, _, _ = self._composition()[0]
        how = "RDP" if any(isinstance(g, ZCDP) for g in gaussians) else accountant_for(self.target_epsilon, "prv").upper()
        return (f"the Gaussian and zCDP mechanisms (DP-SGD, marginal measurements and selections) composed by the "
                f"{how} accountant, the other entries' ε added: less than the entries' sum")

    @property
    def spent_epsilon(self) -> float:
        return self._spent()[0]

    @property
    def spent_delta(self) -> float:
        return self._spent()[1]

    @property
    def remaining_epsilon(self) -> float:
        return self.target_epsilon - self.spent_epsilon

    def record(self, mechanism: str, epsilon: float, delta: float = 0.0, accountant: str | None = None,
               kind: str | None = None, **details) -> LedgerEntry:
        entry = LedgerEntry(mechanism=mechanism, epsilon=float(epsilon), delta=float(delta),
                            accountant=accountant, details=details, kind=kind)
        self.entries.append(entry)
        if self.on_record is not None:
            self.on_record(self)
        return entry

    @property
    def count_variance(self) -> float:
        """The variance of the released row count around the true one: 0 where it is public (or was
        not measured), 2·scale² for the Laplace noise of a noisy count."""
        entry = None if self.rows_public else next((e for e in self.entries if e.kind == COUNT), None)
        scale = float(entry.details.get("noise_scale") or 0.0) if entry is not None else 0.0
        return 2.0 * scale ** 2

    def has_training(self) -> bool:
        """Whether the run's DP training is already charged."""
        return self.training_entry() is not None

    def training_entry(self) -> LedgerEntry | None:
        """The entry that charges the run's DP training (None before it is charged)."""
        return next((e for e in self.entries if e.kind in TRAINED), None)

    def warnings(self) -> list[str]:
        out = []
        if self.schema_provenance.get("warning"):
            out.append(self.schema_provenance["warning"])
        w = delta_warning(self.target_delta, self.n_rows) if self.n_rows and self.target_delta else None
        if w:
            out.append(w)
        if self.spent_epsilon > self.target_epsilon * 1.0001:
            out.append(f"spent ε {self.spent_epsilon:.4g} exceeds the target {self.target_epsilon:g}")
        return out

    def to_dict(self) -> dict:
        return {
            "target_epsilon": self.target_epsilon,
            "target_delta": self.target_delta,
            "n_rows": self.n_rows,
            "rows_public": self.rows_public,
            "spent_epsilon": self.spent_epsilon,
            "spent_delta": self.spent_delta,
            "composition": self.composition,
            "sum_epsilon": self.sum_epsilon,
            "composed_epsilon": self.composed_epsilon,
            "composed_signature": _signature_json(self._composition()[0]),
            "schema_provenance": self.schema_provenance,
            "warnings": self.warnings(),
            "entries": [asdict(e) for e in self.entries],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "PrivacyLedger":
        """A ledger as `to_dict` wrote it; LedgerError naming what is not (a hand-edited or damaged
        file)."""
        _check_ledger_dict(data)
        ledger = cls(target_epsilon=data["target_epsilon"], target_delta=data["target_delta"],
                     n_rows=data["n_rows"], schema_provenance=data.get("schema_provenance", {}),
                     rows_public=bool(data.get("rows_public", True)))
        ledger.entries = [LedgerEntry(**{"kind": _legacy_kind(e), **e}) for e in data.get("entries", [])]
        signature, rest = ledger._composition()
        if data.get("composed_epsilon") is not None and data.get("composed_signature") == _signature_json(signature):
            # computed when it was written
            ledger._composed[signature] = float(data["composed_epsilon"]) - rest
        return ledger


class LedgerError(ValueError):
    """A ledger file that is not what `PrivacyLedger.to_dict` writes."""


ENTRY_FIELDS = {f.name for f in dataclasses.fields(LedgerEntry)}


def _check_ledger_dict(data) -> None:
    if not isinstance(data, dict):
        raise LedgerError(f"a ledger is a JSON object, not {type(data).__name__}")
    for key in ("target_epsilon", "target_delta"):
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise LedgerError(f"{key} must be a finite number ≥ 0, not {value!r}")
    if "n_rows" not in data:
        raise LedgerError("n_rows is missing")
    n = data["n_rows"]
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise LedgerError(f"n_rows must be a whole number, not {n!r}")
    entries = data.get("entries", [])
    if not isinstance(entries, list):
        raise LedgerError("entries must be a list")
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise LedgerError(f"entry {i + 1} is not an object")
        unknown = set(e) - ENTRY_FIELDS
        if unknown:
            raise LedgerError(f"entry {i + 1} has unknown field(s) {', '.join(sorted(map(str, unknown)))}")
        for key in ("epsilon", "delta"):
            value = e.get(key, 0.0)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise LedgerError(f"entry {i + 1}: {key} must be a finite number ≥ 0, not {value!r}")
        if not isinstance(e.get("mechanism"), str) or not isinstance(e.get("details", {}), dict):
            raise LedgerError(f"entry {i + 1} needs a mechanism (text) and details (an object)")


def _signature_json(signature: tuple) -> list:
    gaussians, delta_left, target = signature
    return [[[g.rho] if isinstance(g, ZCDP) else [g.noise_multiplier, g.sample_rate, g.steps] for g in gaussians],
            delta_left, target]


def _legacy_kind(entry: dict) -> str | None:
    """The kind of an entry saved before entries had one (read once, from its wording)."""
    mechanism = str(entry.get("mechanism", ""))
    if mechanism.startswith("DP-SGD"):
        return TRAINING
    if mechanism.startswith("DP quantiles"):
        return BOUNDS
    return None


def record_training(ledger: PrivacyLedger, mechanism: str, plan: NoisePlan, steps: int, cancelled: bool = False,
                    **details) -> LedgerEntry:
    """Charge `steps` DP steps of `plan`: what they cost by the plan's accountant (group privacy
    included). Called however training ended; steps that were started count.
    Under torchrun `details` holds `processes`: the steps were taken by that many processes
    together, each step one sampled Gaussian mechanism on the whole table (the same cost as in one
    process)."""
    epsilon, delta = plan.spent(steps)
    extra = {"group_size": plan.group_size} if plan.group_size > 1 else {}
    return ledger.record(mechanism, epsilon=epsilon, delta=delta, accountant=plan.accountant, kind=TRAINING,
                         noise_multiplier=plan.noise_multiplier, sample_rate=plan.sample_rate, steps=steps,
                         steps_planned=plan.steps, max_grad_norm=plan.max_grad_norm, cancelled=cancelled,
                         **extra, **details)


def charge_unfinished(ledger: PrivacyLedger) -> LedgerEntry:
    """Charge a run whose process died before training began (during the count, the bounds or a
    measurement): whatever it was measuring when it died is unknown, so the rest of its (ε, δ) is
    charged, never less than it spent."""
    epsilon = max(0.0, ledger.target_epsilon - ledger.spent_epsilon)
    delta = max(0.0, ledger.target_delta - ledger.spent_delta)
    return ledger.record("Interrupted before training (the rest of the budget, charged in full)", epsilon=epsilon,
                         delta=delta, kind=UNFINISHED,
                         reason="the process died while a mechanism may have been running")


def charge_interrupted(ledger: PrivacyLedger, plan: dict, steps: int) -> LedgerEntry:
    """Charge a training process that died before writing its own entry: the `steps` it logged and
    the one it may have begun unlogged (at most the plan's), by the plan it saved. A plan saved
    before group sizes were recorded is charged in full, never less than it spent; so is a mechanism
    paid in ρ (its rounds spend unequal shares, and a round may have started unlogged), in the words
    and kind its family declared in the plan (a plan saved without them is AIM's)."""
    if plan.get("kind") == "zcdp":
        p = RhoPlan.from_dict(plan)
        words = p.mechanism or "Marginals selected and measured"
        return ledger.record(f"{words} (interrupted; charged in full)",
                             epsilon=zcdp_epsilon(p.rho, p.delta), delta=p.delta, accountant="zcdp",
                             kind=p.ledger_kind or SELECTED, rho=p.rho, rounds_logged=steps,
                             reason="a mechanism paid in ρ is charged its whole ρ")
    if "group_size" not in plan:
        p = NoisePlan.from_dict(plan)
        return ledger.record("DP-SGD (interrupted; charged in full)", epsilon=p.epsilon, delta=p.delta,
                             accountant=p.accountant, kind=TRAINING, steps=steps, steps_planned=p.steps,
                             reason="the plan was saved without its group size")
    p = NoisePlan.from_dict(plan)
    steps = min(int(steps) + 1, int(p.steps))  # the step it died in may have begun
    epsilon, delta = p.spent(steps)
    extra = {"group_size": p.group_size} if p.group_size > 1 else {}
    return ledger.record("DP-SGD (interrupted)", epsilon=epsilon, delta=delta, accountant=p.accountant, kind=TRAINING,
                         steps=steps, steps_planned=p.steps, noise_multiplier=p.noise_multiplier,
                         sample_rate=p.sample_rate, **extra)
