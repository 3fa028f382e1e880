"""Counting a private table too large to hold: DuckDB, an embedded engine, keeps its validated rows
on disk and answers the counts a run releases (the row count, marginals, histograms), so memory is
bounded by the engine's limit and the counts' cells, not by the rows.

The rows come a batch at a time (schema/batches.py: read, validated and held to the rules as the
whole table would be) and are kept in canonical form: a number as a double, a category as its place
in the public vocabulary, missing as NULL. Where a row falls among a count's cells is the public
encoder's (`TokenEncoder`'s codec: its edges, its vocabulary, its missing cell), written as
SQL, so a count here equals `TokenEncoder.cells` counted in memory (tests/test_engine.py).

The database lives in an owner-only temporary folder that `close` (or the end of the process)
deletes: it holds private rows.
"""
from __future__ import annotations

import contextlib
import copy
import math
import os
import shutil
import tempfile
import weakref
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np
import pandas as pd

from ..schema import Schema
from ..schema.batches import BATCH_ROWS, ValidatedBatches, read_batches
from ..schema.tables import ValidationReport, held_to_scale
from .tokens import ColumnCodec, TokenEncoder

# what the engine may hold in memory before it spills to its folder
MEMORY_MB = 512
PREFIX = "synth-core-table-"


def _started(pid: int) -> str | None:
    """When a process started (its /proc stat's start time), None where there is none: a process
    id that comes back for another process is told apart."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _remove_orphans(parent: Path) -> None:
    """The folders of stores whose process died without closing them (SIGKILL, a power cut): they
    hold private rows, so the next store removes them."""
    for folder in parent.glob(PREFIX + "*"):
        try:
            pid, started = (folder / "owner").read_text().split()
            if folder.stat().st_uid == os.getuid() and _started(int(pid)) != started:
                shutil.rmtree(folder, ignore_errors=True)
        except (OSError, ValueError):
            continue  # not one of ours, or being made: left alone


def _double(x: float) -> str:
    """A float as an SQL double, exactly (a bare 0.1 would be a DECIMAL)."""
    return f"CAST('{float(x)!r}' AS DOUBLE)"


def cell_sql(column: str, codec: ColumnCodec) -> str:
    """SQL for each row's cell of `codec` (its local index), as `TokenEncoder._local_tokens`
    places a value: a number in the bin `searchsorted(edges, x, 'right') - 1` clipped to the bins,
    a category at its place in the vocabulary, missing in the column's missing cell."""
    missing = codec.null_local if codec.null_local is not None else 0
    if codec.spec.is_numeric:
        edges = codec.edges
        steps = " ".join(f"WHEN {column} < {_double(e)} THEN {k}"
                         for k, e in enumerate(edges[1:-1]))
        return (f"CASE WHEN {column} IS NULL OR isnan({column}) THEN {missing} {steps} "
                f"ELSE {len(edges) - 2} END")
    return f"COALESCE({column}, {missing})"


def stored_form(table: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Validated rows as an engine keeps them: column i of the schema as `c{i}`, a number as a
    double (missing: NaN), a category as its place in the public vocabulary (missing: NA)."""
    frame = {}
    for i, spec in enumerate(schema.columns):
        values = table[spec.name]
        if spec.is_numeric:
            frame[f"c{i}"] = pd.to_numeric(values).astype(float)
        else:
            codes = pd.Categorical(values, categories=spec.vocabulary()).codes
            frame[f"c{i}"] = pd.array(np.where(codes < 0, None, codes), dtype="Int32")
    return pd.DataFrame(frame)


def canonical_form(stored: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Stored rows back in validation's canonical form (`stored_form` undone): a number as a float
    (missing: NaN), a category as its public label (missing: NaN)."""
    frame = {}
    for i, spec in enumerate(schema.columns):
        values = stored[f"c{i}"]
        if spec.is_numeric:
            frame[spec.name] = pd.to_numeric(values).astype(float).to_numpy()
        else:
            codes = pd.to_numeric(values).fillna(-1).astype(np.int64).to_numpy()
            frame[spec.name] = pd.Categorical.from_codes(codes, spec.vocabulary()).astype(object)
    return pd.DataFrame(frame)


def stored_types(schema: Schema, sql_int: str = "INTEGER") -> str:
    """The stored form's columns and their SQL types."""
    return ", ".join(f"c{i} {'DOUBLE' if spec.is_numeric else sql_int}"
                     for i, spec in enumerate(schema.columns))


class Counting(ABC):
    """What an engine answers about a table it holds in `stored_form` (as the view `_view`): the
    rows, the counts on an encoder's cells, a column's histogram. An engine runs SQL (`_query`:
    the result's columns as arrays); the SQL is written once, here, in what DuckDB and Spark both
    read."""
    schema: Schema
    report: ValidationReport | None
    _view: str
    # what it gives a family (`SynthModel.from_engine`): counts, and the rows themselves encoded
    # to this machine's disk a batch at a time (DP-SGD's batches)
    answers = frozenset({"counts", "rows"})
    # the file its rows were read from, which the budget book reads again for the table's identity
    path: Path | None = None

    @abstractmethod
    def _query(self, sql: str) -> dict[str, np.ndarray]:
        """The result of `sql`, each of its columns as an array."""

    @abstractmethod
    def held_to(self, schema: Schema) -> ValidationReport:
        """The rows held to the scales the run's schema found with DP where the table's had none
        (bounds: privacy.bounds; value sets and point masses: privacy.value_sets), by validation's
        own code (`held_to_scale`: clipped, snapped, on the points), and the report with what that
        changed added; the engine's schema is the run's from then on."""

    def each_part(self, summarise) -> list[str] | None:
        """What `summarise` (a part's batches of rows as read, pandas frames, to strings) writes of
        each part of the table as read, run where the rows live (the budget book's identity of a
        table with no file here: privacy.table_identity.in_place); None where the rows as read are
        a file's (`path`)."""
        return None

    def _rescaled(self, schema: Schema) -> list:
        """The numeric columns whose public scale the run's schema changed (`held_to`'s work)."""
        return [spec for spec in schema.columns
                if spec.is_numeric and _scale(spec) != _scale(self.schema[spec.name])]

    def _column(self, name: str) -> str:
        return f"c{self.schema.names.index(name)}"

    def __len__(self) -> int:
        return int(self._query(f"SELECT count(*) AS n FROM {self._view}")["n"][0])

    def counts(self, encoder: TokenEncoder, columns) -> tuple[np.ndarray, tuple[int, ...]]:
        """The rows' counts on the joint cells of `columns` in `encoder`'s discretisation (flat,
        C order, as floats) and the cells' shape: `TokenEncoder.cells` counted by the engine."""
        codecs = [encoder.codecs[encoder.column_index(name)] for name in columns]
        shape = tuple(c.size for c in codecs)
        cells = ", ".join(f"{cell_sql(self._column(c.spec.name), c)} AS a{i}"
                          for i, c in enumerate(codecs))
        got = self._query(f"SELECT {cells}, count(*) AS n FROM {self._view} GROUP BY ALL")
        out = np.zeros(math.prod(shape))
        if len(got["n"]):
            at = np.ravel_multi_index(tuple(np.asarray(got[f"a{i}"], np.int64)
                                            for i in range(len(codecs))), shape)
            out[at] = np.asarray(got["n"], float)
        return out, shape

    def counts_of(self, encoder: TokenEncoder, cliques: list[tuple[str, ...]], at_once: int = 64
                  ) -> dict[tuple[str, ...], tuple[np.ndarray, tuple[int, ...]]]:
        """`counts` of each clique, `at_once` of them to a query (GROUPING SETS: one pass over the
        rows, where each query is a job a cluster schedules, AIM's hundreds of cliques)."""
        out = {}
        cliques = list(dict.fromkeys(tuple(c) for c in cliques))
        for start in range(0, len(cliques), at_once):
            some = cliques[start:start + at_once]
            names = list(dict.fromkeys(name for clique in some for name in clique))
            codecs = {n: encoder.codecs[encoder.column_index(n)] for n in names}
            cells = ", ".join(f"{cell_sql(self._column(n), codecs[n])} AS a{j}"
                              for j, n in enumerate(names))
            sets = ", ".join("(" + ", ".join(f"a{names.index(n)}" for n in clique) + ")"
                             for clique in some)
            every = ", ".join(f"a{j}" for j in range(len(names)))
            got = self._query(f"SELECT {every}, grouping_id({every}) AS g, count(*) AS n "
                              f"FROM (SELECT {cells} FROM {self._view}) "
                              f"GROUP BY GROUPING SETS ({sets})")
            g, held = np.asarray(got["g"], np.int64), np.asarray(got["n"], float)
            # a column's cells (NULL where the set does not group it: never read there)
            at_cells = {name: np.asarray(got[f"a{j}"], np.float64) for j, name in enumerate(names)}
            for clique in some:
                # grouping_id's bit of a column (the last one's lowest) is 1 where it is not grouped
                mask = sum(1 << (len(names) - 1 - j) for j, n in enumerate(names)
                           if n not in clique)
                mine = g == mask
                shape = tuple(codecs[n].size for n in clique)
                counts = np.zeros(math.prod(shape))
                if mine.any():
                    at = np.ravel_multi_index(tuple(at_cells[c][mine].astype(np.int64)
                                                    for c in clique), shape)
                    counts[at] = held[mine]
                out[clique] = (counts, shape)
        return out

    def histogram(self, name: str, edges: np.ndarray) -> np.ndarray:
        """The present values of a numeric column counted in the cells between `edges`, as
        `np.histogram` counts them (values outside clipped to the first or last cell)."""
        spec = self.schema[name]
        codec = ColumnCodec(spec=spec, offset=0, labels=list(range(len(edges) - 1)),
                            edges=np.asarray(edges, float))
        column = self._column(name)
        got = self._query(
            f"SELECT {cell_sql(column, codec)} AS a, count(*) AS n FROM {self._view} "
            f"WHERE {column} IS NOT NULL AND NOT isnan({column}) GROUP BY ALL")
        out = np.zeros(len(edges) - 1)
        out[np.asarray(got["a"], np.int64)] = np.asarray(got["n"], float)
        return out


class DiskRows:
    """Rows as a family encodes them (tokens, or vectors), in a file on disk, read a batch at a
    time by DP-SGD (`training.engine` indexes `data[indices]` with each Poisson batch): a table
    too large to hold trains in the memory of a batch. Where the Poisson sampling draws its
    indices, and how many steps it takes, does not change. A batch comes back as the tensor the
    family's `encode` gives in memory: tokens as int64, vectors as float32."""

    def __init__(self, path: Path, shape: tuple[int, int], dtype, device="cpu"):
        self.path, self.dtype, self.device = path, np.dtype(dtype), device
        self._rows = np.memmap(path, self.dtype, "r", shape=shape)

    @property
    def shape(self) -> tuple[int, int]:
        return self._rows.shape

    def __len__(self) -> int:
        return self._rows.shape[0]

    def to(self, device) -> "DiskRows":
        """Where the batches go (the file stays where it is)."""
        return DiskRows(self.path, self.shape, self.dtype, device)

    def __getitem__(self, indices):
        import torch
        at = np.asarray(indices.cpu() if hasattr(indices, "cpu") else indices, dtype=np.int64)
        kind = np.int64 if np.issubdtype(self.dtype, np.integer) else np.float32
        return torch.from_numpy(self._rows[at].astype(kind)).to(self.device)


def _scale(spec) -> tuple:
    """What of a numeric column's public scale validation holds its values to."""
    return (spec.lower, spec.upper, spec.values, spec.points)


class TableStore(Counting):
    """A private table's validated rows in an embedded DuckDB database, for counting."""
    _view = "rows"

    def __init__(self, schema: Schema, folder: str | os.PathLike | None = None,
                 memory_mb: int = MEMORY_MB, threads: int | None = None):
        import duckdb
        self.schema = schema
        self.report: ValidationReport | None = None
        self.path: Path | None = None  # from_file's, from_batches'
        self.batch_rows = BATCH_ROWS
        self._dir = Path(tempfile.mkdtemp(prefix=PREFIX, dir=folder))  # 0700
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._dir, True)
        (self._dir / "owner").write_text(f"{os.getpid()} {_started(os.getpid())}")
        _remove_orphans(self._dir.parent)
        self.con = duckdb.connect(str(self._dir / "rows.duckdb"), config={
            "memory_limit": f"{int(memory_mb)}MB", "temp_directory": str(self._dir / "spill"),
            "threads": int(threads or min(2, os.cpu_count() or 1)),
            "preserve_insertion_order": False})
        self.con.execute(f"CREATE TABLE rows ({stored_types(schema)})")

    @classmethod
    def from_file(cls, path: str | os.PathLike, schema: Schema, batch_rows: int = BATCH_ROWS,
                  **options) -> "TableStore":
        """The rows of a CSV or Parquet file of any size, read and validated a batch at a time;
        `report` is the whole table's validation report. SchemaError, with nothing kept, where the
        whole table would be refused."""
        return cls.from_batches(read_batches(path, schema, batch_rows), schema, path, batch_rows,
                                **options)

    @classmethod
    def from_batches(cls, batches, schema: Schema, path: str | os.PathLike | None = None,
                     batch_rows: int = BATCH_ROWS, **options) -> "TableStore":
        """The rows of `batches` (a file's, as `read_batches` reads them; some of them, where a
        job keeps rows aside for its review: runs.file_runs), validated a batch at a time;
        `path`: the file they are read from, which the budget book reads again."""
        store = cls(schema, **options)
        store.path, store.batch_rows = (Path(path) if path else None), batch_rows
        try:
            validated = ValidatedBatches(batches, schema)
            for batch in validated:
                store.append(batch)
            store.report = validated.report
        except BaseException:
            store.close()
            raise
        return store

    def append(self, table: pd.DataFrame) -> None:
        """Validated rows (schema.validate_table's canonical form) added to the store."""
        self.con.register("batch", stored_form(table, self.schema))
        try:
            self._run("INSERT INTO rows SELECT * FROM batch")
        finally:
            self.con.unregister("batch")

    def _query(self, sql: str) -> dict[str, np.ndarray]:
        return self._run(sql).fetchnumpy()

    def held_to(self, schema: Schema) -> ValidationReport:
        """`Counting.held_to`, a batch at a time."""
        report = copy.deepcopy(self.report)
        last = int(self._query("SELECT max(rowid) AS r FROM rows")["r"][0])
        for spec in self._rescaled(schema):
            column, rep = self._column(spec.name), report.columns[spec.name]
            self._run("CREATE OR REPLACE TEMP TABLE held (rid BIGINT, v DOUBLE)")
            for start in range(0, last + 1, BATCH_ROWS):
                got = self._query(f"SELECT rowid AS rid, {column} AS v FROM rows WHERE rowid >= "
                                  f"{start} AND rowid < {start + BATCH_ROWS}")
                values = np.asarray(np.ma.filled(got["v"].astype(float), np.nan), float)
                new = held_to_scale(spec, values, np.isnan(values), rep)
                self.con.register("part", pd.DataFrame({"rid": got["rid"], "v": new}))
                try:
                    self._run("INSERT INTO held SELECT * FROM part")
                finally:
                    self.con.unregister("part")
            self._run(f"UPDATE rows SET {column} = held.v FROM held WHERE rows.rowid = held.rid")
            self._run("DROP TABLE held")
        self.schema, self.report = schema, report
        return report

    def token_rows(self, encoder: TokenEncoder) -> DiskRows:
        """Each row's tokens (`TokenEncoder.encode`: a column's offset and the row's cell), written
        to a file in the store's folder a batch at a time."""
        width = len(encoder.codecs)
        dtype = np.int16 if encoder.vocab_size < 2 ** 15 else np.int32
        n = len(self)
        path = self._dir / f"tokens-{encoder.n_bins}-{width}-{n}.bin"
        rows = np.memmap(path, dtype, "w+", shape=(n, width))
        tokens = ", ".join(f"({cell_sql(self._column(c.spec.name), c)}) + {c.offset} AS t{j}"
                           for j, c in enumerate(encoder.codecs))
        at = 0
        with self._failing():
            for batch in self.con.sql(f"SELECT {tokens} FROM rows").to_arrow_reader(BATCH_ROWS):
                block = np.column_stack([batch.column(j).to_numpy() for j in range(width)])
                rows[at:at + len(block)] = block
                at += len(block)
        rows.flush()
        del rows
        return DiskRows(path, (n, width), dtype)

    def frames(self, rows: int = BATCH_ROWS):
        """The stored rows, `rows` at a time, in validation's canonical form (`canonical_form`):
        what a family's own encoder reads."""
        with self._failing():
            for batch in self.con.sql("SELECT * FROM rows").to_arrow_reader(rows):
                yield canonical_form(batch.to_pandas(), self.schema)

    def sample(self, rows: int) -> pd.DataFrame:
        """A uniform random sample of at most `rows` stored rows in canonical form: the steward's
        own review of a table too large to read whole (never a model's or a release's input)."""
        with self._failing():
            got = self.con.sql(f"SELECT * FROM rows USING SAMPLE reservoir({int(rows)} ROWS)")
            return canonical_form(got.df(), self.schema)

    def encoded_rows(self, encode, width: int, dtype, name: str) -> DiskRows:
        """Each row as `encode` (a family's encoder: a canonical frame to an array of `width`
        columns) writes it, into a file in the store's folder a batch at a time."""
        n = len(self)
        path = self._dir / f"{name}-{width}-{n}.bin"
        rows = np.memmap(path, dtype, "w+", shape=(n, width))
        at = 0
        for frame in self.frames():
            block = encode(frame)
            rows[at:at + len(block)] = block
            at += len(block)
        rows.flush()
        del rows
        return DiskRows(path, (n, width), dtype)

    def _run(self, sql: str):
        """`sql` run; OSError in one line where DuckDB fails (a full disk, its folder gone)."""
        with self._failing():
            return self.con.execute(sql)

    @contextlib.contextmanager
    def _failing(self):
        import duckdb
        try:
            yield
        except duckdb.Error as e:
            raise OSError(f"the counting engine's database in {self._dir} failed: "
                          f"{str(e).splitlines()[0]}") from None

    def close(self) -> None:
        """The database closed and its folder deleted."""
        try:
            self.con.close()
        finally:
            self._cleanup()

    def __enter__(self) -> "TableStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
