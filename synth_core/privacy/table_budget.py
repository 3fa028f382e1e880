"""A privacy budget per table, across all its runs (as OpenDP's DP Creator and Tumult keep a
dataset's budget).

The steward sets the total ε a table may spend. Every run on it draws from that total: a run
reserves its whole ε before it starts (refused if the table's remaining ε is smaller) and settles,
when it ends however it ends, at what its ledger says it spent. A run that never settles (its
process was killed) keeps its whole reservation, an upper bound. Spending composes by basic
composition (sums of ε and δ).

Each reservation is a charge of its own, under a fresh random key kept in the book alone: a run
refused or failed into a folder that already holds a run, an `--overwrite`, a retry after a crash,
each adds a charge and none replaces or lowers another's. A charge belongs to its run: the book
records the run's folder (its path and the folder itself), and the folder keeps only the run's id. A
run that died is settled later from its own ledger, but only by the folder the charge was made for:
a copy, a move or an edited file settles nothing, and a settled charge is never lowered again.

A table is recognised by a keyed fingerprint of its validated rows in canonical form
(privacy.table_identity): a re-export, an extra column the schema ignores, rows or columns in
another order are the same table, and one that shares most of its rows with a known table is asked
about before a new budget opens. The book is in the workbench home only (privacy.book_file:
validated on every read, every change journaled, written atomically under a file lock, so the app,
the CLI and background workers can share it); a book that is not what the workbench writes, or that
lost its key, is refused, never reset.
"""
from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..encoding.engine import Counting
from ..format import epsilon as amount
from ..schema.batches import TableFile
from . import table_identity as identity
from .book_file import BookError, BookFile
from .budget import BudgetError, check_budget
from .release_plan import Release, check_plan, check_within, left_after, plan_total, remaining, \
    spends_the_rest  # noqa: F401 - what a table's budget is read with, here for its callers
from ..schema.linked import LinkedSchema, LinkedTables

__all__ = ["BookError", "BudgetError", "TableBudgets", "TableCharge", "TableAccount", "TableIdentity",
           "SameTable", "NotThisRun", "Release", "check_plan", "check_within", "left_after", "plan_total",
           "remaining", "spends_the_rest"]


@dataclass
class TableAccount:
    """One table's budget: the total the steward set, what each run reserved or spent, and the
    releases the steward planned (their ε adds up to the total they set with them)."""

    total_epsilon: float
    # charge key -> {"epsilon", "delta", "settled", "time", "run", "run_id", "folder"}
    charges: dict
    label: str = ""
    plan: list = field(default_factory=list)  # [Release]
    # other files' fingerprints the steward said are this table
    aliases: list = field(default_factory=list)

    @property
    def spent_epsilon(self) -> float:
        return float(sum(c["epsilon"] for c in self.charges.values()))

    @property
    def spent_delta(self) -> float:
        return float(sum(c.get("delta", 0.0) for c in self.charges.values()))

    @property
    def remaining_epsilon(self) -> float:
        return max(0.0, self.total_epsilon - self.spent_epsilon)


@dataclass(frozen=True)
class Resemblance:
    """A known table that a new file shares most of its rows with."""
    table_id: str
    name: str           # its label, or its id's start
    share: float        # the estimated share of rows in common
    spent: float
    total: float


@dataclass(frozen=True)
class TableIdentity:
    """Which table a file holds: its fingerprint, the account the book keeps for it (None: a table
    the book has never seen), and the known tables it resembles (asked about before a new budget
    opens)."""
    fingerprint: str
    account: str | None
    resembles: tuple = ()
    sketch: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def table_id(self) -> str:
        return self.account or self.fingerprint


class SameTable(BudgetError):
    """A new file shares most of its rows with a table the book knows: the steward says whether it
    is that table (its budget) or another (a budget of its own) before anything is reserved."""

    def __init__(self, identity: TableIdentity):
        self.identity = identity
        best = identity.resembles[0]
        super().__init__(f"this table shares about {best.share:.0%} of its rows with the table {best.name!r} in "
                         f"the budget book (ε {amount(best.spent)} of {amount(best.total)} spent): if it is "
                         f"that table (another export of it), count this run on its budget (--table "
                         f"{best.name}); if it is another table, open a budget of its own (--new-table)")


class NotThisRun(BudgetError):
    """A run folder whose charge was made for another folder (a copy, a move, an edited file)."""


def _parts(table, schema) -> tuple[list, tuple]:
    """What a table's identity is computed over: (tag, rows, columns) for each part, and the missing
    markers."""
    if isinstance(table, LinkedTables):
        if isinstance(schema, LinkedSchema):
            return ([("parents", table.parents, [*schema.parent.names, schema.key]),
                     ("children", table.children, [*schema.child.names, schema.key])],
                    tuple(schema.parent.missing_markers) + tuple(schema.child.missing_markers))
        return [("parents", table.parents, list(table.parents.columns)),
                ("children", table.children, list(table.children.columns))], ()
    if schema is None or isinstance(schema, LinkedSchema):
        return [("table", table, list(table.columns))], ()
    return [("table", table, list(schema.names))], tuple(schema.missing_markers)


def _streamed(table: Counting | TableFile, schema, key: bytes) -> identity.Streamed:
    """The identity of a table an engine holds (or of its file, `TableFile`): from the file read
    a batch at a time (`identity.of_file`: once per process while the file is unchanged), or
    where the rows live (a cluster's, `identity.in_place`)."""
    if table.path is not None:
        return identity.of_file(table.path, schema, key, table.batch_rows)
    found = identity.in_place(table, list(schema.names), key, tuple(schema.missing_markers))
    if found is None:
        raise BudgetError("the table was given as rows with no file the budget book can read: "
                          "declare it public or fit it from its file")
    return found


def identity_key(table, schema) -> tuple:
    """What a table's identity depends on besides its rows (the parts' columns, the missing
    markers): a cache key for a page that identifies the same table again and again."""
    parts, markers = _parts(table, schema)
    return tuple((tag, tuple(map(str, columns))) for tag, _, columns in parts), markers


def _is_its(record: dict, key: str, charge: dict) -> bool:
    """Whether a book's charge is the one a run folder's record names: by its run id (a run made
    before: by the charge's key)."""
    if record.get("run_id"):
        return charge.get("run_id") == record["run_id"]
    return key == record.get("key")


def folder_identity(path: str | Path) -> str:
    """The run folder itself (device and inode): a copy, or a folder put in its place, is
    another."""
    st = os.stat(path)
    return f"{st.st_dev}:{st.st_ino}"


class TableBudgets:
    """The book of every table's budget (the workbench home's budgets.json, privacy.book_file)."""

    def __init__(self, path: str | Path):
        self.file = BookFile(path, check_plan)
        self.path = self.file.path

    @property
    def key_path(self) -> Path:
        return self.file.key_path

    def _read(self) -> dict:
        return self.file.read()["tables"]

    def check(self) -> None:
        """BookError in one line where the book cannot be trusted (not what the workbench writes,
        its key or its content lost while runs charged it)."""
        self._read()

    def _change(self, *changes: dict) -> None:
        """Apply changes to the book under its lock (each journaled first)."""
        with self.file.locked():
            self.file.commit(self.file.read(), list(changes))

    # --- which table ----------------------------------------------------------------------------------
    def identify(self, table: pd.DataFrame | LinkedTables, schema=None) -> TableIdentity:
        """Which table `table` is: its canonical fingerprint (over the schema's columns when given),
        the account the book keeps for it (under that fingerprint, or as a file the steward
        attached), and the known tables it resembles. An account kept under the fingerprint of an
        older form is carried over."""
        key = self.file.ensure_key()
        if isinstance(table, (Counting, TableFile)):  # too large to hold: a batch at a time
            found = _streamed(table, schema, key)
            mine, sketch = found.fingerprint, found.sketch
            olds = lambda: (o for o in (found.v1, found.legacy) if o)  # noqa: E731
        else:
            parts, markers = _parts(table, schema)
            hashes = identity.row_hashes(parts, key, markers)
            mine, sketch = identity.fingerprint(hashes, key), identity.sketch(hashes)
            whole = table.as_one() if isinstance(table, LinkedTables) else table
            olds = lambda: (identity.fingerprint_v1(whole, key),  # noqa: E731
                            identity.legacy_fingerprint(whole))
        tables = self._read()
        account = self._account_of(tables, mine)
        if account is None:
            account = self._carry_over(tables, olds, mine, sketch)
        resembles = () if account is not None else self._resembling(tables, sketch)
        return TableIdentity(mine, account, resembles, sketch)

    @staticmethod
    def _account_of(tables: dict, fingerprint: str) -> str | None:
        if fingerprint in tables:
            return fingerprint
        return next((tid for tid, entry in tables.items() if fingerprint in entry.get("aliases", [])), None)

    def _carry_over(self, tables: dict, olds, mine: str, sketch: dict) -> str | None:
        """An account a book kept under the table as uploaded (version 1: `olds()`, its
        fingerprints in the older forms) moves to the canonical id."""
        for old in olds():
            if old in tables:
                self._change({"change": "rename", "table": old, "to": mine})
                self._keep_sketch(mine, mine, sketch)
                return mine
        return None

    def _resembling(self, tables: dict, sketch: dict) -> tuple:
        """The known tables this sketch shares at least RESEMBLES of its rows with, the closest
        first."""
        best: dict[str, float] = {}
        for entry in self._sketches().values():
            account = entry.get("account") if isinstance(entry, dict) else None
            if account in tables:
                share = identity.resemblance(sketch, entry.get("sketch", {}))
                best[account] = max(best.get(account, 0.0), share)
        out = []
        for account, share in sorted(best.items(), key=lambda kv: -kv[1]):
            if share >= identity.RESEMBLES:
                a = self.account(account)
                out.append(Resemblance(account, a.label or account[:8], share, a.spent_epsilon, a.total_epsilon))
        return tuple(out)

    def _sketches(self) -> dict:
        return self.file.sketches()

    def _keep_sketch(self, fingerprint: str, account: str, sketch: dict) -> None:
        self.file.keep_sketch(fingerprint, account, sketch)

    def table_id(self, table: pd.DataFrame | LinkedTables, schema=None) -> str:
        """The id under which `table`'s budget is kept (linked tables: both together, one budget for
        the persons): its account's, or its own fingerprint for a table the book has never seen."""
        return self.identify(table, schema).table_id

    def ids(self, table_id: str) -> set[str]:
        """Every id a table's runs may carry: its own and the files attached to it."""
        entry = self._read().get(table_id) or {}
        return {table_id, *entry.get("aliases", [])}

    def named(self, name: str) -> str | None:
        """The table the steward named `name` (its label; for a table without one, the start of its
        id of 8 characters or more, as the book shows it), None if none is."""
        name, tables = str(name).strip(), self._read()
        labelled = next((tid for tid, e in tables.items() if name and e.get("label", "") == name), None)
        if labelled is not None or len(name) < 8:
            return labelled
        unnamed = [tid for tid, e in tables.items() if not e.get("label") and tid.startswith(name)]
        return unnamed[0] if len(unnamed) == 1 else None

    # --- reading ------------------------------------------------------------------------------------
    def account(self, table_id: str) -> TableAccount | None:
        entry = self._read().get(table_id)
        if entry is None:
            return None
        return TableAccount(total_epsilon=float(entry["total_epsilon"]), charges=dict(entry.get("charges", {})),
                            label=entry.get("label", ""), aliases=list(entry.get("aliases", [])),
                            plan=check_plan(entry["plan"]) if entry.get("plan") else [])

    def accounts(self) -> dict[str, TableAccount]:
        return {tid: self.account(tid) for tid in self._read()}

    def table_of(self, charge: str) -> str | None:
        """The table a charge (its key in the book) drew from."""
        return next((tid for tid, entry in self._read().items() if str(charge) in entry.get("charges", {})), None)

    def table_of_run(self, record: dict | None) -> str | None:
        """The table a run folder's charge (what the folder keeps of it) drew from, for showing it;
        a copy's is its original's."""
        if not record:
            return None
        for table_id, entry in self._read().items():
            if any(_is_its(record, key, charge) for key, charge in entry.get("charges", {}).items()):
                return table_id
        return None

    def journal(self) -> list[dict]:
        return self.file.journal()

    def rebuild(self) -> dict:
        """The book made again from its journal (runs --rebuild-book)."""
        return self.file.rebuild()

    # --- the steward ----------------------------------------------------------------------------------
    def set_total(self, table_id: str, epsilon: float, label: str = "") -> TableAccount:
        """Set (or raise, or lower) the total ε a table may spend across its runs."""
        check_budget(epsilon, 0.5)
        changes = [{"change": "total", "table": table_id, "epsilon": float(epsilon)}]
        self._change(*changes, *([{"change": "label", "table": table_id, "label": label}] if label else []))
        return self.account(table_id)

    def set_plan(self, table_id: str, releases: list, label: str = "") -> TableAccount:
        """Plan a table's releases, those already made included: the table's total becomes their ε
        added up (so the book refuses a run beyond the plan; setting the same plan again changes
        nothing), and the plan is kept for the steward to follow. BudgetError for a plan below what
        the table's runs spent already."""
        releases = check_plan(releases)
        with self.file.locked():
            book = self.file.read()
            entry = book["tables"].get(table_id, {})
            spent = float(sum(c["epsilon"] for c in entry.get("charges", {}).values()))
            if spent > plan_total(releases) * (1 + 1e-9):
                raise BudgetError(f"this table's runs have spent ε = {amount(spent)} already, more than the plan's "
                                  f"{amount(plan_total(releases))}: list the releases made so far in the plan too")
            changes = [{"change": "plan", "table": table_id, "epsilon": plan_total(releases),
                        "releases": [{"name": r.name, "epsilon": r.epsilon} for r in releases]}]
            if label:
                changes.append({"change": "label", "table": table_id, "label": label})
            self.file.commit(book, changes)
        return self.account(table_id)

    def name(self, table_id: str, name: str) -> None:
        """The steward names a table (its label), unique in the book."""
        name = str(name).strip()
        if not name or len(name) > 100 or any(ord(ch) < 32 for ch in name):
            raise BudgetError("a table's name is 1 to 100 characters on one line")
        other = self.named(name)
        if other not in (None, table_id):
            raise BudgetError(f"another table in the budget book is named {name!r}: choose another name")
        self._change({"change": "label", "table": table_id, "label": name})

    def attach(self, found: TableIdentity, table_id: str) -> None:
        """The steward says this file is the table `table_id` (a new export of it): its runs count
        on that table's budget from now on."""
        if self.account(table_id) is None:
            raise BudgetError(f"the budget book has no table {table_id}")
        if found.account not in (None, table_id):
            raise BudgetError("this file is already another table in the budget book")
        if found.account is None:
            self._change({"change": "alias", "table": table_id, "alias": found.fingerprint})
            self._keep_sketch(found.fingerprint, table_id, found.sketch)

    def account_for(self, found: TableIdentity, epsilon: float, total: float | None = None,
                    name: str | None = None, new_table: bool = False, label: str | None = None) -> str:
        """The table a run on this file draws from, its account opened where it is new (the one rule
        for the API, the CLI, jobs and the app): the table the steward named (this file attached to
        it), else the one the book knows the file as; a new file that resembles a known table is
        asked about (SameTable) unless the steward said it is another table (new_table). label: what
        a new table is called in the book (the file's name) where no table is called so yet."""
        table_id = found.account
        if name:
            named = self.named(name)
            if named is not None and found.account not in (None, named):
                raise BudgetError(f"this file is another table in the budget book, not {name!r}")
            if named is not None:
                self.attach(found, named)
                table_id = named
        if table_id is None and found.resembles and not new_table and not name:
            raise SameTable(found)
        if table_id is None:
            table_id = found.fingerprint
        # what tells its next exports
        if found.sketch and found.fingerprint not in self._sketches():
            self._keep_sketch(found.fingerprint, table_id, found.sketch)
        is_new = self.account(table_id) is None
        self.open_account(table_id, total, epsilon)
        if name and self.named(name) is None:
            self.name(table_id, name)
        elif is_new and label and self.named(str(label)) is None:
            try:
                self.name(table_id, str(label))
            except BudgetError:
                pass  # a file's name that cannot be a table's: the table stays unnamed
        return table_id

    def open_account(self, table_id: str, total: float | None, epsilon: float, label: str = "") -> TableAccount:
        """The account a run draws from: its total set to `total` when given, and for a table the
        book has never seen, to the run's own ε when not (the one rule for a first run; a page asks
        the steward)."""
        if total is not None:
            return self.set_total(table_id, total, label)
        account = self.account(table_id)
        return account if account is not None else self.set_total(table_id, epsilon, label)

    # --- runs -------------------------------------------------------------------------------------------
    def reserve(self, table_id: str, key: str, epsilon: float, delta: float = 0.0, run: str = "",
                run_id: str = "") -> TableAccount:
        """Reserve a run's whole budget under a new charge `key`; BudgetError if the table's
        remaining ε is smaller, or if the key already names a charge (a charge is never
        replaced)."""
        with self.file.locked():
            book = self.file.read()
            entry = book["tables"].get(table_id)
            if entry is None:
                raise BudgetError("this table has no total privacy budget yet: set one before its first run")
            account = TableAccount(float(entry["total_epsilon"]), dict(entry.get("charges", {})))
            if str(key) in account.charges:
                raise BudgetError(f"the charge {key} is already in the book: a charge is never replaced")
            check_within(epsilon, account.total_epsilon, account.spent_epsilon)
            self.file.commit(book, [{"change": "reserve", "table": table_id, "charge": str(key),
                                     "epsilon": float(epsilon), "delta": float(delta), "time": time.time(),
                                     "run": str(run), "run_id": str(run_id)}])
        return self.account(table_id)

    def bind(self, table_id: str, key: str, folder: str | Path) -> None:
        """The charge belongs to the run folder at `folder` (its path, and the folder itself)."""
        path = Path(folder).resolve()
        self._change({"change": "bind", "table": table_id, "charge": str(key), "run": str(path),
                      "folder": folder_identity(path)})

    def settle(self, table_id: str, key: str, epsilon: float, delta: float) -> None:
        """A run ended: charge what its ledger says it spent instead of its reservation. A run that
        spent nothing (refused before any mechanism ran) leaves no charge. A settled charge is never
        lowered."""
        with self.file.locked():
            book = self.file.read()
            charge = book["tables"].get(table_id, {}).get("charges", {}).get(str(key))
            if charge is None:
                return
            if charge.get("settled"):
                epsilon, delta = max(epsilon, charge["epsilon"]), max(delta, charge.get("delta", 0.0))
            if epsilon <= 0 and delta <= 0:
                change = {"change": "release", "table": table_id, "charge": str(key)}
            else:
                change = {"change": "settle", "table": table_id, "charge": str(key), "epsilon": float(epsilon),
                          "delta": float(delta), "time": time.time()}
            self.file.commit(book, [change])

    def charge_of(self, folder: str | Path, record: dict) -> "TableCharge":
        """The charge a run folder draws (from what the folder keeps of it: its run id; for a run
        made before, the charge's key), found in this book and only if it was made for this very
        folder; NotThisRun for a copy, a move or an edited file, BookError when the book does not
        hold it."""
        path = Path(folder).resolve()
        table_id = self.table_of_run(record)
        found = None
        for key, charge in (self._read().get(table_id) or {}).get("charges", {}).items():
            if _is_its(record, key, charge):
                found = (table_id, key, charge)
        if found is None:
            raise NotThisRun(f"the budget book in {self.path.parent} holds no charge for the run at {path}: "
                             "its charge is in another workbench home's book, or it was settled and released")
        table_id, key, charge = found
        here = folder_identity(path)
        if charge.get("run") != str(path) or (charge.get("folder") and charge["folder"] != here):
            raise NotThisRun(f"the run folder {path} is a copy (or a move) of the run at {charge.get('run')}: "
                             "its charge on the table's budget is that run's, and is never settled from here")
        return TableCharge(self, table_id, key, reserved=True, run_id=charge.get("run_id", ""))


@dataclass
class TableCharge:
    """What one run draws from its table's budget: reserved before it starts (under a key the book
    alone keeps), bound to its run folder, settled when it ends from its ledger."""

    book: TableBudgets
    table_id: str
    key: str = field(default_factory=lambda: secrets.token_hex(16))
    reserved: bool = False
    run_id: str = field(default_factory=lambda: secrets.token_hex(8))

    def reserve(self, epsilon: float, delta: float = 0.0, run: str = "") -> TableAccount:
        account = self.book.reserve(self.table_id, self.key, epsilon, delta, run, self.run_id)
        self.reserved = True
        return account

    def bind(self, folder: str | Path) -> None:
        if self.reserved:
            self.book.bind(self.table_id, self.key, folder)

    def settle(self, ledger) -> None:
        if self.reserved:
            self.book.settle(self.table_id, self.key, ledger.spent_epsilon, ledger.spent_delta)

    def release(self) -> None:
        """Nothing ran: the reservation goes."""
        if self.reserved:
            self.book.settle(self.table_id, self.key, 0.0, 0.0)

    def account(self) -> TableAccount | None:
        return self.book.account(self.table_id)

    def to_dict(self) -> dict:
        """What a run folder keeps of its charge: the run's id, never the book's path nor the
        charge's key."""
        return {"run_id": self.run_id}
