"""The counts of `engine.Counting` where the table lives in a cluster: Spark (PySpark) validates the
table's batches in its executors with the workbench's own code (`schema.batches.validate_batch`,
through `mapInPandas`), keeps them in `engine.stored_form`, and answers the same SQL the embedded
engine answers. Local mode in the tests; the same code on a cluster (docs/cluster.md).

What comes back to the driver (the steward's process, where the noise is added) is what a run
on one machine computes there too: the validation's counts and each count's cells, never a row.
"""
from __future__ import annotations

import uuid

import numpy as np
import pandas as pd

from ..schema import Schema
from ..schema.batches import Counted, validate_batch
from .engine import Counting, stored_form, stored_types


def _validated(schema: Schema):
    """The function each executor runs on its batches: the rows validated and held to the rules in
    stored form, and after each batch one row that carries what it counted (`_counted`)."""
    def validate(batches):
        for raw in batches:
            if not len(raw):
                continue
            clean, counted = validate_batch(raw, schema)
            rows = stored_form(clean, schema)
            note = pd.DataFrame({c: pd.Series([None], dtype=rows[c].dtype) for c in rows.columns})
            yield rows.assign(_counted=pd.Series([None] * len(rows), dtype=object))
            yield note.assign(_counted=[counted.to_json()])
    return validate


class SparkTable(Counting):
    """A table Spark holds (a DataFrame of its rows as the cluster stores them), validated against
    the public schema in the executors and counted there. `report` is the whole table's
    validation report; SchemaError where `validate_table` would refuse the whole table."""

    def __init__(self, frame, schema: Schema):
        self.schema = schema
        self.spark = frame.sparkSession
        done = frame.mapInPandas(_validated(schema),
                                 f"{stored_types(schema, 'INT')}, _counted STRING").persist()
        self._done = done
        try:
            total = Counted()
            for row in done.where("_counted IS NOT NULL").select("_counted").collect():
                total = total + Counted.from_json(row[0])
            self.report = total.report(schema)
        except BaseException:
            done.unpersist()
            raise
        self._view = f"synth_rows_{uuid.uuid4().hex}"
        done.where("_counted IS NULL").drop("_counted").createOrReplaceTempView(self._view)

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
