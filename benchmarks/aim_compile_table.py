"""AIM's compiling (RESULTS.md, "AIM's compiling"): auto's AIM with JAX's programs compiled at
LLVM's level 0 (`synth_core.models.aim_config.compile_quickly`) against XLA's own level 2, paired
on the same table, ε and split (`bench_grid.py --out benchmarks/results/compile --methods auto-aim
auto-aim-llvm2`, run one after the other, cell by cell, on a quiet machine). The noise is secret,
so a pair shares its table and split, not its draws: its rounds and fidelity differ as two runs do.

    python benchmarks/aim_compile_table.py          # RESULTS.md's table of the pairs
    python benchmarks/aim_compile_table.py --same   # the same estimate at both levels?

`--same` fits mbi's model to fixed measurements (10 columns of 2 to 20 values, 17 cliques, 1,000
mirror-descent steps) in two processes, at level 0 and at level 2, and compares the marginals.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

FOLDER = Path(__file__).resolve().parent / "results" / "compile"
NAME = re.compile(r"(.+)_e([\d.]+)_(auto-aim(?:-llvm2)?)_s(\d+)\.json")
QUICK, OWN = "auto-aim", "auto-aim-llvm2"


def pairs(folder: Path = FOLDER) -> dict:
    """(table, ε, seed) -> {method: the run's figures}, for the cells both methods ran."""
    out: dict = {}
    for path in sorted(folder.glob("*.json")):
        m = NAME.match(path.name)
        if m:
            table, eps, method, seed = m.groups()
            run = json.loads(path.read_text())
            out.setdefault((table, float(eps), int(seed)), {})[method] = run
    return {k: v for k, v in out.items() if QUICK in v and OWN in v}


def round_s(run: dict) -> float:
    """A round's mean seconds after the first (which measures every column)."""
    rounds = run.get("round_s") or []
    return float(np.mean(rounds)) if rounds else float("nan")


def table() -> str:
    lines = ["| table | ε | rounds, level 0 / 2 | a round, s | fit, s | ratio | 2-way TVD |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    ratios, per_round, tvd = [], [], []
    for (name, eps, _), p in sorted(pairs().items()):
        quick, own = p[QUICK], p[OWN]
        r = (round_s(quick), round_s(own))
        fit = (quick["fit_s"], own["fit_s"])
        t2 = (quick["synthetic"]["tvd"]["2"], own["synthetic"]["tvd"]["2"])
        ratios.append(fit[0] / fit[1])
        per_round.append(r[0] / r[1])
        tvd.append(t2[0] - t2[1])
        lines.append(f"| {name} | {eps:g} | {quick['steps']} / {own['steps']} | {r[0]:.2f} / "
                     f"{r[1]:.2f} | {fit[0]:.1f} / {fit[1]:.1f} | {fit[0] / fit[1]:.2f} "
                     f"| {t2[0]:.4f} / {t2[1]:.4f} |")
    if ratios:
        lines += [f"\n{len(ratios)} pairs.",
                  f"- Fit seconds, level 0 / level 2: median {np.median(ratios):.2f} "
                  f"({min(ratios):.2f}-{max(ratios):.2f}).",
                  f"- A round's seconds, level 0 / level 2: median {np.median(per_round):.2f} "
                  f"({min(per_round):.2f}-{max(per_round):.2f}).",
                  f"- 2-way TVD, level 0 − level 2: mean {np.mean(tvd):+.4f}, median "
                  f"{np.median(tvd):+.4f};",
                  f"  lower at level 0 in {sum(d < 0 for d in tvd)} pairs, higher in "
                  f"{sum(d > 0 for d in tvd)}."]
    return "\n".join(lines)


def fit_marginals(out: str) -> None:
    """mbi's estimate on fixed (not private) measurements, its marginals saved to `out`."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from synth_core.models.aim_config import mbi
    m = mbi()
    rng = np.random.default_rng(0)
    sizes = {f"c{i}": s for i, s in enumerate([2, 3, 5, 8, 12, 20, 4, 6, 10, 2])}
    domain = m.Domain(list(sizes), list(sizes.values()))
    cliques = [(a,) for a in sizes] + [("c0", "c1"), ("c2", "c3"), ("c3", "c4"), ("c5", "c6"),
                                       ("c1", "c7", "c8"), ("c4", "c9"), ("c0", "c5")]
    measured = []
    for cl in cliques:
        cells = int(np.prod([sizes[a] for a in cl]))
        measured.append(m.LinearMeasurement(rng.poisson(10_000 / cells, cells).astype(float), cl,
                                            stddev=3.0))
    model = m.estimation.MirrorDescent().estimate(domain, measured, known_total=10_000.0,
                                                  iters=1000)
    np.save(out, np.concatenate([np.asarray(model.project(cl).datavector()) for cl in cliques]))


def same() -> str:
    """The two levels' marginals compared: the largest difference of a cell's count, and the L1
    difference as a share of the counts."""
    from synth_core.models.aim_config import LLVM_LEVEL_FLAG
    with tempfile.TemporaryDirectory() as folder:
        got = []
        for level in (0, 2):
            out = os.path.join(folder, f"level{level}.npy")
            env = {**os.environ, "XLA_FLAGS": f"{LLVM_LEVEL_FLAG}={level}",
                   "JAX_COMPILATION_CACHE_DIR": os.path.join(folder, f"jax{level}")}
            subprocess.run([sys.executable, __file__, "--fit", out], env=env, check=True,
                           capture_output=True)
            got.append(np.load(out))
    a, b = got
    return (f"{a.size} cells of 10,000 rows: largest difference {np.abs(a - b).max():.2g} rows, "
            f"L1 difference {np.abs(a - b).sum() / a.sum():.2g} of the counts")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    ap = argparse.ArgumentParser()
    ap.add_argument("--same", action="store_true", help="compare one estimate at both levels")
    ap.add_argument("--fit", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.fit:
        fit_marginals(args.fit)
    else:
        print(same() if args.same else table())
