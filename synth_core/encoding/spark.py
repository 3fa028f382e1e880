"""The counts of `engine.Counting` where the table lives in a cluster: Spark (PySpark) validates the
table's batches in its executors with the workbench's own code (`schema.batches.validate_batch`,
through `mapInPandas`), keeps them in `engine.stored_form`, and answers the same SQL the embedded
engine answers. Local mode in the tests; the same code on a cluster (docs/cluster.md).

What comes back to the driver (the steward's process, where the noise is added) is what a run
on one machine computes there too: the validation's counts, each count's cells, and for the
budget book's identity of the table the keyed hash of each row (sorted, a chunk at a time) and
the smallest of them (its sketch); never a row.
"""
from __future__ import annotations

import copy
import uuid
from typing import Iterator

import numpy as np
import pandas as pd
from pandas.api.types import is_integer_dtype

from ..schema import Schema
from ..schema.batches import Counted, validate_batch
from ..schema.tables import ColumnReport, ValidationReport, held_to_scale
from .engine import Counting, stored_form, stored_types

# unsigned 64-bit keys sorted as Spark's signed longs: the top bit flipped
_SIGN = np.uint64(1 << 63)


def _with_note(rows: pd.DataFrame, counted: Counted):
    """A batch of stored rows, then one row that carries what was counted (`_counted`)."""
    note = pd.DataFrame({c: pd.Series([None], dtype="Int64" if is_integer_dtype(rows[c])
                                      else rows[c].dtype) for c in rows.columns})
    yield rows.assign(_counted=pd.Series([None] * len(rows), dtype=object))
    yield note.assign(_counted=[counted.to_json()])


def _validated(schema: Schema):
    """The function each executor runs on its batches: the rows validated and held to the rules in
    stored form, each batch followed by what it counted."""
    def validate(batches):
        for raw in batches:
            if len(raw):
                clean, counted = validate_batch(raw, schema)
                yield from _with_note(stored_form(clean, schema), counted)
    return validate


def _held(specs: list[tuple[int, object]]):
    """The function each executor runs on stored batches to hold them to a run's new scales
    (`held_to_scale`), each batch followed by what that changed."""
    def hold(batches):
        for rows in batches:
            reports = {spec.name: ColumnReport() for _, spec in specs}
            for i, spec in specs:
                values = pd.to_numeric(rows[f"c{i}"]).to_numpy(float)
                rows[f"c{i}"] = held_to_scale(spec, values, np.isnan(values), reports[spec.name])
            yield from _with_note(rows, Counted(columns=reports))
    return hold


class SparkTable(Counting):
    """A table Spark holds (a DataFrame of its rows as the cluster stores them), validated against
    the public schema in the executors and counted there. `report` is the whole table's
    validation report; SchemaError where `validate_table` would refuse the whole table. It answers
    counts only: the rows stay in the cluster (a family that reads rows trains from a file)."""
    answers = frozenset({"counts"})

    def __init__(self, frame, schema: Schema):
        self.schema, self.frame = schema, frame  # the rows as read: the budget book's identity
        self.spark = frame.sparkSession
        self._done, total = self._counted(frame.mapInPandas(
            _validated(schema), f"{stored_types(schema, 'INT')}, _counted STRING"))
        self.report = total.report(schema)
        self._show()

    def _counted(self, done) -> tuple[object, Counted]:
        """`done` (stored rows and notes of what was counted) kept in the cluster, and its notes
        added up on the driver."""
        done = done.persist()
        try:
            total = Counted()
            for row in done.where("_counted IS NOT NULL").select("_counted").collect():
                total = total + Counted.from_json(row[0])
        except BaseException:
            done.unpersist()
            raise
        return done, total

    def _show(self) -> None:
        """The stored rows as the view the counts' SQL reads."""
        self._view = f"synth_rows_{uuid.uuid4().hex}"
        self._done.where("_counted IS NULL").drop("_counted").createOrReplaceTempView(self._view)

    def held_to(self, schema: Schema) -> ValidationReport:
        """`Counting.held_to`, in the executors."""
        specs = [(schema.names.index(spec.name), spec) for spec in self._rescaled(schema)]
        if specs:
            rows = self.spark.table(self._view)
            done, changed = self._counted(rows.mapInPandas(
                _held(specs), f"{stored_types(schema, 'INT')}, _counted STRING"))
            old, self._done = (self._view, self._done), done
            self.spark.catalog.dropTempView(old[0])
            old[1].unpersist()
            self._show()
            self.report = copy.deepcopy(self.report)
            self.report.columns = (Counted(columns=self.report.columns) + changed).columns
        self.schema = schema
        return self.report

    def each_part(self, summarise) -> list[str]:
        """`Counting.each_part`: `summarise` run in the executors on each partition of the rows
        as read."""
        def run(batches):
            for text in summarise(batches):
                yield pd.DataFrame({"s": [text]})
        return [row[0] for row in self.frame.mapInPandas(run, "s STRING").collect()]

    def sorted_keys(self, keys, chunk: int = 1 << 20) -> Iterator[np.ndarray]:
        """What `keys` (a partition's batches of rows as read to arrays of uint64) gives for the
        whole table, sorted by Spark and read on the driver `chunk` at a time in ascending order:
        the budget book's fingerprint of a table with no file here (a keyed hash per row, never a
        row)."""
        def signed(batches):
            for found in keys(batches):
                yield pd.DataFrame({"k": (np.asarray(found, np.uint64) ^ _SIGN).view(np.int64)})

        def packed(batches):
            for part in batches:
                values = part["k"].to_numpy(np.int64).view(np.uint64) ^ _SIGN
                for at in range(0, len(values), chunk):
                    yield pd.DataFrame({"b": [values[at:at + chunk].astype("<u8").tobytes()]})
        ordered = self.frame.mapInPandas(signed, "k LONG").orderBy("k")
        for row in ordered.mapInPandas(packed, "b BINARY").toLocalIterator():
            yield np.frombuffer(row[0], "<u8").astype(np.uint64)

    @classmethod
    def from_path(cls, spark, path: str, schema: Schema) -> "SparkTable":
        """A Parquet file or folder Spark reads where it lives (a CSV there: read it with the
        options its writer used, `spark.read.csv(...)`, and give the DataFrame)."""
        return cls(spark.read.parquet(str(path)), schema)

    def _query(self, sql: str) -> dict[str, np.ndarray]:
        got = self.spark.sql(sql).toPandas()
        return {c: got[c].to_numpy() for c in got.columns}

    def close(self) -> None:
        """The cluster's copy of the validated rows released."""
        self.spark.catalog.dropTempView(self._view)
        self._done.unpersist()

    def __enter__(self) -> "SparkTable":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
