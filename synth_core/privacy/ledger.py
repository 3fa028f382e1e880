"""The ledger of every mechanism that touched the private table, and what it cost.

Its total is the basic-composition sum of the entries, which is an upper bound on the run's privacy loss.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from .budget import delta_warning


@dataclass
class LedgerEntry:
    mechanism: str
    epsilon: float
    delta: float = 0.0
    accountant: str | None = None
    details: dict = field(default_factory=dict)
    time: float = field(default_factory=time.time)


@dataclass
class PrivacyLedger:
    """Every mechanism that touched the private table, and what it cost.

    total ε and δ are sums over entries (basic composition): an upper bound, and what reports show.
    """

    target_epsilon: float
    target_delta: float
    n_rows: int
    schema_provenance: dict = field(default_factory=dict)
    entries: list[LedgerEntry] = field(default_factory=list)

    @property
    def spent_epsilon(self) -> float:
        return float(sum(e.epsilon for e in self.entries))

    @property
    def spent_delta(self) -> float:
        return float(sum(e.delta for e in self.entries))

    @property
    def remaining_epsilon(self) -> float:
        return self.target_epsilon - self.spent_epsilon

    def record(self, mechanism: str, epsilon: float, delta: float = 0.0, accountant: str | None = None,
               **details) -> LedgerEntry:
        entry = LedgerEntry(mechanism=mechanism, epsilon=float(epsilon), delta=float(delta),
                            accountant=accountant, details=details)
        self.entries.append(entry)
        return entry

    def warnings(self) -> list[str]:
        out = []
        if self.schema_provenance.get("warning"):
            out.append(self.schema_provenance["warning"])
        w = delta_warning(self.target_delta, self.n_rows)
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
            "spent_epsilon": self.spent_epsilon,
            "spent_delta": self.spent_delta,
            "composition": "basic (sum of entries)",
            "schema_provenance": self.schema_provenance,
            "warnings": self.warnings(),
            "entries": [asdict(e) for e in self.entries],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "PrivacyLedger":
        ledger = cls(target_epsilon=data["target_epsilon"], target_delta=data["target_delta"],
                     n_rows=data["n_rows"], schema_provenance=data.get("schema_provenance", {}))
        ledger.entries = [LedgerEntry(**e) for e in data.get("entries", [])]
        return ledger
