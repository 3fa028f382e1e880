"""Which table a file holds, however it was written: the budget book's fingerprint and resemblance.

A table is its validated rows in the schema's columns, not the bytes of its file: a re-exported
spreadsheet (`40` written `40.0`, a trailing space, `N/A` for a blank), an extra column the schema
ignores, and rows or columns in another order are the same table. Each value is put in a canonical
form (numbers as numbers, text trimmed with its case kept, every missing marker one value), each row
hashed under the book's secret key, and the fingerprint is a keyed HMAC of the sorted row hashes.
The form is deliberately coarse: two tables that differ only where it is blind share one budget,
which never lets a table spend more.

A table that shares most of its rows with a known one (rows added or removed, a column dropped or
added) is told by bottom-k sketches (the k smallest row hashes, for all columns and for each column
left out): the estimated share of rows in common (Jaccard) decides that the steward is asked before
a new budget opens. Nothing here leaves the workbench home: the hashes are keyed, and a sketch is
the book's, never a run's.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from ..schema.batches import as_whole, read_batches, text_columns, wider

SKETCH_SIZE = 128        # row hashes kept per projection: a share's estimate within about ±0.09
# projections (each column left out) kept for tables up to this many columns
SKETCH_COLUMNS = 64
# a new table sharing at least this share of rows (Jaccard) with a known one is asked about
RESEMBLES = 0.5
# written for a missing value in exports and spreadsheets; any case (a schema's own markers are
# added)
MISSING_MARKERS = ("", "na", "n/a", "nan", "null", "none", "?", "-", "#n/a", "missing")
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _hash_key(key: bytes) -> str:
    """The 16-character key pandas' row hashing takes, derived from the book's key."""
    return hmac.new(key, b"row hashes", hashlib.sha256).hexdigest()[:16]


def _parsed(column: pd.Series, markers: frozenset) -> tuple[pd.Series, pd.Series, pd.Series]:
    """A text column trimmed, which of its values are missing (any marker), and each as a finite
    number where it is one."""
    text = column.astype("string").str.strip()
    missing = text.isna() | text.str.lower().isin(markers)
    numbers = pd.to_numeric(text.where(~missing), errors="coerce")
    return text, missing, numbers.where(np.isfinite(numbers.astype("float64")))


def _all_numbers(column: pd.Series, markers: frozenset) -> bool:
    """Whether every present value of a column is a number (its canonical form is numbers)."""
    if pd.api.types.is_bool_dtype(column):
        return False
    if pd.api.types.is_numeric_dtype(column):
        return True
    _, missing, numbers = _parsed(column, markers)
    return bool((numbers.notna() | missing).all())


def _canonical(column: pd.Series, markers: frozenset, numbers_only: bool | None = None
               ) -> pd.Series:
    """A column's values in canonical form: numbers as float64 where every present value is a
    number, else text with numbers written one way; every missing marker is one missing value.
    `numbers_only`: whether every present value of the whole column is a number, where this is a
    batch of it (None: this is the whole column)."""
    if pd.api.types.is_bool_dtype(column):
        column = column.astype("string")
    if pd.api.types.is_numeric_dtype(column) and numbers_only is not False:
        values = column.astype("float64")
        return values.where(np.isfinite(values)) + 0.0  # -0.0 and 0.0 alike; ±inf as missing
    if pd.api.types.is_numeric_dtype(column):  # text elsewhere in the column: numbers as text
        values = column.astype("float64")
        return values.where(np.isfinite(values)).map(repr, na_action="ignore").astype("string")
    text, missing, numbers = _parsed(column, markers)
    if numbers_only if numbers_only is not None else bool((numbers.notna() | missing).all()):
        return numbers.astype("float64") + 0.0
    out = text.where(numbers.isna(), numbers.astype("float64").map(repr))
    return out.where(~missing, pd.NA).astype("string")


@dataclass(frozen=True)
class RowHashes:
    """A table's keyed row hashes, each column's share of them kept apart so a column can be left
    out."""
    columns: tuple[str, ...]
    parts: np.ndarray  # uint64, one row per table row, one column per table column

    def rows(self, leave_out: str | None = None) -> np.ndarray:
        """Each row's hash over every column but `leave_out` (the sum of the parts, wrapping)."""
        with np.errstate(over="ignore"):
            total = self.parts.sum(axis=1, dtype=np.uint64)
            if leave_out is not None:
                total = total - self.parts[:, self.columns.index(leave_out)]
            return _finish(total)


def _finish(h: np.ndarray) -> np.ndarray:
    """A final mix of summed hashes (splitmix64's), so that sums of parts spread over all 64
    bits."""
    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return h ^ (h >> np.uint64(31))


def _marks(markers: tuple[str, ...]) -> frozenset:
    return frozenset(MISSING_MARKERS) | {m.strip().lower() for m in markers}


def row_hashes(tables: list[tuple[str, pd.DataFrame, list[str]]], key: bytes,
               markers: tuple[str, ...] = (), numbers_only: dict[str, bool] | None = None
               ) -> RowHashes:
    """Keyed hashes of the rows of each (tag, table, columns): only the named columns present, in
    canonical form; the tag (a linked table's part) is hashed with each row, so two parts never
    share a row. `numbers_only`: each column's form where the tables are batches of one table
    (`streamed`)."""
    hash_key, marks = _hash_key(key), _marks(markers)
    blocks, names = [], []
    for tag, table, columns in tables:
        present = sorted({str(c) for c in columns} & {str(c) for c in table.columns})
        frame = table.rename(columns=str)
        parts = np.zeros((len(table), len(present) + 1), dtype=np.uint64)
        parts[:, 0] = _name_hash(f"(part) {tag}", key)
        for j, name in enumerate(present, 1):
            form = _canonical(frame[name], marks, (numbers_only or {}).get(name))
            values = pd.util.hash_array(form.to_numpy(), hash_key=hash_key)
            with np.errstate(over="ignore"):
                parts[:, j] = (values ^ _name_hash(f"{tag}\x1f{name}", key)) * _MIX
        blocks.append((parts, [f"{tag}\x1f{n}" for n in present]))
        names.extend(f"{tag}\x1f{n}" for n in present)
    columns = tuple(sorted(set(names)))
    out = np.zeros((sum(len(b[0]) for b in blocks), len(columns) + 1), dtype=np.uint64)
    at = 0
    for parts, present in blocks:
        out[at:at + len(parts), 0] = parts[:, 0]
        for j, name in enumerate(present, 1):
            out[at:at + len(parts), columns.index(name) + 1] = parts[:, j]
        at += len(parts)
    return RowHashes(("(part)",) + columns, out)


def _name_hash(name: str, key: bytes) -> np.uint64:
    return np.uint64(int.from_bytes(hmac.new(key, name.encode(), hashlib.sha256).digest()[:8], "little"))


def fingerprint(hashes: RowHashes, key: bytes) -> str:
    """The keyed fingerprint of a table: its column names and its sorted row hashes (any order of
    either)."""
    return _fingerprint(hashes.columns, hashes.rows(), key)


def _fingerprint(columns: tuple[str, ...], rows: np.ndarray, key: bytes) -> str:
    h = hmac.new(key, "\x1e".join(columns).encode(), hashlib.sha256)
    h.update(np.sort(rows).tobytes())
    return h.hexdigest()[:32]


def _bottom(rows: np.ndarray) -> np.ndarray:
    """The SKETCH_SIZE smallest distinct row hashes (a partition first: a full sort of a large table
    is slow)."""
    take = 4 * SKETCH_SIZE
    if len(rows) > take:
        smallest = np.unique(np.partition(rows, take)[:take + 1])
        if len(smallest) >= SKETCH_SIZE:
            return smallest[:SKETCH_SIZE]
    return np.unique(rows)[:SKETCH_SIZE]


def _projections(hashes: RowHashes) -> dict[str | None, np.ndarray]:
    """The row hashes the sketch is made of: over every column (None), and (up to SKETCH_COLUMNS
    columns) over every column but one."""
    columns = [c for c in hashes.columns if c != "(part)"]
    out = {None: hashes.rows()}
    if 1 < len(columns) <= SKETCH_COLUMNS:
        out.update({c: hashes.rows(leave_out=c) for c in columns})
    return out


def _packed(rows: np.ndarray) -> str:
    return base64.b64encode(_bottom(rows).astype("<u8").tobytes()).decode()


def sketch(hashes: RowHashes) -> dict:
    """What the book keeps to tell a resembling table: the bottom-k of the row hashes over every
    column, and (up to SKETCH_COLUMNS columns) over every column but one, as base64."""
    rows = _projections(hashes)
    return {"all": _packed(rows.pop(None)), "drop": {c: _packed(r) for c, r in rows.items()}}


def _unpack(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text.encode(), validate=True), dtype="<u8")


def _jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """The bottom-k estimate of the share of rows two tables have in common (of the rows of
    either)."""
    if not len(a) or not len(b):
        return 0.0
    k = min(SKETCH_SIZE, len(np.union1d(a, b)))
    union = np.union1d(a, b)[:k]
    both = np.intersect1d(np.intersect1d(a, b), union)
    return float(len(both) / k)


def resemblance(new: dict, known: dict) -> float:
    """The largest estimated share of rows in common between two sketched tables: as they are, or
    with a column left out of either (a column dropped or added)."""
    try:
        best = _jaccard(_unpack(new["all"]), _unpack(known["all"]))
        for column, mine in new.get("drop", {}).items():
            best = max(best, _jaccard(_unpack(mine), _unpack(known["all"])))
            if column in known.get("drop", {}):
                best = max(best, _jaccard(_unpack(mine), _unpack(known["drop"][column])))
        for theirs in known.get("drop", {}).values():
            best = max(best, _jaccard(_unpack(new["all"]), _unpack(theirs)))
    except (KeyError, TypeError, ValueError, AttributeError):
        return 0.0  # a sketch this module did not write: it tells nothing
    return best


def _v1_rows(table: pd.DataFrame, sort: bool = True) -> tuple[list[str], bytes | np.ndarray]:
    """The first form's canonical rows: every column as written, rows' hashes sorted (`sort`
    False: a batch's hashes, unsorted)."""
    ordered = table.copy()
    ordered.columns = [str(c) for c in ordered.columns]
    ordered = ordered[sorted(ordered.columns)]
    rows = pd.util.hash_pandas_object(ordered.astype("string"), index=False).to_numpy()
    return list(ordered.columns), np.sort(rows).tobytes() if sort else rows


def legacy_fingerprint(table: pd.DataFrame) -> str:
    """The unkeyed fingerprint the first books used (read once, to carry their accounts over)."""
    return _legacy(*_v1_rows(table))


def _legacy(columns: list[str], rows: bytes) -> str:
    h = hashlib.sha256("\x1f".join(columns).encode())
    h.update(rows)
    return h.hexdigest()[:32]


def fingerprint_v1(table: pd.DataFrame, key: bytes) -> str:
    """The keyed fingerprint of the table as uploaded that books of version 1 used (read once, to
    carry their accounts over to the canonical one)."""
    return _v1_fingerprint(*_v1_rows(table), key)


def _v1_fingerprint(columns: list[str], rows: bytes, key: bytes) -> str:
    h = hmac.new(key, "\x1f".join(columns).encode(), hashlib.sha256)
    h.update(rows)
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class Streamed:
    """What the book asks of a table read a batch at a time (too large to hold): the fingerprint,
    the sketch, and the older forms' fingerprints (to carry an account over; None for a table
    no book of those forms can have held: one in a cluster), each what the whole table gives."""
    fingerprint: str
    sketch: dict
    v1: str | None
    legacy: str | None


def streamed(batches: Callable[[frozenset], Iterable[pd.DataFrame]], columns: list[str],
             key: bytes, markers: tuple[str, ...] = ()) -> Streamed:
    """The identity of a table read twice a batch at a time (`batches(text)`: the batches as read,
    the columns in `text` read as text): first each column's form and type over the whole table,
    then the row hashes, each batch's columns as the whole table reads them (text where a batch
    holds text, floats where one holds a float). The row hashes are kept (8 bytes a row, for the
    sorted fingerprint); the sketches' bottom-k merged batch by batch."""
    marks, numbers_only, types = _marks(markers), {}, {}
    for batch in batches(frozenset()):
        for name in batch.columns:
            name = str(name)
            numbers_only[name] = numbers_only.get(name, True) and _all_numbers(batch[name], marks)
            types[name] = wider(types.get(name), batch[name])
    rows, bottoms, old, names, hashed = [], {}, [], None, ()
    for batch in batches(text_columns(types)):
        batch = as_whole(batch, types)
        hashes = row_hashes([("table", batch, columns)], key, markers, numbers_only)
        hashed = hashes.columns
        for projection, found in _projections(hashes).items():
            if projection is None:
                rows.append(found)
            kept = bottoms.get(projection, found[:0])
            bottoms[projection] = _bottom(np.concatenate([kept, found]))
        names, part = _v1_rows(batch, sort=False)
        old.append(part)
    drop = {c: _packed(b) for c, b in bottoms.items() if c is not None}
    v1_rows = np.sort(np.concatenate(old)).tobytes()
    return Streamed(_fingerprint(hashed, np.concatenate(rows), key),
                    {"all": _packed(bottoms[None]), "drop": drop},
                    _v1_fingerprint(names, v1_rows, key), _legacy(names, v1_rows))


# identities of files read a batch at a time, by what they depend on (the file as it is now: its
# path, size and time of change; the columns, the markers, the book's key): a page that asks
# again, and the job it starts, do not read ten million rows twice more (two minutes each)
_OF_FILES: dict[tuple, Streamed] = {}
_OF_FILES_KEPT = 8


def of_file(path, schema, key: bytes, batch_rows: int) -> Streamed:
    """The identity of a file's table read a batch at a time with the schema's columns and
    markers (`streamed`), once per process while the file is unchanged."""
    path = Path(path).resolve()
    stat = path.stat()
    memo = (str(path), stat.st_size, stat.st_mtime_ns, tuple(schema.names),
            tuple(schema.missing_markers), key)
    if memo not in _OF_FILES:
        found = streamed(lambda text: read_batches(path, schema, batch_rows, text),
                         list(schema.names), key, tuple(schema.missing_markers))
        while len(_OF_FILES) >= _OF_FILES_KEPT:
            _OF_FILES.pop(next(iter(_OF_FILES)))
        _OF_FILES[memo] = found
    return _OF_FILES[memo]


def in_place(table, columns: list[str], key: bytes, markers: tuple[str, ...] = ()
             ) -> Streamed | None:
    """The identity of a table counted where it lives (a cluster's: encoding.spark.SparkTable):
    the fingerprint and sketch the same rows read whole give, in three passes where the rows are
    (`table.each_part`, `table.sorted_keys`): each column's form, each part's bottom-k, then each
    row's keyed hash, sorted there and read here a chunk at a time. None where the engine has no
    such passes (its rows are a file's, `streamed`)."""
    marks = _marks(markers)

    def forms(batches):
        found: dict[str, bool] = {}
        for batch in batches:
            for name, column in batch.rename(columns=str).items():
                found[name] = found.get(name, True) and _all_numbers(column, marks)
        yield json.dumps(found)

    parts = table.each_part(forms)
    if parts is None:
        return None
    numbers_only: dict[str, bool] = {}
    for text in parts:
        for name, only in json.loads(text).items():
            numbers_only[name] = numbers_only.get(name, True) and only

    def hashed(batch) -> RowHashes:
        return row_hashes([("table", batch, columns)], key, markers, numbers_only)

    def bottoms(batches):
        kept, names = {}, None
        for batch in batches:
            hashes = hashed(batch)
            names = hashes.columns
            for projection, found in _projections(hashes).items():
                kept[projection] = _bottom(np.concatenate([kept.get(projection, found[:0]),
                                                           found]))
        if names is not None:
            yield json.dumps({"columns": names, "bottoms": [[p, _packed(b)]
                                                            for p, b in kept.items()]})

    merged, names = {}, ()
    for text in table.each_part(bottoms):
        part = json.loads(text)
        names = tuple(part["columns"])
        for projection, packed in part["bottoms"]:
            got = _unpack(packed).astype(np.uint64)
            merged[projection] = _bottom(np.concatenate([merged.get(projection, got[:0]), got]))
    h = hmac.new(key, "\x1e".join(names).encode(), hashlib.sha256)
    for chunk in table.sorted_keys(lambda batches: (hashed(b).rows() for b in batches)):
        h.update(chunk.tobytes())  # `_fingerprint`'s bytes: the sorted row hashes
    sketch = {"all": _packed(merged.pop(None)), "drop": {c: _packed(b) for c, b in merged.items()}}
    return Streamed(h.hexdigest()[:32], sketch, None, None)
