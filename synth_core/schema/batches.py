"""A steward's table a batch at a time: read as `read_table` reads the whole file, validated against
the public schema and held to its rules as `validate_table` holds the whole table, so that a table
larger than memory is counted (encoding/engine.py) with the numbers the whole table gives.

Everything validation does to a row looks at that row alone, except the refusals of rules that
most rows break: those add up over the batches (`schema.rules.RuleTally`) and are asked at the end,
as are "every row breaks a rule" and the report's counts.
"""
from __future__ import annotations

import codecs
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from pandas.api.types import is_float_dtype

from .. import files
from ..files import input_file
from .reading import csv_options, csv_read_as, numbers_for_people, sniff_separator
from .rules import RuleTally
from .spec import Schema, SchemaError
from .reading import read_table
from .tables import ColumnReport, ValidationReport, validate_table

# rows read, validated and handed on at a time: about 10 MB of an Adult-shaped CSV
BATCH_ROWS = 100_000
# what pandas holds of a table read whole: about 57 bytes a cell (10M rows of Adult's 15 columns:
# 8.6 GB), eight times its CSV (benchmarks/RESULTS.md, "Scale curve")
CELL_BYTES, CSV_TIMES = 57, 8


@dataclass(frozen=True)
class TableFile:
    """A table given as its file, to be read a batch at a time and never whole (a background job
    on a table too large to hold: runs.file_runs); the budget book reads it the same way."""
    path: Path
    batch_rows: int = BATCH_ROWS

    def columns(self) -> list[str]:
        """The file's column names, from its header (CSV) or its metadata (Parquet)."""
        path = Path(self.path)
        if path.suffix.lower() in (".parquet", ".pq"):
            return [str(n) for n in pq.ParquetFile(path).schema_arrow.names]
        return [str(c) for c in next(read_batches(path, None, 1)).columns]


# what a draft, a preview or a review reads of a table too large to read whole: a uniform random
# sample of this many of its rows
SAMPLE_ROWS = 1_000_000


def opened(path: str | os.PathLike, missing_markers=(), rows: int | None = None) -> pd.DataFrame:
    """A table opened by its path to draft and preview: the file read whole, or where that would
    take over 1.6 GB (`too_large`), a uniform random `rows` (SAMPLE_ROWS) of its rows, read a
    batch at a time, with `attrs["whole_file"]` (its path, resolved: its `TableFile` is what a
    fit reads) and `attrs["rows"]` (how many the file holds: the steward's own count)."""
    if not too_large(input_file(path, "data file", SchemaError)):
        return read_table(path, missing_markers=missing_markers)
    table, total = sample_rows(path, rows or SAMPLE_ROWS, missing_markers)
    table.attrs.update(whole_file=str(Path(path).expanduser().resolve()), rows=total)
    return table


def too_large(path: str | os.PathLike) -> bool:
    """Whether reading the file whole would take more memory than a CSV as large as a browser
    upload does (files.DATA_LIMIT, CSV_TIMES over: 1.6 GB); such a file is read a batch at a
    time by fit, the draft and the review. False where it cannot be told (read_table then says
    what is wrong with the file)."""
    try:
        return whole_bytes(path) > CSV_TIMES * files.DATA_LIMIT
    except Exception:  # noqa: BLE001 - a missing or damaged file: read_table's one line
        return False


def whole_bytes(path: str | os.PathLike) -> int:
    """About the memory a file takes read whole: eight times a CSV, or a Parquet file's rows
    times its columns times CELL_BYTES (its metadata; compressed, its size says little)."""
    path = Path(path)
    if path.suffix.lower() in (".parquet", ".pq"):
        meta = pq.ParquetFile(path).metadata
        return meta.num_rows * meta.num_columns * CELL_BYTES
    return path.stat().st_size * CSV_TIMES
_CHECK_BYTES = 16 * 1024 * 1024


def _encoding(path: Path) -> tuple[str, str]:
    """The encoding pandas reads the file in and its label, as `reading.decode_text` decides for
    a whole file, checked 16 MB at a time: UTF-16 or UTF-8 by their byte-order marks, else UTF-8,
    else Windows-1252, else Latin-1."""
    with open(path, "rb") as f:
        head = f.read(65536)
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16", "UTF-16"
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig", "UTF-8"
    if b"\x00" in head:
        raise SchemaError(f"cannot read {path.name} as a table: it is not text (is it a "
                          "spreadsheet or another format? save it as CSV)")
    for encoding, label in (("utf-8", "UTF-8"), ("cp1252", "Windows-1252 (Excel)")):
        decoder = codecs.getincrementaldecoder(encoding)()
        try:
            with open(path, "rb") as f:
                while chunk := f.read(_CHECK_BYTES):
                    decoder.decode(chunk)
            decoder.decode(b"", final=True)
            return encoding, label
        except UnicodeDecodeError:
            continue
    return "latin-1", "Latin-1"


def _header(path: Path, encoding: str) -> str:
    with open(path, encoding=encoding, newline="") as f:
        return f.readline().rstrip("\r\n")


def read_batches(path: str | os.PathLike, schema: Schema | None = None,
                 batch_rows: int = BATCH_ROWS, text: frozenset = frozenset(),
                 missing_markers=()) -> Iterator[pd.DataFrame]:
    """The rows of a CSV or Parquet file, `batch_rows` at a time, each read as `read_table` reads
    a whole file (the same encodings, separators, missing markers and numbers written for people);
    any size, as the file is never held whole (a regular file only: files.input_file). `text`: a
    CSV's columns read as text in every batch, as pandas reads them in the whole file where some
    batch holds text (a batch alone may read numbers)."""
    path = input_file(path, "data file", SchemaError)
    markers = list(schema.missing_markers) if schema else list(missing_markers)
    if path.suffix.lower() in (".parquet", ".pq"):
        yield from _parquet_batches(path, batch_rows)
        return
    encoding, label = _encoding(path)
    header = _header(path, encoding)
    if not header.strip():
        raise SchemaError(f"{path.name} is empty")
    sep = sniff_separator(header)
    read_as = csv_read_as(path.name, header, sep, label)
    seen = 0
    try:
        options = csv_options(sep, schema, markers)
        if text:
            options["dtype"] = {**{name: str for name in text}, **(options["dtype"] or {})}
        for chunk in pd.read_csv(path, encoding=encoding, chunksize=batch_rows, **options):
            if len(chunk):  # a header alone reads as one empty chunk
                seen += len(chunk)
                numbers_for_people(chunk, schema, read_as, skip=text)
                yield chunk
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SchemaError(f"cannot read {path.name} as a table: {reason}") from None
    if not seen:
        raise SchemaError(f"{path.name} has a header but no rows")


def _parquet_batches(path: Path, batch_rows: int) -> Iterator[pd.DataFrame]:
    try:
        source = pq.ParquetFile(path)
        batches = source.iter_batches(batch_size=batch_rows)
        seen = 0
        for batch in batches:
            if batch.num_rows:
                seen += batch.num_rows
                yield batch.to_pandas()
    except Exception as e:  # pyarrow raises its own types for a damaged file
        if isinstance(e, SchemaError):
            raise
        raise SchemaError(f"cannot read {path.name} as a table: {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}") from None
    if not seen:
        raise SchemaError(f"{path.name} has a header but no rows")


@dataclass
class Counted:
    """What validation counted of some of a table's rows: the rows kept, each column's report, the
    rows breaking each rule, those of them missing a value the rule reads, the rows dropped. The
    batches' add up (`+`) to the whole table's, and `report` makes its refusals and its report;
    plain numbers (`to_json`), so a cluster's workers send theirs back (encoding/spark.py)."""
    rows: int = 0
    columns: dict[str, ColumnReport] = field(default_factory=dict)
    ignored: list[str] | None = None
    breaks: dict[str, int] = field(default_factory=dict)
    missing: dict[tuple[str, str], int] = field(default_factory=dict)
    dropped: int = 0

    def __add__(self, other: "Counted") -> "Counted":
        columns = {}
        for name in {**self.columns, **other.columns}:
            mine = self.columns.get(name, ColumnReport())
            theirs = other.columns.get(name, ColumnReport())
            columns[name] = ColumnReport(**{f.name: getattr(mine, f.name) + getattr(theirs, f.name)
                                            for f in fields(ColumnReport)})
        return Counted(self.rows + other.rows, columns,
                       self.ignored if self.ignored is not None else other.ignored,
                       _summed(self.breaks, other.breaks), _summed(self.missing, other.missing),
                       self.dropped + other.dropped)

    def report(self, schema: Schema) -> ValidationReport:
        """The whole table's report; SchemaError where `validate_table` refuses the whole table (a
        rule most rows break, rules that drop most rows, no row left)."""
        rules = schema.rule_checks
        if rules:
            RuleTally(None, self.breaks, self.missing, self.rows + self.dropped,
                      self.dropped).refuse_mostly_broken(rules)
        if not self.rows:
            raise SchemaError("every row of the table breaks a declared rule: nothing is left to "
                              "learn from")
        return ValidationReport(rows=self.rows, columns=self.columns,
                                ignored_columns=self.ignored or [], rule_breaks=dict(self.breaks),
                                dropped_for_rules=self.dropped)

    def to_json(self) -> str:
        return json.dumps({"rows": self.rows, "ignored": self.ignored, "dropped": self.dropped,
                           "columns": {k: asdict(v) for k, v in self.columns.items()},
                           "breaks": self.breaks, "missing": [[r, c, n] for (r, c), n in
                                                              self.missing.items()]})

    @classmethod
    def from_json(cls, text: str) -> "Counted":
        d = json.loads(text)
        return cls(d["rows"], {k: ColumnReport(**v) for k, v in d["columns"].items()},
                   d["ignored"], d["breaks"], {(r, c): n for r, c, n in d["missing"]},
                   d["dropped"])


def _summed(a: dict, b: dict) -> dict:
    return {k: a.get(k, 0) + b.get(k, 0) for k in {**a, **b}}


def validate_batch(batch: pd.DataFrame, schema: Schema) -> tuple[pd.DataFrame, Counted]:
    """One batch of a table validated against the schema (`validate_table`) and held to its rules,
    and what that counted, to add up with the other batches'."""
    clean, report = validate_table(batch, schema, hold_rules=False)
    counted = Counted(len(clean), report.columns, report.ignored_columns)
    if schema.rule_checks:
        tally = RuleTally.of(schema.rule_checks, clean)
        clean = clean.loc[tally.keep].reset_index(drop=True)
        counted = Counted(len(clean), report.columns, report.ignored_columns, tally.counts,
                          tally.missing, tally.dropped)
    return clean, counted


class ValidatedBatches:
    """A table's batches validated against the schema and held to its rules; after the last one,
    `report` is the whole table's `ValidationReport` (and the refusals `validate_table` makes of a
    whole table are made, from what the batches counted)."""

    def __init__(self, batches, schema: Schema):
        self.batches, self.schema = batches, schema
        self.report: ValidationReport | None = None

    def __iter__(self) -> Iterator[pd.DataFrame]:
        total = Counted()
        for batch in self.batches:
            clean, counted = validate_batch(batch, self.schema)
            total = total + counted
            yield clean
        self.report = total.report(self.schema)


def wider(seen: object, column: pd.Series) -> object:
    """The type pandas gives a column read whole, from its batches' (`seen`: the earlier batches'):
    text where any batch is text or the batches disagree on booleans, a float where one holds a
    float (or a missing value) and another whole numbers; None where no batch needs telling."""
    if pd.api.types.is_bool_dtype(column):
        kind = bool
    elif pd.api.types.is_numeric_dtype(column):
        kind = float if pd.api.types.is_float_dtype(column) else int
    else:
        kind = object
    if seen is None or seen is kind:
        return kind
    if object in (seen, kind) or bool in (seen, kind):
        return object
    return float


def text_columns(types: dict) -> frozenset:
    """The columns the whole file reads as text (`wider`'s kinds), to read as text in each batch."""
    return frozenset(name for name, kind in types.items() if kind is object)


def as_whole(batch: pd.DataFrame, types: dict) -> pd.DataFrame:
    """A batch (read with `text_columns` as text) with its columns named and typed as the whole
    file's: whole numbers as floats where another batch holds a float or a blank."""
    batch = batch.rename(columns=str)
    floats = [n for n, kind in types.items() if kind is float and not is_float_dtype(batch[n])]
    return batch.astype({n: float for n in floats}) if floats else batch


def sample_rows(path: str | os.PathLike, rows: int, missing_markers=(),
                batch_rows: int = BATCH_ROWS, schema: Schema | None = None
                ) -> tuple[pd.DataFrame, int]:
    """A uniform random sample of `rows` of a file's rows, read twice a batch at a time (each
    column's type over the whole file first, so that the sample's columns are typed as the whole
    file's are: text where any batch holds text), and how many rows the file holds. Memory holds
    the sample and a batch: a draft or a review of a table too large to read whole (cli_schema,
    cli_review; `schema`: read as `read_table` reads it with one)."""
    types: dict = {}
    for batch in read_batches(path, schema, batch_rows, missing_markers=missing_markers):
        for name in batch.columns:
            types[str(name)] = wider(types.get(str(name)), batch[name])
    rng, kept, keys, total = np.random.default_rng(), None, np.empty(0), 0
    for batch in read_batches(path, schema, batch_rows, text_columns(types), missing_markers):
        batch = as_whole(batch, types).reset_index(drop=True)
        total += len(batch)
        mine = rng.random(len(batch))
        kept = batch if kept is None else pd.concat([kept, batch], ignore_index=True)
        keys = np.concatenate([keys, mine])
        if len(kept) > rows:  # the rows with the smallest keys: a uniform sample of all so far
            keep = np.sort(np.argpartition(keys, rows)[:rows])
            kept, keys = kept.iloc[keep].reset_index(drop=True), keys[keep]
    return kept, total
