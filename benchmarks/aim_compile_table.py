"""AIM's compiling (RESULTS.md, "AIM's compiling"): auto's AIM with JAX's programs compiled at
LLVM's level 0 (`synth_core.models.aim_config.compile_quickly`) against XLA's own level 2, paired
on the same table, ε and split (`bench_grid.py --out benchmarks/results/compile --methods auto-aim
auto-aim-llvm2`, run one after the other, cell by cell, on a quiet machine). The noise is secret,
so a pair shares its table and split, not its draws: its rounds and fidelity differ as two runs do.

    python benchmarks/aim_compile_table.py
"""
from __future__ import annotations

import json
import re
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
            out.setdefault((table, float(eps), int(seed)), {})[method] = json.loads(path.read_text())
    return {k: v for k, v in out.items() if QUICK in v and OWN in v}


def round_s(run: dict) -> float:
    """A round's mean seconds after the first (which measures every column)."""
    rounds = run.get("round_s") or []
    return float(np.mean(rounds)) if rounds else float("nan")


def table() -> str:
    lines = ["| table | ε | rounds: level 0 / 2 | a round, s: level 0 / 2 | fit, s: level 0 / 2 "
             "| ratio | 2-way TVD: level 0 / 2 |", "| --- | --- | --- | --- | --- | --- | --- |"]
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
        lines.append(f"\n{len(ratios)} pairs. Fit seconds, level 0 / level 2: median "
                     f"{np.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}); a round's "
                     f"seconds: median {np.median(per_round):.2f} ({min(per_round):.2f}-"
                     f"{max(per_round):.2f}). 2-way TVD level 0 − level 2: mean "
                     f"{np.mean(tvd):+.4f}, median {np.median(tvd):+.4f}.")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
