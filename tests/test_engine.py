"""Issue 62 item 2: a table counted by the embedded engine (DuckDB, `encoding.engine.TableStore`),
read and validated a batch at a time, gives the numbers the whole table in memory gives: the same
rows, the same validation report, the same refusals, the same marginal and histogram counts; and
what it keeps on disk is private and goes when it closes."""
from __future__ import annotations

import os
import shutil
import stat
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth_core.encoding import TokenEncoder
from synth_core.encoding.engine import TableStore
from synth_core.privacy import PrivacyLedger
from synth_core.privacy.measurements import (QUANTILE_CELLS, _exact_counts, measure_marginals,
                                             measure_quantiles, measured_marginals, noisy_count,
                                             quantile_columns)
from synth_core.schema import Schema, SchemaError, draft_schema, read_table, validate_table
from test_scale_paths import _messy

MARKERS = ["NA", "n/a"]


@pytest.fixture(scope="module")
def messy(tmp_path_factory):
    """A steward's file as CSV and Parquet, and its draft confirmed with two rules added (one that
    drops rows) and a value set: dates kept as years, thousands separators, percentages, codes,
    missing markers, categories outside the list mapped to an unknown one."""
    folder = tmp_path_factory.mktemp("engine")
    # its column of dates 4% of which are text is drafted a column of years that then refuses
    # the text (seen, left for now): left out here
    table = _messy(1_500).drop(columns="mostly_dates")
    table.loc[::97, "grade"] = "zz-not-listed"
    csv = folder / "messy.csv"
    table.to_csv(csv, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        drafted = draft_schema(read_table(csv, missing_markers=MARKERS), missing_markers=MARKERS)
    spec = drafted.to_dict()
    for column in spec["columns"]:
        if column["name"] == "grade":
            column["categories"] = list("ABCDEFGH")
            column["unknown"] = "H"
    spec["rules"] = ["amount >= 150000", "not (smoker == 'no' and grade == 'A') or code >= 0"]
    schema = Schema.from_dict(spec)
    parquet = folder / "messy.parquet"
    read_table(csv, schema).to_parquet(parquet)
    return schema, csv, parquet


def _whole(path, schema):
    return validate_table(read_table(path, schema), schema)


@pytest.mark.parametrize("which", ["csv", "parquet"])
def test_the_engine_counts_what_the_whole_table_counts(messy, which):
    schema, csv, parquet = messy
    path = csv if which == "csv" else parquet
    whole, report = _whole(path, schema)
    assert report.dropped_for_rules > 0 and report.columns["grade"].mapped_unknown > 0
    with TableStore.from_file(path, schema, batch_rows=137) as store:  # eleven batches
        assert len(store) == len(whole)
        assert store.report.to_dict() == report.to_dict()
        modelled = schema.modelled()
        chosen = measured_marginals(modelled)
        assert len(chosen) > len(modelled.columns)  # pairs and fine bins too
        for (columns, _), mine, theirs in zip(chosen, _exact_counts(store, modelled, chosen),
                                              _exact_counts(whole, modelled, chosen)):
            assert mine[1] == theirs[1], columns
            np.testing.assert_array_equal(mine[0], theirs[0], err_msg=str(columns))
        numeric = quantile_columns(schema)
        assert numeric
        for name in numeric:
            cells = schema[name].edges(QUANTILE_CELLS, quantile=False)
            values = whole[name].to_numpy(float)
            # every present value counted, those at the bounds too
            values = np.clip(values[~np.isnan(values)], cells[0], cells[-1])
            counted = store.histogram(name, cells)
            assert counted.sum() == len(values)
            np.testing.assert_array_equal(counted, np.histogram(values, bins=cells)[0])


def test_every_cell_of_every_column_counts_as_the_encoder_places_it(messy):
    """Each column alone at many bin counts (edges at values, point masses, missing cells)."""
    schema, csv, _ = messy
    whole, _ = _whole(csv, schema)
    modelled = schema.modelled()
    with TableStore.from_file(csv, schema, batch_rows=500) as store:
        for bins in (2, 7, 20, 100):
            encoder = TokenEncoder(modelled, bins)
            for codec in encoder.codecs:
                cells, (size,) = encoder.cells(whole, (codec.spec.name,))
                counts, shape = store.counts(encoder, (codec.spec.name,))
                assert shape == (size,)
                np.testing.assert_array_equal(counts, np.bincount(cells, minlength=size))


def test_the_engine_refuses_what_the_whole_table_is_refused_for(messy, tmp_path):
    schema, csv, _ = messy
    spec = schema.to_dict()
    spec["rules"] = ["amount >= 2900000"]  # broken by most rows
    strict = Schema.from_dict(spec)
    with pytest.raises(SchemaError) as whole:
        _whole(csv, strict)
    with pytest.raises(SchemaError) as batched:
        TableStore.from_file(csv, strict, batch_rows=100)
    assert str(batched.value) == str(whole.value)
    assert "is broken by" in str(batched.value)
    # a file that is not there, and a folder, in one line each
    with pytest.raises(SchemaError, match="no such file"):
        TableStore.from_file(tmp_path / "gone.csv", schema)
    with pytest.raises(SchemaError, match="folder"):
        TableStore.from_file(tmp_path, schema)
    header_only = tmp_path / "header.csv"
    header_only.write_text(",".join(c.name for c in schema.columns) + "\n")
    with pytest.raises(SchemaError, match="header but no rows"):
        TableStore.from_file(header_only, schema)


def test_a_run_measures_from_the_engine_into_its_ledger(messy):
    """The noisy count, the quantiles and the marginals from the engine: recorded in the ledger
    like the in-memory ones, noisy (two measurements differ), near the exact counts."""
    schema, csv, _ = messy
    whole, _ = _whole(csv, schema)
    with TableStore.from_file(csv, schema) as store:
        ledger = PrivacyLedger(3.0, 1e-5, None, rows_public=False)
        rows = noisy_count(len(store), 0.5, ledger)
        measured, _ = measure_quantiles(store, schema, 0.5, 1e-6, ledger)
        first, _ = measure_marginals(store, schema, 1.0, 1e-6, ledger, rows)
        second, _ = measure_marginals(store, schema, 1.0, 1e-6, PrivacyLedger(3.0, 1e-5, rows),
                                      rows)
    kinds = [entry["kind"] for entry in ledger.to_dict()["entries"]]
    assert kinds == ["noisy-count", "quantiles", "marginals"]
    assert any(measured[name].quantiles for name in quantile_columns(schema))
    modelled = schema.modelled()
    chosen = measured_marginals(modelled)
    exact = [counts for counts, _ in _exact_counts(whole, modelled, chosen)]
    assert len(exact) == len(first.marginals)
    for a, b, counts in zip(first.marginals, second.marginals, exact):
        assert a.columns == b.columns and not np.array_equal(a.counts, b.counts)
        assert np.abs(a.counts - counts).max() < 6 * first.noise_std


def test_the_engine_keeps_its_rows_owner_only_and_deletes_them_on_close(messy):
    schema, csv, _ = messy
    store = TableStore.from_file(csv, schema)
    folder = store._dir
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert any(folder.iterdir())
    store.close()
    assert not folder.exists()
    spec = schema.to_dict()
    spec["rules"] = ["amount >= 2900000"]
    stores = csv.parent / "stores"
    stores.mkdir()
    with pytest.raises(SchemaError):
        TableStore.from_file(csv, Schema.from_dict(spec), folder=stores)
    assert list(stores.iterdir()) == []  # a refused table leaves nothing behind


# --- the same counts on Spark (local mode): where the table lives in a cluster -------------------
def _spark():
    """A local Spark session, or a skip saying what is missing (pyspark: requirements-cluster.txt;
    Spark runs on Java)."""
    pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed "
                                  "(pip install -r requirements-cluster.txt)")
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java, and none is installed")
    from pyspark.sql import SparkSession
    root = str(Path(__file__).resolve().parents[1])
    return (SparkSession.builder.master("local[2]").appName("synth-core-tests")
            .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
            .config("spark.executorEnv.PYTHONPATH", root)
            .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
            .getOrCreate()), pyspark


def test_spark_counts_what_the_embedded_engine_counts(messy):
    """`SparkTable` validates the batches in Spark's executors with the workbench's own code and
    answers the same SQL: the same rows, report, marginal counts and histograms as the table in
    memory; a table the whole of which is refused is refused the same."""
    schema, _, parquet = messy
    spark, _ = _spark()
    from synth_core.encoding.spark import SparkTable
    try:
        whole, report = _whole(parquet, schema)
        with SparkTable.from_path(spark, parquet, schema) as table:
            assert len(table) == len(whole)
            assert table.report.to_dict() == report.to_dict()
            modelled = schema.modelled()
            chosen = measured_marginals(modelled)
            chosen = chosen[:3] + [c for c in chosen if len(c[0]) == 2][:2] + chosen[-1:]
            for (columns, _), mine, theirs in zip(chosen, _exact_counts(table, modelled, chosen),
                                                  _exact_counts(whole, modelled, chosen)):
                np.testing.assert_array_equal(mine[0], theirs[0], err_msg=str(columns))
            name = quantile_columns(schema)[0]
            cells = schema[name].edges(QUANTILE_CELLS, quantile=False)
            with TableStore.from_file(parquet, schema) as store:
                np.testing.assert_array_equal(table.histogram(name, cells),
                                              store.histogram(name, cells))
        spec = schema.to_dict()
        spec["rules"] = ["amount >= 2900000"]
        strict = Schema.from_dict(spec)
        with pytest.raises(SchemaError) as whole_refused:
            _whole(parquet, strict)
        with pytest.raises(SchemaError) as refused:
            SparkTable.from_path(spark, parquet, strict)
        assert str(refused.value) == str(whole_refused.value)
    finally:
        spark.stop()
