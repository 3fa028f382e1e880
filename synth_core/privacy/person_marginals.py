"""Noisy marginals of linked tables at both levels, protecting a person: for calibrating a linked model's samples.

    persons    the marginals `measured_marginals` picks for a person's row (the parents' columns and their count of
               child rows, schema.linked.LinkedSchema.persons): a person is one row, moving one cell of each by 1
    children   the marginals it picks for the children's columns, over child rows, each of a person's k rows
               counted 1/k: a person's rows add up to 1 in every marginal, so adding or removing a person moves
               each one by at most 1 in L1 and in L2 (bounded by max_children or not)

All of them are released by one Gaussian mechanism: a person moves each of the m marginals by at most 1 in L2,
so the L2 sensitivity is √m, as for one table's marginals (privacy.measurements). Counting a child row 1/k rather
than 1 (a sensitivity of max_children per marginal) measures the children's distribution averaged over persons,
which the same statistic of the synthetic persons is calibrated to; where persons have fewer rows than
max_children it carries less noise for the same ε.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..encoding.tokens import TokenEncoder
from .accounting import Gaussian
from .ledger import MARGINALS, PrivacyLedger
from .measurements import FINE_BINS, MARGINAL_BINS, Marginal, Marginals, _mechanism, measured_marginals
from .randomness import noisy_counts


@dataclass
class PersonMarginals:
    """The noisy marginals of persons (`persons`, over the persons' rows with their count of child rows) and of
    their child rows (`children`, each person's rows weighted 1/k; `children.rows`: the persons released)."""
    persons: Marginals
    children: Marginals

    @property
    def marginals(self) -> list[Marginal]:
        """Every marginal measured, of both levels."""
        return self.persons.marginals + self.children.marginals

    def to_dict(self) -> dict:
        return {"persons": self.persons.to_dict(), "children": self.children.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> "PersonMarginals":
        return cls(Marginals.from_dict(data["persons"]), Marginals.from_dict(data["children"]))


def child_weights(person: np.ndarray, persons: int) -> np.ndarray:
    """Each child row's weight in a marginal of child rows: 1 / the number of rows its person has."""
    counts = np.bincount(person, minlength=persons)
    return 1.0 / counts[person]


def measure_person_marginals(rows, schema, epsilon: float, delta: float, ledger: PrivacyLedger, persons: int,
                             accountant: str = "prv") -> tuple[PersonMarginals, Gaussian]:
    """The marginals of both levels of linked rows (schema.linked.LinkedRows, bounded per person) by one Gaussian
    mechanism that alone spends (ε, δ), recorded in the ledger; and the mechanism, for the accountant to compose
    with the training. `persons`: the released count of persons (noisy or declared)."""
    person_schema, child_schema = schema.persons(), schema.child.modelled()
    person_table = rows.parents.assign(**{person_schema.columns[-1].name: rows.children_per_person()})
    chosen = [(person_schema, person_table, None, measured_marginals(person_schema)),
              (child_schema, rows.children, child_weights(rows.person, len(rows)), measured_marginals(child_schema))]
    mechanism, std = _mechanism([m for *_, picked in chosen for m in picked], epsilon, delta, accountant)
    out = []
    for table_schema, table, weights, picked in chosen:
        encoders = {b: TokenEncoder(table_schema, b) for b in {bins for _, bins in picked}}
        marginals = Marginals(n_bins=MARGINAL_BINS, noise_std=std, rows=int(persons))
        for columns, bins in picked:
            cells, shape = encoders[bins].cells(table, columns)
            counts = np.bincount(cells, weights=weights, minlength=int(np.prod(shape))).astype(float)
            marginals.marginals.append(Marginal(columns, shape, noisy_counts(counts, std),
                                                n_bins=None if bins == MARGINAL_BINS else bins))
        out.append(marginals)
    ledger.record("Marginals of persons and of their child rows (Gaussian mechanism)", epsilon=epsilon, delta=delta,
                  accountant=accountant, kind=MARGINALS, noise_multiplier=mechanism.noise_multiplier, sample_rate=1.0,
                  steps=1, noise_std=std, unit="person", bins=MARGINAL_BINS, fine_bins=FINE_BINS,
                  marginals=[list(c) for c, _ in chosen[0][3]], child_marginals=[list(c) for c, _ in chosen[1][3]],
                  child_rows_weighted="1 / the person's number of child rows")
    return PersonMarginals(*out), mechanism
