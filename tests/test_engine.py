"""Issue 62 item 2: a table counted by the embedded engine (DuckDB, `encoding.engine.TableStore`),
read and validated a batch at a time, gives the numbers the whole table in memory gives: the same
rows, the same validation report, the same refusals, the same marginal and histogram counts; and
what it keeps on disk is private and goes when it closes."""
from __future__ import annotations

import json
import os
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
    table = _messy(1_500)  # its column of dates 4% of which are words: those read as missing
    table.loc[::97, "grade"] = "zz-not-listed"
    # outside the schema, for the budget book's older forms: whole numbers with one blank (a
    # float read whole, whole numbers in most batches) and with one word (text read whole)
    table["extra"] = pd.array(np.arange(1_500) % 7, dtype="Int64")
    table.loc[1_000, "extra"] = pd.NA
    table["late_text"] = (np.arange(1_500) % 5).astype(str)
    table.loc[1_400, "late_text"] = "x"
    csv = folder / "messy.csv"
    table.to_csv(csv, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        drafted = draft_schema(read_table(csv, missing_markers=MARKERS), missing_markers=MARKERS)
    spec = drafted.to_dict()
    spec["columns"] = [c for c in spec["columns"] if c["name"] not in ("extra", "late_text")]
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
    # a store whose process died without closing it (SIGKILL) is removed by the next one
    import subprocess
    import sys
    code = (f"import os, sys; sys.path.insert(0, {str(Path(__file__).parents[1])!r}); "
            "from synth_core.demo import demo_schema; "
            "from synth_core.encoding.engine import TableStore; "
            f"s = TableStore(demo_schema(), folder={str(stores)!r}); os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    (orphan,) = stores.iterdir()
    with TableStore(schema, folder=stores) as mine:
        assert not orphan.exists() and mine._dir.exists()


@pytest.mark.parametrize("which", ["csv", "parquet"])
def test_the_budget_book_knows_a_table_read_in_batches_as_the_whole_table(messy, which, tmp_path):
    """The identity the budget book keys a table's budget on (its fingerprint, its sketch, the
    older forms an account is carried over from) is the whole table's when the table is read a
    batch at a time: a table fitted through the engine draws on the same budget."""
    from synth_core.privacy import table_identity as identity
    from synth_core.schema.batches import read_batches
    schema, csv, parquet = messy
    path = csv if which == "csv" else parquet
    key, markers = b"k" * 32, tuple(schema.missing_markers)
    whole = read_table(path, schema)
    hashes = identity.row_hashes([("table", whole, list(schema.names))], key, markers)
    found = identity.streamed(lambda text: read_batches(path, schema, 137, text),
                              list(schema.names), key, markers)
    assert found.fingerprint == identity.fingerprint(hashes, key)
    assert found.sketch == identity.sketch(hashes)
    assert found.v1 == identity.fingerprint_v1(whole, key)
    assert found.legacy == identity.legacy_fingerprint(whole)


# --- a fit through the engine ---------------------------------------------------------------------
def test_a_fit_through_the_engine_is_the_same_table_to_the_budget_book(tmp_path):
    """AIM (and auto, among the families that take such a table) fits a table the engine holds:
    the run's ledger and rows as a fit of the table read whole, the same account of the table's
    budget whichever way it is read; a family that reads rows in memory is refused before
    anything is spent."""
    from synth_core import api
    from synth_core.demo import demo_schema, demo_table
    from synth_core.privacy.table_budget import TableBudgets
    from synth_core.home import budgets_path
    from synth_core.request import FitRequest
    csv = tmp_path / "census.csv"
    demo_table(1_200).to_csv(csv, index=False)
    schema = demo_schema()
    with TableStore.from_file(csv, schema, batch_rows=250) as store:
        with pytest.raises(SchemaError, match="reads the rows themselves"):
            api.fit(store, schema, FitRequest(model="dp-llmtgen", epsilon=1.0,
                                              table_epsilon=3.0), run_dir=tmp_path / "refused")
        assert not (tmp_path / "refused").exists()
        result = api.fit(store, schema, FitRequest(model="auto", preset="tiny", epsilon=1.0,
                                                   table_epsilon=3.0), run_dir=tmp_path / "engine")
    assert result.model.family == "aim"
    kinds = [e["kind"] for e in result.ledger.to_dict()["entries"]]
    assert kinds[0] == "noisy-count" and result.ledger.spent_epsilon <= 1.0 + 1e-9
    assert abs(result.ledger.n_rows - 1_200) < 400
    book = TableBudgets(budgets_path())
    account = book.identify(read_table(csv, schema), schema).account
    assert account is not None and book.account(account).spent_epsilon == pytest.approx(1.0)
    # the same table read whole draws on the same account
    api.fit(read_table(csv, schema), schema, FitRequest(model="aim", preset="tiny", epsilon=0.5),
            run_dir=tmp_path / "whole")
    assert book.account(account).spent_epsilon == pytest.approx(1.5)
    drawn, _ = api.sample(tmp_path / "engine", 300, seed=1)
    assert len(drawn) == 300 and list(drawn.columns) == schema.names


LIMIT_GB = 5  # the processes' address space (RLIMIT_AS)


def _limited(gigabytes: float):
    def limit():
        import resource
        size = int(gigabytes * 1024 ** 3)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
    return limit


@pytest.mark.slow  # 70 s each: twenty million rows written, read, counted and fitted
@pytest.mark.parametrize("model", [["aim"], ["dp-tbart", "--epochs", "0.002", "--batch-size",
                                            "2048"]], ids=["aim", "dp-tbart"])
def test_the_cli_fits_a_parquet_file_larger_than_its_memory_limit(tmp_path, model):
    """Issue 62: `fit` on a Parquet file whose table, read whole, takes more memory than the
    process may have (RLIMIT_AS) goes through the engine by itself and completes, by AIM's
    counts or by DP-SGD reading its batches from disk; reading the table whole under the same
    limit fails."""
    import subprocess
    import sys
    import pyarrow as pa
    import pyarrow.parquet as pq
    from synth_core.demo import demo_schema, demo_table
    path, schema_path = tmp_path / "big.parquet", tmp_path / "big.schema.json"
    demo_schema().save(schema_path)
    part = pa.Table.from_pandas(demo_table(100_000), preserve_index=False)
    with pq.ParquetWriter(path, part.schema) as writer:
        for _ in range(200):  # twenty million rows (72 MB), written a part at a time
            writer.write_table(part)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "MALLOC_ARENA_MAX": "2", "OMP_NUM_THREADS": "2"}

    def limited(*argv: str):
        return subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env, text=True,
                              capture_output=True, timeout=900, preexec_fn=_limited(LIMIT_GB))
    done = limited("-m", "synth_core", "fit", "--data", str(path), "--schema", str(schema_path),
                   "--model", *model, "--preset", "tiny", "--epsilon", "1", "--public-table",
                   "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "a batch at a time" in done.stdout and "completed" in done.stdout
    whole = limited("-c", "from synth_core.schema import read_table, validate_table; "
                          "from synth_core.schema.linked import load_schema; "
                          f"s = load_schema({str(schema_path)!r}); "
                          f"validate_table(read_table({str(path)!r}, s), s)")
    assert whole.returncode != 0, whole.stderr[-500:]
    # Python's MemoryError, or pyarrow's: bad_alloc, or a string it could not wrap
    assert any(word in whole.stderr for word in ("MemoryError", "bad_alloc", "Wrapping")), \
        whole.stderr[-500:]


def _read_from_disk(tmp_path, monkeypatch, rows: int):
    """A demo table of `rows` rows as a CSV, its schema, the table read whole, and the sizes of
    the batches DP-SGD reads from the engine's disk (`DiskRows`), as they are read."""
    from synth_core.demo import demo_schema, demo_table
    from synth_core.encoding.engine import DiskRows
    csv = tmp_path / "census.csv"
    demo_table(rows).to_csv(csv, index=False)
    schema = demo_schema()
    read = []
    original = DiskRows.__getitem__
    monkeypatch.setattr(DiskRows, "__getitem__",
                        lambda self, at: read.append(len(at)) or original(self, at))
    return csv, schema, _whole(csv, schema)[0], read


def test_dp_sgd_reads_its_poisson_batches_from_the_engines_disk(tmp_path, monkeypatch):
    """DP-TBART on a table the engine holds (issue 62, item 3): its tokens are written to the
    engine's folder, the whole table's tokens row for row; each step reads its Poisson batch from
    there (batches of varying size); the plan's steps and ε are those of the table read whole."""
    from synth_core import api
    from synth_core.encoding.engine import DiskRows
    from synth_core.request import FitRequest
    csv, schema, whole, read = _read_from_disk(tmp_path, monkeypatch, 2_000)
    request = FitRequest(model="dp-tbart", preset="tiny", epsilon=1.0, public_table=True)
    with TableStore.from_file(csv, schema, batch_rows=300) as store:
        fitted = api.fit(store, schema, request, run_dir=tmp_path / "engine")
        tokens = fitted.model.encode(store)
        assert isinstance(tokens, DiskRows) and tokens.path.parent == store._dir
        mine = np.asarray(tokens._rows)
        theirs = fitted.model.encoder.encode(whole)
        np.testing.assert_array_equal(mine[np.lexsort(mine.T)], theirs[np.lexsort(theirs.T)])
    result = fitted.model.train_result
    assert result.steps_done == result.steps_planned > 10
    assert len(read) >= result.steps_done and len(set(read)) > 3  # Poisson: sizes vary
    entry = [e for e in fitted.ledger.to_dict()["entries"] if e["kind"] == "dp-sgd"][0]
    assert fitted.ledger.spent_epsilon <= 1.0 + 1e-9
    # the plan of the table read whole: the tiny size's batch of 64 over the released count, for
    # its 2 epochs
    plan = fitted.model.plan
    assert entry["details"]["sample_rate"] == pytest.approx(plan.sample_rate)
    assert plan.sample_rate == pytest.approx(64 / fitted.ledger.n_rows)
    assert abs(plan.steps - 2 / plan.sample_rate) <= 1
    drawn, _ = api.sample(tmp_path / "engine", 200, seed=3)
    assert len(drawn) == 200


ENGINE_DP_SGD = ["tablediffusion", "tablediffusion-denoiser", "tablediffusion-masked", "dp-wgan",
                 "dtgan-d", "dtgan-g"]


def test_every_family_that_reads_rows_by_index_learns_from_the_engine():
    """The families that take a table the engine holds are the ones whose training reads its rows
    by index (a Poisson batch, a critic's batch): all but the language model."""
    from synth_core.models import MODELS
    assert sorted(f for f, c in MODELS.items() if c.from_engine) == \
        sorted(["aim", "dp-tbart", *ENGINE_DP_SGD])


@pytest.mark.parametrize("family", ENGINE_DP_SGD)
def test_the_other_dp_sgd_families_read_their_batches_from_the_engines_disk(
        tmp_path, monkeypatch, family):
    """Each DP-SGD family but DP-TBART (above) on a table the engine holds: its encoded rows
    (vectors, or tokens) written to the engine's folder are the whole table's, row for row; its
    training reads them a batch at a time from there, with the plan of the table read whole;
    the run samples."""
    from synth_core import api
    from synth_core.encoding.engine import DiskRows
    from synth_core.request import FitRequest
    csv, schema, whole, read = _read_from_disk(tmp_path, monkeypatch, 1_000)
    # DTGAN-G's steps draw critics, not rows (a step may draw none): more of them
    request = FitRequest(model=family, preset="tiny", epsilon=1.0, public_table=True,
                         options={"epochs": 4.0 if family == "dtgan-g" else 0.2})
    with TableStore.from_file(csv, schema, batch_rows=300) as store:
        fitted = api.fit(store, schema, request, run_dir=tmp_path / "engine")
        trained_reads = list(read)
        rows = fitted.model.encode(store)
        assert isinstance(rows, DiskRows) and rows.path.parent == store._dir
        mine = np.asarray(rows._rows)
        theirs = fitted.model.encode(whole).numpy()
        assert mine.dtype == theirs.dtype or np.issubdtype(mine.dtype, np.integer)
        np.testing.assert_array_equal(mine[np.lexsort(mine.T)], theirs[np.lexsort(theirs.T)])
        batch = rows[np.array([0, 5, 7])]
        assert batch.dtype == fitted.model.encode(whole).dtype
    result = fitted.model.train_result
    assert result.steps_done == result.steps_planned >= 1 and trained_reads
    if family != "dtgan-g":  # a Poisson batch of rows each step
        assert len(trained_reads) >= result.steps_done
    assert fitted.ledger.spent_epsilon <= 1.0 + 1e-9
    drawn, _ = api.sample(tmp_path / "engine", 100, seed=3)
    assert len(drawn) == 100 and list(drawn.columns) == schema.names


def test_dp_bounds_of_a_table_the_engine_holds_are_counted_and_clipped_there(tmp_path):
    """A number without bounds: its DP range is found from the engine's histogram (the counts
    `dp_range` makes of the values in memory), recorded in the ledger, and the stored rows are
    clipped to it and counted as `validate_table` clips and counts the table read whole."""
    from synth_core import api
    from synth_core.demo import demo_schema, demo_table
    from synth_core.privacy.bounds import bound_candidates
    from synth_core.request import FitRequest
    csv = tmp_path / "census.csv"
    demo_table(2_000).to_csv(csv, index=False)
    spec = demo_schema().to_dict()
    for column in spec["columns"]:
        if column["name"] in ("age", "hours-per-week"):
            column.pop("lower", None), column.pop("upper", None)
    schema = Schema.from_dict(spec)
    whole, _ = _whole(csv, schema)
    edges = np.unique(bound_candidates())
    with TableStore.from_file(csv, schema) as store:
        for name in ("age", "hours-per-week"):
            x = np.clip(whole[name].dropna().to_numpy(float), edges[0], edges[-1])
            expected = np.bincount(np.clip(np.searchsorted(edges, x, "right") - 1, 0,
                                           edges.size - 2), minlength=edges.size - 1)
            np.testing.assert_array_equal(store.histogram(name, edges), expected)
        fitted = api.fit(store, schema, FitRequest(model="aim", preset="tiny", epsilon=2.0,
                                                   bounds_epsilon=0.5, public_table=True),
                         run_dir=tmp_path / "run")
        assert fitted.ledger.to_dict()["entries"][1]["kind"] == "dp-bounds"
        bounded = fitted.schema
        assert bounded["age"].has_bounds and bounded["hours-per-week"].has_bounds
        _, expected = validate_table(whole, bounded)
        for name in ("age", "hours-per-week"):
            mine = store.report.columns[name]
            assert (mine.clipped_low, mine.clipped_high) == (expected.columns[name].clipped_low,
                                                             expected.columns[name].clipped_high)
            column = store._column(name)
            got = store._query(f"SELECT min({column}) AS lo, max({column}) AS hi FROM rows")
            assert bounded[name].lower <= got["lo"][0] <= got["hi"][0] <= bounded[name].upper


def test_value_sets_found_with_dp_are_counted_and_held_in_the_engine(tmp_path):
    """A fit with `values_epsilon` on a table the engine holds: each searchable column's rows at
    each value of its public grid are counted there (the counts in memory), and the stored rows
    are held to what was found (snapped, on the points) as `validate_table` holds the table read
    whole."""
    from synth_core import api
    from synth_core.privacy.value_sets import grid, grid_counts, searchable
    from synth_core.request import FitRequest
    rng = np.random.default_rng(59)
    n = 3_000
    table = pd.DataFrame({
        "rate": rng.choice([0.0, 3.26, 4.56], n, p=[0.6, 0.25, 0.15]),   # a short list of rates
        "item": rng.integers(1, 8, n),                                   # a 1-7 item
        "amount": np.where(rng.random(n) < 0.5, 0, rng.integers(1, 900, n)),  # mostly 0
        "group": rng.choice(["a", "b", "c"], n)})
    table.loc[:7, "rate"] = 2.0  # too few rows to be found: snapped to the nearest found
    csv = tmp_path / "codes.csv"
    table.to_csv(csv, index=False)
    schema = Schema.from_dict({"version": 1, "confirmed": True, "columns": [
        {"name": "rate", "kind": "continuous", "lower": 0, "upper": 5, "decimals": 2},
        {"name": "item", "kind": "integer", "lower": 1, "upper": 7},
        {"name": "amount", "kind": "integer", "lower": 0, "upper": 1000},
        {"name": "group", "kind": "categorical", "categories": ["a", "b", "c"]}]})
    whole, _ = _whole(csv, schema)
    with TableStore.from_file(csv, schema) as store:
        for spec in searchable(schema):
            np.testing.assert_array_equal(
                grid_counts(store, grid(spec), spec.name),
                grid_counts(whole[spec.name].to_numpy(float), grid(spec)), err_msg=spec.name)
        fitted = api.fit(store, schema, FitRequest(model="aim", preset="tiny", epsilon=3.0,
                                                   values_epsilon=1.5, public_table=True),
                         run_dir=tmp_path / "run")
        found = fitted.schema
        assert found["rate"].values == [0.0, 3.26, 4.56]
        assert found["item"].values == list(range(1, 8))
        assert found["amount"].points == [0]
        held, expected = validate_table(whole, found)
        for name in ("rate", "item", "amount"):
            column = store._column(name)
            got = store._query(f"SELECT {column} AS v FROM rows ORDER BY rowid")["v"]
            np.testing.assert_array_equal(np.sort(got), np.sort(held[name].to_numpy(float)))
            assert store.report.columns[name].snapped == expected.columns[name].snapped
        assert store.report.columns["rate"].snapped == 8
    drawn, _ = api.sample(tmp_path / "run", 500, seed=2)
    assert set(drawn["rate"]) <= {0.0, 3.26, 4.56}


def test_a_large_sample_is_drawn_and_written_a_part_at_a_time(tmp_path, monkeypatch, capsys):
    """`sample` of more rows than a part into a file draws and writes one part at a time (memory
    holds a part): one header, every row, each part drawn on its own; the CLI says so."""
    from synth_core import api
    from synth_core.cli import main
    from synth_core.demo import demo_schema, demo_table
    from synth_core.request import FitRequest
    from synth_core.schema import read_table as read
    schema = demo_schema()
    api.fit(demo_table(800), schema, FitRequest(model="aim", preset="tiny", epsilon=1.0,
                                                public_table=True), run_dir=tmp_path / "run")
    monkeypatch.setattr(api, "PART_ROWS", 150)
    drawn = []
    original = api.SynthModel.sample
    monkeypatch.setattr(api.SynthModel, "sample",
                        lambda self, n, **kw: drawn.append(n) or original(self, n, **kw))
    first, info = api.sample(tmp_path / "run", 400, seed=4, out=tmp_path / "big.csv")
    assert drawn == [150, 150, 100] and len(first) == 150
    assert info["rows"] == 400 and info["parts"] == 3
    written = read(tmp_path / "big.csv", schema)
    assert len(written) == 400 and list(written.columns) == schema.names
    assert main(["sample", "--run", str(tmp_path / "run"), "--rows", "400",
                 "--out", str(tmp_path / "again.csv")]) == 0
    said = capsys.readouterr().out
    assert "wrote 400 rows" in said and "in 3 parts" in said
    assert len(read(tmp_path / "again.csv", schema)) == 400


def test_a_table_too_large_to_read_whole_is_drafted_from_a_random_sample(tmp_path, monkeypatch,
                                                                        capsys):
    """`schema draft` of a file too large to read whole reads it a batch at a time into a uniform
    random sample (each column typed as the whole file types it) and says so; a sample of every
    row drafts exactly what the table read whole drafts."""
    import synth_core.files as files
    import synth_core.schema.batches as batches
    from synth_core.cli import main
    from synth_core.schema.batches import sample_rows
    csv = tmp_path / "messy.csv"
    _messy(2_000).to_csv(csv, index=False)
    whole = read_table(csv, missing_markers=MARKERS)
    every, rows = sample_rows(csv, 5_000, MARKERS, batch_rows=150)
    assert rows == 2_000
    pd.testing.assert_frame_equal(every.sort_values("id").reset_index(drop=True), whole)
    monkeypatch.setattr(files, "DATA_LIMIT", 1_000)   # this file is "too large" now
    monkeypatch.setattr(batches, "SAMPLE_ROWS", 700)
    argv = ["schema", "draft", "--data", str(csv), *(a for m in MARKERS for a in ("--missing", m))]
    assert main([*argv, "--out", str(tmp_path / "sampled.json")]) == 0
    assert "drafting from a random 700 of its 2,000 rows" in capsys.readouterr().out
    sampled = Schema.load(tmp_path / "sampled.json")  # a draft a steward can confirm
    assert {c.name for c in sampled.columns} <= set(whole.columns) and sampled.columns
    monkeypatch.setattr(batches, "SAMPLE_ROWS", 5_000)
    assert main([*argv, "--out", str(tmp_path / "all.json")]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = draft_schema(whole, missing_markers=MARKERS).to_dict()
    assert json.loads((tmp_path / "all.json").read_text())["columns"] == expected["columns"]


def test_a_review_of_tables_too_large_to_read_whole_reads_a_random_sample_of_each(
        tmp_path, monkeypatch, capsys):
    """`evaluate` of tables too large to read whole reviews a uniform random sample of each, read a
    batch at a time, and says so."""
    import synth_core.cli_review as cli_review
    import synth_core.files as files
    from synth_core.cli import main
    from synth_core.demo import demo_schema, demo_table
    demo_table(600, seed=1).to_csv(tmp_path / "real.csv", index=False)
    demo_table(600, seed=2).to_csv(tmp_path / "synthetic.csv", index=False)
    demo_schema().save(tmp_path / "schema.json")
    monkeypatch.setattr(files, "DATA_LIMIT", 1_000)   # these files are "too large" now
    monkeypatch.setattr(cli_review, "REVIEW_ROWS", 200)
    assert main(["evaluate", "--real", str(tmp_path / "real.csv"), "--synthetic",
                 str(tmp_path / "synthetic.csv"), "--schema", str(tmp_path / "schema.json"),
                 "--quick", "--out", str(tmp_path / "review")]) == 0
    said = capsys.readouterr().out
    assert said.count("the review reads a random 200 of its 600 rows") == 2, said
