"""A privacy budget per table, across all its runs (as OpenDP's DP Creator and Tumult keep a dataset's budget).

The steward sets the total ε a table may spend. Every run on it draws from that total: a run reserves its
whole ε before it starts (refused if the table's remaining ε is smaller) and settles, when it ends however it
ends, at what its ledger says it spent. A run that never settles (its process was killed) keeps its whole
reservation, an upper bound. Spending composes by basic composition (sums of ε and δ).

Each reservation is a charge of its own, under a fresh random key, never under a path: a run refused or failed
into a folder that already holds a run, an `--overwrite`, a retry after a crash, each adds a charge and none
replaces or lowers another's. The run folder keeps its charge's key (runs.rundir), so a run that died is
settled later from its own ledger.

A table is recognised by a keyed fingerprint of its contents (HMAC-SHA256 of its rows in any order and columns
in any order, under a secret kept beside the book, owner-only): a fingerprint stored in a run folder that is
shared cannot be used to test a guess of a row. The book is one JSON file, validated on every read and written
atomically under a file lock, so the app, the CLI and background workers can share it; a book that is not what
this module writes is refused, never reset.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..files import locked, write_atomic
from ..format import epsilon as amount
from .budget import BudgetError, check_budget
from ..schema.linked import LinkedTables


def _canonical_rows(table: pd.DataFrame) -> tuple[list[str], bytes]:
    """The table's column names (sorted) and its rows' hashes (sorted): the same for any row or column order."""
    ordered = table.copy()
    ordered.columns = [str(c) for c in ordered.columns]
    ordered = ordered[sorted(ordered.columns)]
    rows = np.sort(pd.util.hash_pandas_object(ordered.astype("string"), index=False).to_numpy())
    return list(ordered.columns), rows.tobytes()


def legacy_fingerprint(table: pd.DataFrame) -> str:
    """The unkeyed fingerprint books written before the keyed one used (read once, to carry them over)."""
    columns, rows = _canonical_rows(table)
    h = hashlib.sha256("\x1f".join(columns).encode())
    h.update(rows)
    return h.hexdigest()[:32]


def fingerprint(table: pd.DataFrame, key: bytes) -> str:
    """A keyed fingerprint of a table's contents (HMAC-SHA256), the same for its rows or columns in another order.
    Without `key`, nobody can tell which table a fingerprint belongs to, nor test a candidate row against it."""
    columns, rows = _canonical_rows(table)
    h = hmac.new(key, "\x1f".join(columns).encode(), hashlib.sha256)
    h.update(rows)
    return h.hexdigest()[:32]


def remaining(total: float, spent: float) -> float:
    """What a table's total leaves after what its runs spent."""
    return max(0.0, total - spent)


def spends_the_rest(epsilon: float, total: float, spent: float) -> bool:
    """Whether a run of ε fits in what is left of a table's total but leaves nothing of use (under 1% of the
    total, or 0.01) for another run."""
    left = remaining(total, spent)
    return 0 <= left * (1 + 1e-9) - epsilon < max(0.01, 0.01 * total)


def check_within(epsilon: float, total: float, spent: float) -> None:
    """BudgetError unless a run's ε fits in what a table's total leaves after what its runs spent."""
    remaining_ = remaining(total, spent)
    if epsilon > remaining_ * (1 + 1e-9):
        raise BudgetError(f"this run's ε = {amount(epsilon)} would exceed the table's budget: {amount(spent)} of "
                          f"{amount(total)} is spent by earlier runs, {amount(remaining_)} remains. Lower ε, or raise "
                          "the table's total if you accept the larger risk (on the model page, or `fit "
                          "--table-epsilon TOTAL`)")


@dataclass(frozen=True)
class Release:
    """One release a steward plans on a table: its name and the ε it may spend."""

    name: str
    epsilon: float


def check_plan(releases: list) -> list[Release]:
    """A plan of releases checked: each named once, each ε above 0 (BudgetError naming the first that is not)."""
    out, seen = [], set()
    for i, release in enumerate(releases, 1):
        name = str(release.name if isinstance(release, Release) else release.get("name", "")).strip()
        eps = release.epsilon if isinstance(release, Release) else release.get("epsilon")
        if not name:
            raise BudgetError(f"release {i} needs a name (a quick look, the release, a refresh…)")
        if name in seen:
            raise BudgetError(f"the plan names {name!r} twice")
        seen.add(name)
        try:
            check_budget(float(eps), 0.5)
        except (TypeError, ValueError) as e:
            raise BudgetError(f"release {name!r}: {e}") from None
        out.append(Release(name, float(eps)))
    if not out:
        raise BudgetError("a plan holds at least one release")
    return out


def plan_total(releases: list[Release]) -> float:
    """The table's total a plan needs: its releases' ε added up (the runs on one table compose)."""
    return float(sum(r.epsilon for r in releases))


def left_after(releases: list[Release]) -> list[float]:
    """What the table's total (the plan's) leaves after each release in turn."""
    total, out, used = plan_total(releases), [], 0.0
    for release in releases:
        used += release.epsilon
        out.append(remaining(total, used))
    return out


@dataclass
class TableAccount:
    """One table's budget: the total the steward set, what each run reserved or spent, and the releases the
    steward planned (their ε adds up to the total they set with them)."""

    total_epsilon: float
    charges: dict  # charge key -> {"epsilon", "delta", "settled", "time", "run"}
    label: str = ""
    plan: list = field(default_factory=list)  # [Release]

    @property
    def spent_epsilon(self) -> float:
        return float(sum(c["epsilon"] for c in self.charges.values()))

    @property
    def spent_delta(self) -> float:
        return float(sum(c.get("delta", 0.0) for c in self.charges.values()))

    @property
    def remaining_epsilon(self) -> float:
        return max(0.0, self.total_epsilon - self.spent_epsilon)


class BookError(BudgetError):
    """The book of table budgets (or its key) is not what this module writes: refused, never reset."""


def _number(value, what: str, where: str, upper: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= upper:
        bound = f" and at most {upper:g}" if math.isfinite(upper) else ""
        raise ValueError(f"{where}: {what} must be a finite number ≥ 0{bound}, not {value!r}")
    return float(value)


def _object(value, where: str, fields: set, required: str) -> dict:
    """`value` as an object with only `fields`, `required` among them; ValueError naming `where` otherwise."""
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be an object, not {value!r}")
    unknown = set(value) - fields
    if unknown:
        raise ValueError(f"{where} has unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    if required not in value:
        raise ValueError(f"{where} has no {required}")
    return value


def _check_book(data) -> dict:
    """The book's content as this module writes it; ValueError naming the first entry that is not."""
    if not isinstance(data, dict):
        raise ValueError(f"the book must be a JSON object of tables, not a {type(data).__name__}")
    for table_id, entry in data.items():
        where = f"table {table_id}"
        _object(entry, where, {"total_epsilon", "charges", "label", "plan"}, "total_epsilon")
        if entry.get("plan"):
            check_plan(entry["plan"])
        _number(entry["total_epsilon"], "total_epsilon", where)
        if not isinstance(entry.get("label", ""), str):
            raise ValueError(f"{where}: label must be text")
        charges = entry.get("charges", {})
        if not isinstance(charges, dict):
            raise ValueError(f"{where}: charges must be an object of runs, not {charges!r}")
        for key, charge in charges.items():
            at = f"{where}, charge {key}"
            _object(charge, at, {"epsilon", "delta", "settled", "time", "run"}, "epsilon")
            _number(charge["epsilon"], "epsilon", at)
            _number(charge.get("delta", 0.0), "delta", at, upper=1.0)
            _number(charge.get("time", 0.0), "time", at)
            if not isinstance(charge.get("settled", False), bool):
                raise ValueError(f"{at}: settled must be true or false, not {charge['settled']!r}")
            if not isinstance(charge.get("run", ""), str):
                raise ValueError(f"{at}: run must be text")
    return data


class TableBudgets:
    """The book of every table's budget, in one file (the workbench home's budgets.json), and the key of its
    tables' fingerprints beside it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    @property
    def key_path(self) -> Path:
        return self.path.with_name(f".{self.path.stem}.key")

    # --- the file, read and written under a lock ----------------------------------------------------
    def _locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return locked(self.path.with_name(f".{self.path.name}.lock"))

    def _refuse(self, why: str) -> BookError:
        return BookError(f"the table budgets in {self.path} cannot be trusted ({why}); restore the file from a "
                         "backup or repair that entry by hand. It was left as it is: every table's spending is in it")

    def _read(self) -> dict:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as e:
            raise self._refuse(f"unreadable: {e}") from None
        try:
            data = json.loads(text, parse_constant=lambda c: float(c))  # Infinity / NaN, refused below
        except json.JSONDecodeError as e:
            raise self._refuse(f"not valid JSON: {e}") from None
        try:
            return _check_book(data)
        except ValueError as e:
            raise self._refuse(str(e)) from None

    def _write(self, data: dict) -> None:
        write_atomic(self.path, json.dumps(_check_book(data), indent=2, allow_nan=False), private=True)

    # --- which table ----------------------------------------------------------------------------------
    def _key(self) -> bytes:
        """The book's secret key for fingerprints (created once, owner-only)."""
        try:
            text = self.key_path.read_text().strip()
        except FileNotFoundError:
            with self._locked():
                if not self.key_path.exists():
                    write_atomic(self.key_path, secrets.token_hex(32), private=True)
            text = self.key_path.read_text().strip()
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = b""
        if len(key) < 16:
            raise BookError(f"{self.key_path} is not a key this workbench wrote; restore it from a backup (without it "
                            "no table is recognised, and each would start a new budget)")
        return key

    def table_id(self, table: pd.DataFrame | LinkedTables) -> str:
        """The keyed fingerprint under which `table`'s budget is kept (linked tables: both together, one budget
        for the persons). A book written before fingerprints were keyed has the table's entry under its old
        fingerprint: it is carried over to the new one, once."""
        if isinstance(table, LinkedTables):
            table = table.as_one()
        table_id = fingerprint(table, self._key())
        if self.path.exists():
            with self._locked():
                data = self._read()
                old = legacy_fingerprint(table)
                if table_id not in data and old in data:
                    data[table_id] = data.pop(old)
                    self._write(data)
        return table_id

    # --- reading ------------------------------------------------------------------------------------
    def account(self, table_id: str) -> TableAccount | None:
        entry = self._read().get(table_id)
        if entry is None:
            return None
        return TableAccount(total_epsilon=float(entry["total_epsilon"]), charges=dict(entry.get("charges", {})),
                            label=entry.get("label", ""), plan=check_plan(entry["plan"]) if entry.get("plan") else [])

    def table_of(self, charge: str) -> str | None:
        """The table a charge (a key, or for a charge made before keys, a run's resolved path) drew from."""
        return next((tid for tid, entry in self._read().items() if str(charge) in entry.get("charges", {})), None)

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

    def set_plan(self, table_id: str, releases: list, label: str = "") -> TableAccount:
        """Plan a table's releases, those already made included: the table's total becomes their ε added up (so
        the book refuses a run beyond the plan; setting the same plan again changes nothing), and the plan is
        kept for the steward to follow. BudgetError for a plan below what the table's runs spent already."""
        releases = check_plan(releases)
        with self._locked():
            data = self._read()
            entry = data.setdefault(table_id, {"charges": {}})
            spent = float(sum(c["epsilon"] for c in entry.get("charges", {}).values()))
            if spent > plan_total(releases) * (1 + 1e-9):
                raise BudgetError(f"this table's runs have spent ε = {amount(spent)} already, more than the plan's "
                                  f"{amount(plan_total(releases))}: list the releases made so far in the plan too")
            entry["total_epsilon"] = plan_total(releases)
            entry["plan"] = [{"name": r.name, "epsilon": r.epsilon} for r in releases]
            if label:
                entry["label"] = label
            self._write(data)
        return self.account(table_id)

    def open_account(self, table_id: str, total: float | None, epsilon: float, label: str = "") -> TableAccount:
        """The account a run draws from: its total set to `total` when given, and for a table the book has
        never seen, to the run's own ε when not (the one rule for a first run; a page asks the steward)."""
        if total is not None:
            return self.set_total(table_id, total, label)
        account = self.account(table_id)
        return account if account is not None else self.set_total(table_id, epsilon, label)

    # --- runs -------------------------------------------------------------------------------------------
    def reserve(self, table_id: str, key: str, epsilon: float, delta: float = 0.0, run: str = "") -> TableAccount:
        """Reserve a run's whole budget under a new charge `key`; BudgetError if the table's remaining ε is
        smaller, or if the key already names a charge (a charge is never replaced)."""
        with self._locked():
            data = self._read()
            entry = data.get(table_id)
            if entry is None:
                raise BudgetError("this table has no total privacy budget yet: set one before its first run")
            account = TableAccount(float(entry["total_epsilon"]), dict(entry.get("charges", {})))
            if str(key) in account.charges:
                raise BudgetError(f"the charge {key} is already in the book: a charge is never replaced")
            check_within(epsilon, account.total_epsilon, account.spent_epsilon)
            entry.setdefault("charges", {})[str(key)] = {"epsilon": float(epsilon), "delta": float(delta),
                                                         "settled": False, "time": time.time(), "run": str(run)}
            self._write(data)
        return self.account(table_id)

    def settle(self, table_id: str, key: str, epsilon: float, delta: float) -> None:
        """A run ended: charge what its ledger says it spent instead of its reservation. A run that spent
        nothing (refused before any mechanism ran) leaves no charge."""
        with self._locked():
            data = self._read()
            entry = data.get(table_id)
            if entry is None:
                return
            charges = entry.setdefault("charges", {})
            old = charges.get(str(key), {})
            if epsilon <= 0 and delta <= 0:
                charges.pop(str(key), None)
            else:
                charges[str(key)] = {"epsilon": float(epsilon), "delta": float(delta), "settled": True,
                                     "time": time.time(), "run": old.get("run", "")}
            self._write(data)


@dataclass
class TableCharge:
    """What one run draws from its table's budget: reserved before it starts (under a key of its own), settled
    when it ends from its ledger."""

    book: TableBudgets
    table_id: str
    key: str = field(default_factory=lambda: secrets.token_hex(8))
    reserved: bool = False

    def reserve(self, epsilon: float, delta: float = 0.0, run: str = "") -> TableAccount:
        account = self.book.reserve(self.table_id, self.key, epsilon, delta, run)
        self.reserved = True
        return account

    def settle(self, ledger) -> None:
        if self.reserved:
            self.book.settle(self.table_id, self.key, ledger.spent_epsilon, ledger.spent_delta)

    def account(self) -> TableAccount | None:
        return self.book.account(self.table_id)

    def to_dict(self) -> dict:
        """What a run folder keeps of its charge, to be settled from its ledger if its process dies."""
        return {"book": str(self.book.path), "table": self.table_id, "key": self.key}

    @classmethod
    def from_dict(cls, data: dict) -> "TableCharge":
        return cls(TableBudgets(data["book"]), str(data["table"]), str(data["key"]), reserved=True)
