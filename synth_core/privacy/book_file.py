"""The budget book on disk: budgets.json, its key, and the journal every change is written to first.

    budgets.json         {"version": 2, "key_check": …, "tables": {table id: account}} (owner-only)
    .budgets.key         the secret the tables' fingerprints are keyed with (owner-only)
    budgets.journal      one JSON line per change, appended before the book is rewritten: the steward reads
                         it back, and a book lost or emptied is rebuilt from it (`runs --rebuild-book`)
    .budgets.sketches    what tells a table that resembles a known one (privacy.table_identity)

Every change is a small dict applied by `apply`, the one place that changes the book's content,
whether it is made now or replayed from the journal. A book that is not what this module writes is
refused, never reset; so is a damaged one: a key deleted or replaced while the book holds tables, a
book deleted or emptied while its journal or the home's run folders say runs were charged.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import secrets
import stat
import time
from pathlib import Path

from ..files import locked, write_atomic
from .budget import BudgetError

VERSION = 2
CHARGE_FIELDS = {"epsilon", "delta", "settled", "time", "run", "run_id", "folder"}
TABLE_FIELDS = {"total_epsilon", "charges", "label", "plan", "aliases"}
MAX_BOOK_BYTES = 64 * 2 ** 20
# how many run folders under a folder hold a charge: runs.rundir says (it alone knows a run folder's
# files)
CHARGED_RUNS = lambda root: 0  # noqa: E731  # a book this workbench writes stays far below; a larger file is not one


class BookError(BudgetError):
    """The book of table budgets (or its key) is not what this module writes: refused, never
    reset."""


def _number(value, what: str, where: str, upper: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value <= upper:
        bound = f" and at most {upper:g}" if math.isfinite(upper) else ""
        raise ValueError(f"{where}: {what} must be a finite number ≥ 0{bound}, not {value!r}")
    return float(value)


def _object(value, where: str, fields: set, required: str) -> dict:
    """`value` as an object with only `fields`, `required` among them; ValueError naming `where`
    otherwise."""
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be an object, not {value!r}")
    unknown = set(value) - fields
    if unknown:
        raise ValueError(f"{where} has unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    if required not in value:
        raise ValueError(f"{where} has no {required}")
    return value


def _check_texts(entry: dict, names: tuple, where: str) -> None:
    for name in names:
        if not isinstance(entry.get(name, ""), str):
            raise ValueError(f"{where}: {name} must be text")


def check_tables(tables, check_plan) -> dict:
    """The tables' accounts as this module writes them; ValueError naming the first entry that is
    not."""
    if not isinstance(tables, dict):
        raise ValueError(f"the book must be a JSON object of tables, not a {type(tables).__name__}")
    for table_id, entry in tables.items():
        where = f"table {table_id}"
        _object(entry, where, TABLE_FIELDS, "total_epsilon")
        if entry.get("plan"):
            check_plan(entry["plan"])
        _number(entry["total_epsilon"], "total_epsilon", where)
        _check_texts(entry, ("label",), where)
        aliases = entry.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise ValueError(f"{where}: aliases must be a list of table ids")
        charges = entry.get("charges", {})
        if not isinstance(charges, dict):
            raise ValueError(f"{where}: charges must be an object of runs, not {charges!r}")
        for key, charge in charges.items():
            at = f"{where}, charge {key}"
            _object(charge, at, CHARGE_FIELDS, "epsilon")
            _number(charge["epsilon"], "epsilon", at)
            _number(charge.get("delta", 0.0), "delta", at, upper=1.0)
            _number(charge.get("time", 0.0), "time", at)
            if not isinstance(charge.get("settled", False), bool):
                raise ValueError(f"{at}: settled must be true or false, not {charge['settled']!r}")
            _check_texts(charge, ("run", "run_id", "folder"), at)
    return tables


def apply(tables: dict, change: dict) -> None:
    """One change to the tables' accounts (as written to the journal): the only code that changes
    them."""
    kind, table_id = change["change"], change.get("table")
    entry = tables.get(table_id)
    if kind in ("total", "plan", "label") and entry is None:
        entry = tables[table_id] = {"total_epsilon": 0.0, "charges": {}}
    if kind == "total":
        entry["total_epsilon"] = float(change["epsilon"])
    elif kind == "plan":
        entry["total_epsilon"] = float(change["epsilon"])
        entry["plan"] = list(change["releases"])
    elif kind == "label":
        entry["label"] = str(change["label"])
    elif entry is None:
        raise ValueError(f"a {kind} on table {table_id}, which the book does not hold")
    elif kind == "reserve":
        entry.setdefault("charges", {})[change["charge"]] = {
            "epsilon": float(change["epsilon"]), "delta": float(change["delta"]), "settled": False,
            "time": float(change["time"]), "run": change.get("run", ""), "run_id": change.get("run_id", "")}
    elif kind in ("bind", "settle", "release"):
        charges = entry.setdefault("charges", {})
        if kind == "release":
            charges.pop(change["charge"], None)
        elif kind == "bind":
            charges[change["charge"]].update(run=change["run"], folder=change["folder"])
        else:
            charges[change["charge"]].update(epsilon=float(change["epsilon"]), delta=float(change["delta"]),
                                             settled=True, time=float(change["time"]))
    elif kind == "alias":
        if change["alias"] not in entry.setdefault("aliases", []):
            entry["aliases"].append(change["alias"])
    elif kind == "rename":  # a table's id carried over from a fingerprint of an older form
        tables[change["to"]] = tables.pop(table_id)
        tables[change["to"]].setdefault("aliases", []).append(table_id)
    else:
        raise ValueError(f"an unknown change {kind!r}")


def _read_regular(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of a regular file; FileNotFoundError where there is none, OSError
    naming a path that is a device, a FIFO or a folder (never read: a device may be endless)."""
    st = os.stat(path)  # FileNotFoundError for none; a link is followed
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path} is not a regular file")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        return f.read(limit)


def _before_keys(book: dict) -> bool:
    """A book written before fingerprints were keyed (it never had a key): no key check, and every
    charge under its run's path (charges had keys of their own from the same change on)."""
    return not book["key_check"] and all("/" in key for entry in book["tables"].values()
                                         for key in entry.get("charges", {}))


class BookFile:
    """budgets.json, its key, journal and sketches, read and written under one lock."""

    def __init__(self, path: str | Path, check_plan=lambda plan: plan):
        self.path, self.check_plan = Path(path), check_plan

    def sibling(self, name: str) -> Path:
        return self.path.with_name(name.format(stem=self.path.stem))

    @property
    def key_path(self) -> Path:
        return self.sibling(".{stem}.key")

    @property
    def journal_path(self) -> Path:
        return self.sibling("{stem}.journal")

    @property
    def sketches_path(self) -> Path:
        return self.sibling(".{stem}.sketches")

    def locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return locked(self.path.with_name(f".{self.path.name}.lock"))

    def refuse(self, why: str, repair: str | None = None) -> BookError:
        return BookError(f"the table budgets in {self.path} cannot be trusted ({why}); "
                         + (repair or "restore the file from a backup or repair that entry by hand")
                         + ". It was left as it is: every table's spending is in it")

    # --- reading ------------------------------------------------------------------------------------
    def _parsed(self):
        """The book's JSON (None where there is no file), refused when it is not JSON."""
        try:
            raw = _read_regular(self.path, MAX_BOOK_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise self.refuse(f"unreadable: {e}") from None
        if len(raw) > MAX_BOOK_BYTES:
            raise self.refuse(f"it is larger than {MAX_BOOK_BYTES // 2 ** 20} MB")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.refuse(f"unreadable: {e}") from None
        if not text.strip():
            return ""
        try:
            # Infinity / NaN, refused below
            return json.loads(text, parse_constant=lambda c: float(c))
        except json.JSONDecodeError as e:
            raise self.refuse(f"not valid JSON: {e}") from None

    def read(self) -> dict:
        """{"key_check", "tables"}: the book as this module writes it (one of version 1 carried
        over), refused when it is not, or when it is damaged (its key, or the book itself, lost
        while runs were charged)."""
        data = self._parsed()
        if isinstance(data, dict) and data.get("version") == VERSION:
            unknown = set(data) - {"version", "key_check", "tables"}
            if unknown or not isinstance(data.get("key_check", ""), str):
                raise self.refuse(f"unknown field(s) {', '.join(sorted(map(str, unknown)))}" if unknown
                                  else "key_check must be text")
            book = {"key_check": data.get("key_check", ""), "tables": data.get("tables", {})}
        elif data in (None, ""):
            book = {"key_check": "", "tables": {}}
        else:  # version 1: the tables alone
            book = {"key_check": "", "tables": data}
        try:
            check_tables(book["tables"], self.check_plan)
        except ValueError as e:
            raise self.refuse(str(e)) from None
        self._check_whole(book, data)
        return book

    def _check_whole(self, book: dict, data) -> None:
        """A book emptied or deleted while runs were charged, a key deleted or replaced: refused."""
        if not book["tables"]:
            state = "missing" if data is None else "empty"
            changes = self.journal_changes()
            if changes:
                raise self.refuse(f"{self.path.name} is {state} but its journal {self.journal_path.name} "
                                  f"records {changes} change(s)", "restore it from a backup of the workbench "
                                  "home, or rebuild it from the journal: python -m synth_core runs --rebuild-book")
            charged = self.charged_runs()
            if charged:
                raise self.refuse(f"{self.path.name} is {state} but {charged} run folder(s) in "
                                  f"{self.path.parent / 'runs'} drew on it",
                                  "restore it and its journal from a backup of the workbench home")
            return
        if not self.key_path.exists() and not _before_keys(book):
            raise self.refuse(f"its key {self.key_path.name} is missing",
                              f"restore {self.key_path} from a backup of the workbench home: without it no "
                              "table is recognised and each would open a new budget")
        if book["key_check"] and not hmac.compare_digest(book["key_check"], self.key_check(self.key())):
            raise self.refuse(f"its key {self.key_path.name} was replaced by another",
                              f"restore {self.key_path} from a backup of the workbench home")

    def journal_changes(self) -> int:
        """How many changes the journal records (0 where there is none)."""
        try:
            return sum(1 for line in _read_regular(self.journal_path, MAX_BOOK_BYTES).splitlines()
                       if line.strip())
        except FileNotFoundError:
            return 0
        except OSError:
            return 1  # there, but not a journal this module wrote: something was there

    def charged_runs(self) -> int:
        """Run folders in the home (beside the book) that hold a charge on a table's budget."""
        return CHARGED_RUNS(self.path.parent / "runs")

    # --- the sketches of known tables (privacy.table_identity) -------------------------------------------
    def sketches(self) -> dict:
        """fingerprint -> {"account", "sketch"}; a file this module did not write tells nothing
        ({})."""
        try:
            data = json.loads(_read_regular(self.sketches_path, MAX_BOOK_BYTES).decode("utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def keep_sketch(self, fingerprint: str, account: str, sketch: dict) -> None:
        with self.locked():
            data = self.sketches()
            data[fingerprint] = {"account": account, "sketch": sketch}
            write_atomic(self.sketches_path, json.dumps(data), private=True)

    # --- the key ------------------------------------------------------------------------------------
    def key(self) -> bytes:
        """The key of the tables' fingerprints; BookError where it is not one this workbench
        wrote."""
        try:
            text = _read_regular(self.key_path, 200).decode("ascii", errors="replace").strip()
        except FileNotFoundError:
            raise self.refuse(f"its key {self.key_path.name} is missing", f"restore {self.key_path} from a "
                              "backup of the workbench home") from None
        except OSError as e:
            raise self.refuse(f"its key is unreadable: {e}") from None
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = b""
        if len(key) < 16:
            raise BookError(f"{self.key_path} is not a key this workbench wrote; restore it from a backup "
                            "(without it no table is recognised, and each would start a new budget)")
        return key

    def ensure_key(self) -> bytes:
        """The key, made now where the book holds no table yet (a new book); refused otherwise."""
        with self.locked():
            if not self.key_path.exists():
                self.read()  # refuses a book that holds tables without its key
                write_atomic(self.key_path, secrets.token_hex(32), private=True)
        return self.key()

    @staticmethod
    def key_check(key: bytes) -> str:
        return hmac.new(key, b"synth-workbench budget book", hashlib.sha256).hexdigest()[:32]

    # --- writing ------------------------------------------------------------------------------------
    def commit(self, book: dict, changes: list[dict]) -> None:
        """Apply `changes` to `book` (read under the lock held by the caller), journal them, write
        the book."""
        if not changes:
            return
        key = self.key() if self.key_path.exists() else None
        if key is None:
            write_atomic(self.key_path, secrets.token_hex(32), private=True)
            key = self.key()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        for change in changes:
            apply(book["tables"], change)
        check_tables(book["tables"], self.check_plan)
        self._journal([{"at": stamp, **c} for c in changes])
        data = {"version": VERSION, "key_check": self.key_check(key), "tables": book["tables"]}
        write_atomic(self.path, json.dumps(data, indent=2, allow_nan=False), private=True)

    def _journal(self, lines: list[dict]) -> None:
        fd = os.open(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write("".join(json.dumps(line, allow_nan=False) + "\n" for line in lines))
            f.flush()
            os.fsync(f.fileno())

    def journal(self) -> list[dict]:
        """The journal's changes, oldest first; BookError naming a line that is not one this module
        wrote."""
        out = []
        try:
            raw = _read_regular(self.journal_path, MAX_BOOK_BYTES + 1)
        except FileNotFoundError:
            return []
        except OSError as e:
            raise BookError(f"the journal cannot be read: {e}") from None
        if len(raw) > MAX_BOOK_BYTES:
            raise BookError(f"the journal {self.journal_path} is larger than {MAX_BOOK_BYTES // 2 ** 20} MB")
        for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                change = json.loads(line)
                if not isinstance(change, dict) or not isinstance(change.get("change"), str):
                    raise ValueError("not a change")
            except ValueError as e:
                raise BookError(f"line {number} of {self.journal_path} is not a change this workbench "
                                f"wrote ({e})") from None
            out.append(change)
        return out

    def rebuild(self) -> dict:
        """The book made again from its journal (the book itself lost, emptied or damaged): every
        change replayed in order. BookError where the journal is missing or does not replay."""
        with self.locked():
            changes = self.journal()
            if not changes:
                raise BookError(f"there is no journal at {self.journal_path} to rebuild the book from")
            tables: dict = {}
            try:
                for change in changes:
                    apply(tables, change)
                check_tables(tables, self.check_plan)
            except (KeyError, TypeError, ValueError) as e:
                raise BookError(f"the journal {self.journal_path} does not replay ({type(e).__name__}: {e}); "
                                "restore the book from a backup") from None
            if self.path.exists():
                os.replace(self.path, self.path.with_name(f"{self.path.name}.damaged-{secrets.token_hex(3)}"))
            key = self.key() if self.key_path.exists() else None
            data = {"version": VERSION, "key_check": self.key_check(key) if key else "", "tables": tables}
            write_atomic(self.path, json.dumps(data, indent=2, allow_nan=False), private=True)
            return tables
