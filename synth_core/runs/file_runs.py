"""A background job on a table too large to hold (issue 62): the job names the table's file
(`schema.batches.TableFile`) instead of copying its rows into the run, and the worker reads it a
batch at a time into the counting engine (`encoding.engine.TableStore`) and fits from there.

What a job on rows in memory does up front (runs.jobs.split_holdout) is done here as the file is
read: each row is kept aside for the review with the request's share (a coin per row, as
`split_holdout` draws from the request's seed), validated and written to the run's private
holdout file, and never trained on. The run's private "train" file then holds a uniform random
sample of the training rows, for the steward's own review only (at most REVIEW_ROWS): nothing
else reads it.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

from ..encoding.engine import TableStore
from ..files import atomic_output
from ..schema import Schema, SchemaError, validate_table
from ..schema.batches import TableFile, read_batches
from .rundir import RunDir

# the training rows the steward's review reads (the review reads at most a million of a table)
REVIEW_ROWS = 1_000_000


def source_of(request: dict) -> TableFile | None:
    """The file a job's request names as its table, None for a job whose rows are in the run."""
    source = request.get("source")
    if not source:
        return None
    rows = int(source.get("batch_rows") or 0) or TableFile.batch_rows
    return TableFile(Path(source["path"]), rows)


def source_fields(table: TableFile) -> dict:
    """What a job's request records of the file it reads (its path, resolved, and its batch)."""
    return {"source": {"path": str(Path(table.path).resolve()), "batch_rows": table.batch_rows}}


class _Aside:
    """Rows kept aside for the review, validated as the review reads them and written to the run's
    private holdout file a batch at a time (owner-only; in place only once all are written)."""

    def __init__(self, schema: Schema, path: Path):
        import pyarrow as pa
        self.schema, self.path, self.raw = schema, path, 0
        self.types = pa.schema([(c.name, pa.float64() if c.is_numeric else pa.string())
                                for c in schema.columns])
        self._output, self._writer = None, None

    def add(self, raw: pd.DataFrame) -> None:
        self.raw += len(raw)
        if not len(raw):
            return
        import pyarrow as pa
        import pyarrow.parquet as pq
        try:
            rows, _ = validate_table(raw.reset_index(drop=True), self.schema)
        except SchemaError:
            return  # every row aside broke a rule: the table's refusals are training's to make
        frame = pd.DataFrame({c.name: (pd.to_numeric(rows[c.name]).astype(float) if c.is_numeric
                                       else rows[c.name].astype(object))
                              for c in self.schema.columns})
        if self._writer is None:
            self._output = atomic_output(self.path, "wb", make_parent=False, private=True)
            self._writer = pq.ParquetWriter(self._output.__enter__(), self.types)
        self._writer.write_table(pa.Table.from_pandas(frame, schema=self.types,
                                                      preserve_index=False))

    def close(self, failed: BaseException | None = None) -> None:
        """The file put in place; nothing of it where the read failed."""
        if self._writer is not None:
            self._writer.close()
            self._output.__exit__(*((type(failed), failed, None) if failed else (None,) * 3))


def _split(batches, share: float, seed: int | None, aside: _Aside) -> Iterator[pd.DataFrame]:
    """Each batch's rows for training; those a coin keeps aside (with chance `share`, from the
    request's seed as `split_holdout` draws) go to `aside`."""
    rng = np.random.default_rng(seed)
    for batch in batches:
        out = rng.random(len(batch)) < share if share > 0 else np.zeros(len(batch), bool)
        aside.add(batch.loc[out])
        yield batch.loc[~out].reset_index(drop=True)


def store_of(run: RunDir, table: TableFile, schema: Schema, share: float, seed: int | None
             ) -> tuple[TableStore, Schema]:
    """The job's table read into the engine, its holdout written, and a sample of its training
    rows for the review; the schema with the training rows' count where the table's is public.
    The run's request records the rows it trained on and kept aside."""
    run.private_dir.mkdir(mode=0o700, exist_ok=True)
    aside = _Aside(schema, run.private_path("holdout"))
    try:
        store = TableStore.from_batches(
            _split(read_batches(table.path, schema, table.batch_rows), share, seed, aside),
            schema, table.path, table.batch_rows, folder=run.private_dir)
    except BaseException as e:
        aside.close(e)
        raise
    aside.close()
    try:
        read = len(store) + store.report.dropped_for_rules  # the training rows, as read
        if schema.rows is not None and schema.rows != read + aside.raw:
            raise SchemaError(f"the schema declares {schema.rows} rows as public, but the table "
                              f"has {read + aside.raw}: correct the schema's count, or remove it "
                              "to pay for a noisy count instead")
        if schema.rows is not None:  # the training rows' count follows from the public one
            schema = dataclasses.replace(schema, rows=read)
        with atomic_output(run.private_path("train"), "wb", make_parent=False,
                           private=True) as f:
            store.sample(REVIEW_ROWS).to_parquet(f, index=False)
        run.write_request({**run.request(), "rows": read, "holdout_rows": aside.raw})
    except BaseException:
        store.close()
        raise
    return store, schema
