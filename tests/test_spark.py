"""Issue 62 item 5: where the table lives in a cluster, a `SparkTable` (Spark in local mode, one
session for the module) counts what the embedded engine counts, and AIM fits it through
`api.fit` as it fits a file: its DP bounds counted and its rows clipped in the executors as
validation clips the table read whole, its budget drawn from the account the same rows have in
the budget book whichever way they are read, and the run sampled and reloaded. A family that
reads the rows themselves is refused before anything is spent."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from synth_core import api
from synth_core.demo import demo_schema, demo_table
from synth_core.encoding.engine import TableStore
from synth_core.privacy.measurements import (QUANTILE_CELLS, _exact_counts, measured_marginals,
                                             quantile_columns)
from synth_core.privacy.table_budget import TableBudgets
from synth_core.request import FitRequest
from synth_core.schema import Schema, SchemaError, validate_table
from test_engine import _whole, messy  # noqa: F401 - messy: the steward's file, a fixture

UNBOUNDED = ("age", "hours-per-week")
CATEGORIES = ("sex", "income")


@pytest.fixture(scope="module")
def spark():
    """A local Spark session for the module, or a skip saying what is missing (pyspark:
    requirements-cluster.txt; Spark runs on Java)."""
    pytest.importorskip("pyspark", reason="pyspark is not installed "
                        "(pip install -r requirements-cluster.txt)")
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java, and none is installed")
    from pyspark.sql import SparkSession
    root = str(Path(__file__).resolve().parents[1])
    session = (SparkSession.builder.master("local[2]").appName("synth-core-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.executorEnv.PYTHONPATH", root)
               .config("spark.driver.extraJavaOptions",
                       "-Dlog4j2.level=ERROR -XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .getOrCreate())
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def cluster(spark, tmp_path_factory):
    """The demo table as a Parquet file Spark reads, with a schema that leaves two numbers'
    bounds to be found with DP."""
    folder = tmp_path_factory.mktemp("spark-fit")
    parquet = folder / "census.parquet"
    spec = demo_schema().to_dict()
    spec["columns"] = [c for c in spec["columns"] if c["name"] in (*UNBOUNDED, *CATEGORIES)]
    for column in spec["columns"]:
        if column["name"] in UNBOUNDED:
            column.pop("lower", None), column.pop("upper", None)
    schema = Schema.from_dict(spec)  # four columns: AIM's rounds quick, every count still asked
    demo_table(800)[schema.names].to_parquet(parquet, index=False)
    return spark, parquet, schema, pd.read_parquet(parquet)


def test_the_cluster_knows_the_table_as_read_whole_and_holds_its_rows_to_new_bounds(cluster):
    """The pieces a fit in Spark adds, each against the table read whole: the budget book's
    identity computed in the executors (`table_identity.in_place`) is the whole table's
    fingerprint and sketch; rows held to bounds a run found (`SparkTable.held_to`) are clipped
    and counted as `validate_table` clips and counts; a family that reads the rows is refused in
    one line (before anything is reserved: `api.fit` asks it first)."""
    spark, parquet, schema, whole = cluster
    from synth_core.encoding.spark import SparkTable
    from synth_core.privacy import table_identity as identity
    key = b"the book's key, for this test...."
    hashes = identity.row_hashes([("table", whole, schema.names)], key)
    spec = schema.to_dict()
    for column in spec["columns"]:
        if column["name"] in UNBOUNDED:
            column.update(lower=25, upper=60)  # as DP bounds would be: some rows beyond them
    bounded = Schema.from_dict(spec)
    _, expected = validate_table(whole, bounded)
    with SparkTable.from_path(spark, parquet, schema) as table:
        there = identity.in_place(table, schema.names, key)
        assert there.fingerprint == identity.fingerprint(hashes, key)
        assert there.sketch == identity.sketch(hashes)
        report = table.held_to(bounded)
        for name in UNBOUNDED:
            mine, theirs = report.columns[name], expected.columns[name]
            assert (mine.clipped_low, mine.clipped_high) == (theirs.clipped_low,
                                                             theirs.clipped_high)
            assert mine.clipped_low + mine.clipped_high > 0
            got = table._query(f"SELECT min({table._column(name)}) AS lo, "
                               f"max({table._column(name)}) AS hi FROM {table._view}")
            assert 25 <= got["lo"][0] <= got["hi"][0] <= 60
        # what `api.fit`'s admission asks first (the slow test below goes through `api.fit`)
        with pytest.raises(SchemaError, match="cluster") as refused:
            FitRequest(model="dp-tbart", epsilon=1.0).engine_families(bounded, table.answers)
        assert "\n" not in str(refused.value) and "aim" in str(refused.value)
        assert FitRequest(model="auto").engine_families(bounded, table.answers) == ("aim",)


@pytest.mark.slow  # the whole path (about 20 s); its pieces are the test above and test_engine's
def test_aim_fits_a_table_that_lives_in_a_cluster(cluster, tmp_path, monkeypatch):
    spark, parquet, schema, whole = cluster
    from synth_core.encoding.spark import SparkTable
    monkeypatch.setenv("SYNTH_WORKBENCH_HOME", str(tmp_path / "home"))
    book = TableBudgets(tmp_path / "home" / "budgets.json")
    here = book.identify(whole, schema)  # the table read whole: a table the book has not seen
    assert here.account is None
    with SparkTable.from_path(spark, parquet, schema) as table:
        fitted = api.fit(table, schema, FitRequest(model="aim", preset="tiny", epsilon=1.0,
                                                   bounds_epsilon=0.3, table_epsilon=3.0),
                         run_dir=tmp_path / "run")
        spent = fitted.ledger.spent_epsilon
        with pytest.raises(SchemaError, match="cluster"):  # refused before anything is reserved
            api.fit(table, schema, FitRequest(model="dp-tbart", epsilon=1.0, bounds_epsilon=0.3),
                    run_dir=tmp_path / "refused")
        assert not (tmp_path / "refused").exists()
        assert spent <= 1.0 + 1e-9
        kinds = [e["kind"] for e in fitted.ledger.to_dict()["entries"]]
        assert "dp-bounds" in kinds
        # clipped in the executors as validation clips the table read whole to the run's bounds
        bounded = fitted.schema
        _, expected = validate_table(whole, bounded)
        for name in UNBOUNDED:
            assert bounded[name].has_bounds
            mine, theirs = fitted.validation.columns[name], expected.columns[name]
            assert (mine.clipped_low, mine.clipped_high) == (theirs.clipped_low,
                                                             theirs.clipped_high)
            got = table._query(f"SELECT min({table._column(name)}) AS lo, "
                               f"max({table._column(name)}) AS hi FROM {table._view}")
            assert bounded[name].lower <= got["lo"][0] <= got["hi"][0] <= bounded[name].upper
    # the same rows are the same table to the book, hashed in the cluster or read whole here: the
    # fit's account is under the whole table's fingerprint, with its sketch, charged what it spent
    assert book.file.sketches()[here.fingerprint]["sketch"] == here.sketch
    account = book.account(book.identify(whole, schema).account)
    assert account.spent_epsilon == pytest.approx(spent)
    assert account.total_epsilon == 3.0
    # the run samples, and so does the model reloaded from its folder
    drawn, _ = api.sample(tmp_path / "run", 300, seed=1)
    assert len(drawn) == 300 and list(drawn.columns) == schema.names
    for name in UNBOUNDED:
        values = drawn[name].dropna()
        assert values.between(bounded[name].lower, bounded[name].upper).all()
    again = api.load_model(tmp_path / "run").sample(50, seed=2)
    assert len(again) == 50 and not again.isna().all().any()


def test_the_engine_counts_many_cliques_in_one_query_as_one_at_a_time(cluster):
    """`Counting.counts_of` (GROUPING SETS, a query for many cliques: AIM's hundreds, each a job
    a cluster schedules) gives each clique's counts as `counts` gives them alone."""
    spark, parquet, schema, _ = cluster
    from synth_core.encoding import TokenEncoder
    from synth_core.encoding.engine import TableStore
    from synth_core.encoding.spark import SparkTable
    spec = demo_schema().to_dict()
    spec["columns"] = [c for c in spec["columns"] if c["name"] in schema.names]
    bounded = Schema.from_dict(spec)
    encoder = TokenEncoder(bounded, 8)
    names = bounded.names
    cliques = [(names[0],), (names[1], names[2]), (names[3], names[0], names[1]),
               (names[2], names[1]), (names[-1], names[-2])]
    with SparkTable.from_path(spark, parquet, bounded) as table, \
            TableStore.from_file(parquet, bounded) as store:
        for engine in (table, store):
            many = engine.counts_of(encoder, cliques, at_once=3)
            assert list(many) == cliques
            for clique in cliques:
                alone, shape = engine.counts(encoder, clique)
                assert many[clique][1] == shape
                np.testing.assert_array_equal(many[clique][0], alone, err_msg=str(clique))


def test_spark_counts_what_the_embedded_engine_counts(spark, messy):
    """`SparkTable` validates the batches in Spark's executors with the workbench's own code and
    answers the same SQL: the same rows, report, marginal counts and histograms as the table in
    memory; a table the whole of which is refused is refused the same."""
    schema, _, parquet = messy
    from synth_core.encoding.spark import SparkTable
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
