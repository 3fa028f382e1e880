"""What a family with its own mechanism (`uses_dp_sgd = False`: no DP-SGD) is given, from what it
declares: its plan, its budget, its rounds' events and result, its ledger entry and its plan in a
steward's words.

It spends a budget of zero-concentrated DP ρ: `plan_privacy` plans ρ for its `planned_rounds()` with
the run's other mechanisms (`privacy.planning.plan_rho`), `fit` makes the budget (`self.budget`, a
`privacy.selection.RhoBudget`) before `train_private` spends it (`measure`, `select`, `sigma_for`),
and `charge` writes what it spent in its own words (`dp_mechanism`) and kind (`ledger_kind`).
Every ρ and ε is the privacy layer's. SynthModel's hooks call these where a family does not train
by DP-SGD, so AIM and a family of a few lines (tests/family_example_rho.py) implement the same
hooks.
"""
from __future__ import annotations

import time

from ..privacy import selection
from ..privacy.ledger import ZCDP_MECHANISM, PrivacyLedger
from ..privacy.planning import RhoPlan, plan_rho
from ..training.engine import TrainResult
from . import plan_words
from .plan_words import PlanSummary


class OwnMechanism:
    """The base's half for a family that spends ρ by its own mechanism (mixed into SynthModel)."""
    # the kind of its ledger entry where it spends ρ (privacy.ledger; AIM's: its selections)
    ledger_kind = ZCDP_MECHANISM

    def planned_rounds(self) -> int:
        """The rounds its mechanism plans (each reads the table once); its budget, not this count,
        bounds what it spends."""
        return 1

    def rho_plan(self, n_rows: int, epsilon: float, delta: float, alongside: tuple = ()) -> RhoPlan:
        """ρ for its planned rounds within (ε, δ), the run's Gaussian measurements composed."""
        return plan_rho(epsilon, delta, self.planned_rounds(), n_rows, alongside,
                        mechanism=self.dp_mechanism, ledger_kind=self.ledger_kind)

    def round_event(self, done: int, expected: int, loss: float | None, start: float,
                    **extra) -> dict:
        """A round's event, for the train page and the CLI: rounds done and expected, the run's ε so
        far (what was spent before included), the ρ spent; `extra` adds or replaces keys."""
        budget = self.budget
        return {"step": done, "steps": max(expected, done), "epoch": budget.share_spent,
                "loss": loss, "epsilon": self.plan.spent_after(budget.spent), "batch_size": 0,
                "samples_per_s": None, "elapsed_s": time.perf_counter() - start,
                "rho_spent": budget.spent, "unit": self.plan.unit, "mechanism": self.family,
                **extra}

    def rounds_result(self, done: int, planned: int, cancelled: bool, events: list, start: float,
                      rows: int) -> TrainResult:
        """What `train_private` returns after `done` rounds (`planned` expected) on `rows` rows."""
        return TrainResult(steps_done=done, steps_planned=planned, cancelled=cancelled,
                           epsilon_spent=self.plan.rounds_spent(self.budget.spent),
                           seconds=time.perf_counter() - start, samples_seen=rows,
                           last_loss=events[-1]["loss"] if events else None, device="cpu",
                           events=events)

    def rho_charge(self, ledger: PrivacyLedger, outcome: str, steps: int) -> None:
        """Charge the ρ its mechanism spent, in its words and kind, with its `ledger_details`."""
        selection.record(ledger, self.budget, self.plan.delta, cancelled=outcome == "cancelled",
                         interrupted=outcome == "interrupted", mechanism=self.dp_mechanism,
                         kind=self.ledger_kind, model=self.family, rounds=steps,
                         **self.ledger_details())

    def rho_summary(self, plan: RhoPlan, rows: int, epsilon: float, bounds: bool,
                    statistics: bool) -> PlanSummary:
        """The plan in a steward's words: its rounds, its budget ρ and what it costs alone."""
        return plan_words.rho_summary(plan, rows, epsilon, self.expected_steps(plan),
                                      self.dp_mechanism, bounds, statistics)
