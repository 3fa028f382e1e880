"""A privacy budget per table, across all its runs (as OpenDP's DP Creator and Tumult keep a dataset's budget).

The steward sets the total ε a table may spend. Every run on it draws from that total: a run reserves its
whole ε before it starts (refused if the table's remaining ε is smaller) and settles, when it ends however it
ends, at what its ledger says it spent. A run that never settles (its process was killed) keeps its whole
reservation, an upper bound. Spending composes by basic composition (sums of ε and δ).

A table is recognised by a fingerprint of its contents (rows in any order, columns in any order), kept in the
workbench home beside the runs and never in an export. The book is one JSON file, written atomically under a
file lock, so the app, the CLI and background workers can share it.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..files import write_atomic
from .budget import BudgetError, check_budget


def fingerprint(table: pd.DataFrame) -> str:
    """A fingerprint of a table's contents, the same for its rows or columns in another order."""
    ordered = table.copy()
    ordered.columns = [str(c) for c in ordered.columns]
    ordered = ordered[sorted(ordered.columns)]
    rows = np.sort(pd.util.hash_pandas_object(ordered.astype("string"), index=False).to_numpy())
    h = hashlib.sha256("\x1f".join(ordered.columns).encode())
    h.update(rows.tobytes())
    return h.hexdigest()[:32]


def check_within(epsilon: float, total: float, spent: float) -> None:
    """BudgetError unless a run's ε fits in what a table's total leaves after what its runs spent."""
    remaining = max(0.0, total - spent)
    if epsilon > remaining * (1 + 1e-9):
        raise BudgetError(f"this run's ε = {epsilon:g} would exceed the table's budget: {spent:.4g} of {total:g} is "
                          f"spent by earlier runs, {remaining:.4g} remains. Lower ε, or raise the table's total if "
                          "you accept the larger risk")


@dataclass
class TableAccount:
    """One table's budget: the total the steward set, and what each run reserved or spent."""

    total_epsilon: float
    charges: dict  # run -> {"epsilon", "delta", "settled", "time"}
    label: str = ""

    @property
    def spent_epsilon(self) -> float:
        return float(sum(c["epsilon"] for c in self.charges.values()))

    @property
    def spent_delta(self) -> float:
        return float(sum(c.get("delta", 0.0) for c in self.charges.values()))

    @property
    def remaining_epsilon(self) -> float:
        return max(0.0, self.total_epsilon - self.spent_epsilon)


class TableBudgets:
    """The book of every table's budget, in one file (the workbench home's budgets.json)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    # --- the file, read and written under a lock ----------------------------------------------------
    @contextmanager
    def _locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(f".{self.path.name}.lock"), os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, json.JSONDecodeError) as e:
            raise BudgetError(f"the table budgets in {self.path} cannot be read ({e}); repair or remove the file") \
                from None

    def _write(self, data: dict) -> None:
        write_atomic(self.path, json.dumps(data, indent=2), private=True)

    # --- reading ------------------------------------------------------------------------------------
    def account(self, table_id: str) -> TableAccount | None:
        entry = self._read().get(table_id)
        if entry is None:
            return None
        return TableAccount(total_epsilon=float(entry["total_epsilon"]), charges=dict(entry.get("charges", {})),
                            label=entry.get("label", ""))

    def table_of(self, run: str) -> str | None:
        """The table a run drew from (None if it drew from no table's budget)."""
        return next((tid for tid, entry in self._read().items() if str(run) in entry.get("charges", {})), None)

    # --- the steward ----------------------------------------------------------------------------------
    def set_total(self, table_id: str, epsilon: float, label: str = "") -> TableAccount:
        """Set (or raise, or lower) the total ε a table may spend across its runs."""
        check_budget(epsilon, 0.5)
        with self._locked():
            data = self._read()
            entry = data.setdefault(table_id, {"charges": {}})
            entry["total_epsilon"] = float(epsilon)
            if label:
                entry["label"] = label
            self._write(data)
        return self.account(table_id)

    # --- runs -------------------------------------------------------------------------------------------
    def reserve(self, table_id: str, run: str, epsilon: float, delta: float = 0.0) -> TableAccount:
        """Reserve a run's whole budget; BudgetError if the table's remaining ε is smaller."""
        with self._locked():
            data = self._read()
            entry = data.get(table_id)
            if entry is None:
                raise BudgetError("this table has no total privacy budget yet: set one before its first run")
            account = TableAccount(float(entry["total_epsilon"]), dict(entry.get("charges", {})))
            account.charges.pop(str(run), None)
            check_within(epsilon, account.total_epsilon, account.spent_epsilon)
            entry.setdefault("charges", {})[str(run)] = {"epsilon": float(epsilon), "delta": float(delta),
                                                         "settled": False, "time": time.time()}
            self._write(data)
        return self.account(table_id)

    def settle(self, table_id: str, run: str, epsilon: float, delta: float) -> None:
        """A run ended: charge what its ledger says it spent instead of its reservation."""
        with self._locked():
            data = self._read()
            entry = data.get(table_id)
            if entry is None:
                return
            entry.setdefault("charges", {})[str(run)] = {"epsilon": float(epsilon), "delta": float(delta),
                                                         "settled": True, "time": time.time()}
            self._write(data)


@dataclass
class TableCharge:
    """What a run draws from its table's budget: reserved before it starts, settled when it ends."""

    book: TableBudgets
    table_id: str
    run: str

    def reserve(self, epsilon: float, delta: float = 0.0) -> TableAccount:
        return self.book.reserve(self.table_id, self.run, epsilon, delta)

    def settle(self, ledger) -> None:
        self.book.settle(self.table_id, self.run, ledger.spent_epsilon, ledger.spent_delta)
