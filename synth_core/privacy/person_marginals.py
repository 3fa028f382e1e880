"""Noisy marginals of linked tables at both levels, protecting a person: for calibrating a linked
model's samples.

    persons    the marginals `measured_marginals` picks for a person's row (the parents' columns and their count of
               child rows, schema.linked.LinkedSchema.persons): a person is one row, moving one cell of each by 1
    children   the marginals it picks for the children's columns, over child rows, each of a person's k rows
               counted 1/k: a person's rows add up to 1 in every marginal, so adding or removing a person moves
               each one by at most 1 in L1 and in L2 (bounded by max_children or not)

All of them are released by one Gaussian mechanism, each child marginal scaled by CHILD_WEIGHT (w):
a person moves each of the m persons' marginals by at most 1 and each of the c child marginals by at
most w in L2, so the L2 sensitivity is √(m + w²c) (√m for one table's marginals,
privacy.measurements); a child marginal's noise is the mechanism's over w once scaled back. Counting
a child row 1/k rather than 1 (a sensitivity of max_children per marginal) measures the children's
distribution averaged over persons, which the same statistic of the synthetic persons is calibrated
to; where persons have fewer rows than max_children it carries less noise for the same ε.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..encoding.tokens import TokenEncoder
from .accounting import Gaussian
from .ledger import MARGINALS, PrivacyLedger
from .accounting import gaussian_for
from .measurements import FINE_BINS, MARGINAL_BINS, Marginal, Marginals, measured_marginals, pooled_rows
from .randomness import noisy_counts


@dataclass
class PersonMarginals:
    """The noisy marginals of persons (`persons`, over the persons' rows with their count of child
    rows) and of their child rows (`children`, each person's rows weighted 1/k; `children.rows`: the
    persons released)."""
    persons: Marginals
    children: Marginals

    @property
    def marginals(self) -> list[Marginal]:
        """Every marginal measured, of both levels."""
        return self.persons.marginals + self.children.marginals

    @property
    def total_rows(self) -> float:
        """The persons the marginals stand for (Marginals.total_rows of the persons' level)."""
        return self.persons.total_rows

    def to_dict(self) -> dict:
        return {"persons": self.persons.to_dict(), "children": self.children.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "PersonMarginals":
        return cls(Marginals.from_dict(data["persons"]), Marginals.from_dict(data["children"]))


# how much of the mechanism's sensitivity a child row's marginal takes beside a person's own: each
# child marginal is released scaled by this, so its noise is 1/CHILD_WEIGHT that of the persons'
# marginals, whose noise falls. 0.5 against 1 (bench_linked's tables at ε = 1 and 4, one run each):
# parent × child 2-way TVD 0.160 against 0.191 and 0.379 against 0.409 at ε = 1, level at ε = 4
# (0.101/0.099, 0.290/0.294); children per person closer in all four
CHILD_WEIGHT = 0.5


def child_weights(person: np.ndarray, persons: int) -> np.ndarray:
    """Each child row's weight in a marginal of child rows: 1 / the number of rows its person
    has."""
    counts = np.bincount(person, minlength=persons)
    return 1.0 / counts[person]


def measure_person_marginals(rows, schema, epsilon: float, delta: float, ledger: PrivacyLedger, persons: int,
                             accountant: str = "prv") -> tuple[PersonMarginals, Gaussian]:
    """The marginals of both levels of linked rows (schema.linked.LinkedRows, bounded per person) by
    one Gaussian mechanism that alone spends (ε, δ), recorded in the ledger; and the mechanism, for
    the accountant to compose with the training. `persons`: the released count of persons (noisy or
    declared)."""
    person_schema, child_schema = schema.persons(), schema.child.modelled()
    person_table = rows.parents.assign(**{person_schema.columns[-1].name: rows.children_per_person()})
    chosen = [(person_schema, person_table, None, measured_marginals(person_schema)),
              (child_schema, rows.children, child_weights(rows.person, len(rows)), measured_marginals(child_schema))]
    mechanism = gaussian_for(epsilon, delta, accountant)
    # a person moves each persons' marginal by 1 and each child marginal by CHILD_WEIGHT (in L2, at
    # most)
    std = mechanism.noise_multiplier * math.sqrt(len(chosen[0][3]) + CHILD_WEIGHT ** 2 * len(chosen[1][3]))
    out = []
    for (table_schema, table, weights, picked), scale in zip(chosen, (1.0, CHILD_WEIGHT)):
        encoders = {b: TokenEncoder(table_schema, b) for b in {bins for _, bins in picked}}
        marginals = Marginals(n_bins=MARGINAL_BINS, noise_std=std / scale, rows=int(persons))
        for columns, bins in picked:
            cells, shape = encoders[bins].cells(table, columns)
            counts = np.bincount(cells, weights=weights, minlength=int(np.prod(shape))).astype(float)
            marginals.marginals.append(Marginal(columns, shape, noisy_counts(counts * scale, std) / scale,
                                                n_bins=None if bins == MARGINAL_BINS else bins))
        out.append(marginals)
    # both levels stand for the persons: their count pooled with the persons' marginals' sums (a
    # child marginal sums to the persons with child rows, not to every person)
    out[0].total = out[1].total = pooled_rows(persons, ledger.count_variance, out[0].marginals, out[0].std)
    ledger.record("Marginals of persons and of their child rows (Gaussian mechanism)", epsilon=epsilon, delta=delta,
                  accountant=accountant, kind=MARGINALS, noise_multiplier=mechanism.noise_multiplier, sample_rate=1.0,
                  steps=1, noise_std=std, child_noise_std=std / CHILD_WEIGHT, unit="person", bins=MARGINAL_BINS,
                  fine_bins=FINE_BINS,
                  marginals=[list(c) for c, _ in chosen[0][3]], child_marginals=[list(c) for c, _ in chosen[1][3]],
                  child_rows_weighted="1 / the person's number of child rows")
    return PersonMarginals(*out), mechanism
