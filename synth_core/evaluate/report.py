"""One call, every figure: `evaluate` returns them as JSON-ready data, `build_report` writes an
offline HTML report (plotly, its JavaScript inlined once, no network) and a JSON of every figure,
for one run or a comparison of runs, with each run's privacy ledger and the schema's provenance.

The report is for the data steward: it reads the real table. It never includes the run config's
`private_validation_counts` (counts of clipped or missing values describe the private table) and no
rows of the real table; projections carry coordinates of sampled rows only.
"""
from __future__ import annotations

import functools
import html
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..files import write_atomic
from ..schema import Schema
from .charts import (association_chart, column_scores_chart, dcr_chart, group_rates_chart, projection_chart,
                     tvd_chart)
from .fairness import fairness_figures
from .fidelity import detection_auc
from .figures import Figure, MEANINGS, PLAIN, column_figures, make_figure, quick_figures
from .inputs import EvaluationError, canonical, check_comparable, target_problem
from .privacy_risk import attribute_inference, distance_to_closest_record, membership_inference
from .projections import pca_projection, umap_projection
from .structure import alpha_beta_authenticity, association_difference, pmse_ratio
from .utility import utility

REFERENCE = "real held-out (reference)"


# --------------------------------------------------------------------------------------------------
# runs and ledgers
# --------------------------------------------------------------------------------------------------
def _ledger_dict(ledger: Any) -> dict | None:
    if ledger is None:
        return None
    if hasattr(ledger, "to_dict"):
        return ledger.to_dict()
    if isinstance(ledger, dict):
        return dict(ledger)
    raise EvaluationError(f"a ledger must be a PrivacyLedger or a dict, not {type(ledger).__name__}")


def _ledgers(ledger: Any, labels: list[str]) -> dict[str, dict | None]:
    """One ledger for every run: a single ledger for a single run, or {label: ledger}."""
    if ledger is None:
        return {k: None for k in labels}
    if isinstance(ledger, dict) and set(ledger) and set(ledger) <= set(labels) and "entries" not in ledger:
        return {k: _ledger_dict(ledger.get(k)) for k in labels}
    if len(labels) == 1:
        return {labels[0]: _ledger_dict(ledger)}
    raise EvaluationError("with several synthetic runs, give the ledgers as {label: ledger}")


# --------------------------------------------------------------------------------------------------
# computing
# --------------------------------------------------------------------------------------------------
def _role(schema: Schema, role: str) -> str | None:
    cols = [c.name for c in schema.columns if c.role == role]
    return cols[0] if cols else None


def _safe(section: dict, key: str, fn, *args, tick: Callable[[str], None] | None = None, **kwargs):
    """Run one section; a failure is recorded with its message instead of sinking the whole report.
    `tick(key)` is told when the section is over (the report's progress)."""
    t0 = time.perf_counter()
    try:
        out = fn(*args, **kwargs)
        return out
    except (EvaluationError, ValueError) as e:
        section.setdefault("errors", {})[key] = str(e)
        return None
    finally:
        section.setdefault("seconds", {})[key] = round(time.perf_counter() - t0, 3)
        if tick is not None:
            tick(key)


# the per-column table's rows of each table: a sample above this (each share within about 0.2
# points); the whole of a million-row table took 19 s of a report's 85
COLUMN_ROWS = 200_000


# a section's share of a report's time (seconds measured on the demo table, 3,600 rows): for its
# progress bar
SECTION_WEIGHTS = {"quick": 2, "columns": 2, "association": 2, "pmse": 1, "detection": 10, "alpha_beta": 3,
                   "utility": 8, "dcr": 2, "membership": 1, "attribute": 7, "fairness": 5, "pca": 1, "umap": 10}


def _sections(full: bool, holdout: bool, target: bool, sensitive: bool) -> list[str]:
    """The sections `_evaluate_one` runs, in order."""
    keys = ["quick", "columns", "association", "pmse"] + (["detection"] if full else []) + ["alpha_beta"]
    if full and holdout:
        keys += (["utility"] if target else []) + ["dcr", "membership"] + (["attribute"] if sensitive else [])
    if full and target and sensitive:
        keys.append("fairness")
    return keys


class _Progress:
    """Turns finished sections into (share done, what is being computed) for `evaluate`'s caller."""

    def __init__(self, keys: list[str], report: Callable[[float, str], None] | None):
        self.total = sum(SECTION_WEIGHTS.get(k, 1) for k in keys) or 1
        self.done = 0.0
        self.report = report

    def __call__(self, key: str) -> None:
        self.done += SECTION_WEIGHTS.get(key, 1)
        if self.report is not None:
            self.report(min(1.0, self.done / self.total), key)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, pd.DataFrame):
        return _jsonable(obj.to_dict(orient="split"))
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        return None if not math.isfinite(float(obj)) else float(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, Figure):
        return _jsonable(obj.to_dict())
    return obj


def _risk_sections(sec: dict, figs: list, safe, real: pd.DataFrame, syn: pd.DataFrame, holdout: pd.DataFrame,
                   schema: Schema, sensitive: str | None, seed: int) -> None:
    """The privacy-risk sections of `_evaluate_one`: distance to the closest record, membership and
    attribute inference (each needs the held-out rows)."""
    dcr = safe("dcr", distance_to_closest_record, real, syn, holdout, schema, seed=seed)
    if dcr:
        sec["dcr"] = {**dcr.to_dict(), "synthetic_to_train": dcr.synthetic_to_train, "holdout_to_train": dcr.holdout_to_train}
        f = make_figure("DCR: share closer to training", dcr.summary["share_closer_to_train"],
                        {**dcr.summary, "sample_sizes": dcr.sample_sizes},
                        meaning="Share of synthetic rows closer to a training row than to an unseen real row (0.5 = no pull towards the training rows).")
        f.better, f.verdict = "lower", dcr.summary["level"]
        f.details["thresholds"] = {"poor": "exact copies above the held-out share + 1 point, or > 0.60",
                                   "fair": "> 0.53", "good": "otherwise"}
        figs.append(f)
    mia = safe("membership", membership_inference, real, syn, holdout, schema, seed=seed)
    if mia:
        sec["membership"] = mia
        figs.append(make_figure("Membership-inference ROC-AUC", mia["auc"], mia))
    if sensitive is not None:
        ai = safe("attribute", attribute_inference, real, syn, holdout, schema, sensitive, seed=seed)
        if ai:
            sec["attribute"] = ai
            figs.append(make_figure("Attribute-inference member advantage", ai["member_advantage"], ai))
            g = make_figure("Attribute-inference privacy gain", ai["privacy_gain"], ai)
            # part of the risk is population inference: no verdict
            g.better, g.verdict = "higher", "n/a"
            figs.append(g)


def _evaluate_one(real: pd.DataFrame, syn: pd.DataFrame, schema: Schema, holdout: pd.DataFrame | None,
                  target: str | None, sensitive: str | None, seed: int, full: bool,
                  tick: Callable[[str], None] | None = None) -> dict:
    """Every figure of one synthetic table against the real training table (`full=False`: the
    fidelity figures only, for the held-out reference); the sections are those `_sections` lists."""
    sec: dict[str, Any] = {}
    safe = functools.partial(_safe, sec, tick=tick)
    figs: list[Figure] = []
    q = safe("quick", quick_figures, real, syn, schema, ks=(1, 2, 3, 4, 5), seed=seed)
    figs += q or []
    cols = safe("columns", column_figures, real, syn, schema, max_rows=COLUMN_ROWS, seed=seed)
    sec["columns"] = cols
    assoc = safe("association", association_difference, real, syn, schema, seed=seed)
    if assoc:
        figs.append(make_figure("Association difference", assoc["value"], {"sample_sizes": assoc["sample_sizes"]}))
        sec["association"] = assoc
    pm = safe("pmse", pmse_ratio, real, syn, schema, seed=seed)
    if pm:
        figs.append(make_figure("pMSE ratio", pm["ratio"], pm))
    n_det = 5000
    det = None
    if full:  # the held-out reference scores about 0.5 by construction: not worth its time
        det = safe("detection", detection_auc, real, syn, schema.numeric_columns, n_folds=3, max_rows=n_det,
                    seed=seed)
    if det is not None:
        figs.append(make_figure("Detection ROC-AUC", det, {"learner": "HistGradientBoosting, 3-fold",
                                                           "sample_sizes": {"real": min(n_det, len(real), len(syn)),
                                                                            "synthetic": min(n_det, len(real), len(syn))}}))
    ab = safe("alpha_beta", alpha_beta_authenticity, real, syn, schema, seed=seed)
    if ab:
        d = {"sample_sizes": ab["sample_sizes"]}
        figs += [make_figure("α-precision", ab["alpha_precision"], d), make_figure("β-recall", ab["beta_recall"], d),
                 make_figure("Authenticity", ab["authenticity"], d)]
        sec["alpha_beta"] = ab
    if full and holdout is not None:
        if target is not None:
            u = safe("utility", utility, real, syn, holdout, schema, target, seed=seed)
            if u:
                sec["utility"] = u
                names = {"roc_auc": "Utility ratio (ROC-AUC)", "accuracy": "Utility ratio (accuracy)", "r2": "Utility ratio (R²)"}
                for k, name in names.items():
                    if k in u["ratio"]:
                        figs.append(make_figure(name, u["ratio"][k], {"learners": u["learners"], "sample_sizes": u["sample_sizes"]}))
        _risk_sections(sec, figs, safe, real, syn, holdout, schema, sensitive, seed)
    if full and target is not None and sensitive is not None:
        fair = safe("fairness", fairness_figures, syn, sensitive, target, test=holdout, seed=seed)
        if fair:
            sec["fairness"] = fair
            figs.append(make_figure("Demographic-parity difference (data)", fair["data"]["demographic_parity_difference"], fair["data"]))
            c = fair["classifier"]
            figs.append(make_figure("Demographic-parity difference (classifier)", c["demographic_parity_difference"], c))
            figs.append(make_figure("Equalized-odds difference (classifier)", c["equalized_odds_difference"], c))
    sec["figures"] = figs
    return sec


def evaluate(real_train: pd.DataFrame, synthetic: Any, schema: Schema, holdout: pd.DataFrame | None = None,
             target: str | None = None, sensitive: str | None = None, ledger: Any = None, seed: int = 0,
             include_umap: bool = True, n_threads: int | None = None,
             progress: Callable[[float, str], None] | None = None) -> dict:
    """Every figure for one synthetic table or {label: table}, as one JSON-ready dict (see
    build_report).

    progress(share done, section just finished) is called as the sections finish (weighted by their
    usual time, SECTION_WEIGHTS), for a progress bar with the time left.

    target / sensitive default to the schema's columns with role "target" / "sensitive". Without a
    held-out real table the utility and privacy-attack sections are left out (they need real rows
    the model never saw) and the report says so."""
    from threadpoolctl import threadpool_limits

    t0 = time.perf_counter()
    target = target if target is not None else _role(schema, "target")
    sensitive = sensitive if sensitive is not None else _role(schema, "sensitive")
    real_c, synths = check_comparable(real_train, synthetic, schema, target=target, sensitive=sensitive,
                                      synthetic_target=False)
    hold_c = None
    if holdout is not None:
        hold_c = canonical(holdout, schema, "held-out real")
    labels = list(synths)
    has = dict(holdout=hold_c is not None, target=target is not None, sensitive=sensitive is not None)
    tick = _Progress(_sections(True, **has) * len(synths)
                     + (_sections(False, **has) + (["fairness"] if has["target"] and has["sensitive"] else [])
                        if has["holdout"] else [])
                     + ["pca"] + (["umap"] if include_umap else []), progress)
    with threadpool_limits(limits=n_threads):
        runs = {label: _evaluate_one(real_c, df, schema, hold_c, target, sensitive, seed, full=True, tick=tick)
                for label, df in synths.items()}
        reference = None
        if hold_c is not None:
            reference = _evaluate_one(real_c, hold_c, schema, None, target, sensitive, seed, full=False, tick=tick)
            if target is not None and sensitive is not None:
                reference["fairness"] = _safe(reference, "fairness", fairness_figures, real_c, sensitive, target,
                                              test=hold_c, seed=seed, tick=tick)
        projections: dict[str, Any] = {}
        t = time.perf_counter()
        projections["pca"] = pca_projection(real_c, synths, schema, seed=seed)
        projections["seconds_pca"] = round(time.perf_counter() - t, 3)
        tick("pca")
        if include_umap:
            t = time.perf_counter()
            projections["umap"] = umap_projection(real_c, synths, schema, max_rows=1000, seed=seed)
            projections["seconds_umap"] = round(time.perf_counter() - t, 3)
            tick("umap")
    notes = []
    if hold_c is None:
        notes.append("No held-out real table was given: utility, distance-to-closest-record and the attacks "
                     "need real rows the model never saw, so they are not in this report.")
    if target is None:
        notes.append("No target column: utility and fairness figures are not in this report.")
    for label, df in synths.items():
        problem = target_problem(df, schema, target, "synthetic" if len(synths) == 1 else f"synthetic ({label})") \
            if target is not None else None
        if problem:
            notes.append(f"{problem[0].upper()}{problem[1:]}. Its utility and fairness figures could not be "
                         "computed: the model did not learn the target's other classes; more ε, more rows or a "
                         "larger model usually helps.")
    if sensitive is None:
        notes.append("No sensitive column: the attribute-inference attack and fairness figures are not in this report.")
    return {
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "runs": labels,
        "target": target, "sensitive": sensitive,
        "rows": {"real_train": len(real_c), "holdout": None if hold_c is None else len(hold_c),
                 **{label: len(df) for label, df in synths.items()}},
        "schema": {"provenance": schema.provenance, "columns": schema.to_dict()["columns"]},
        "ledgers": _ledgers(ledger, labels),
        "results": runs,
        "reference": reference,
        "projections": projections,
        "meanings": MEANINGS,
        "notes": notes,
        "seconds": round(time.perf_counter() - t0, 3),
    }


# --------------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------------
_COLOURS = {"good": "#1a7f37", "fair": "#9a6700", "poor": "#cf222e", "n/a": "#57606a"}


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:.4g}" if isinstance(v, (float, np.floating)) else html.escape(str(v))


def _plots(report: dict) -> list[tuple[str, Any]]:
    """The report's charts: the review page's own (evaluate.charts)."""
    out = []
    runs = report["results"]
    series = dict(runs)
    if report.get("reference"):
        series[REFERENCE] = report["reference"]
    tvd = {label: {int(f.name.split("-")[0]): f.value for f in sec["figures"] if f.name.endswith("-way TVD")}
           for label, sec in series.items()}
    out.append(("Joint structure: k-way TVD", tvd_chart(tvd)))
    columns = {label: sec["columns"] for label, sec in series.items() if sec.get("columns") is not None}
    out.append(("Marginals per column", column_scores_chart(columns)))
    for label, sec in runs.items():
        if sec.get("association"):
            out.append((f"Association difference: {label}", association_chart(sec["association"]["difference"], label)))
    for label, sec in runs.items():
        dcr = sec.get("dcr")
        if dcr:
            fig = dcr_chart(np.asarray(dcr["synthetic_to_train"]), np.asarray(dcr["holdout_to_train"]))
            out.append((f"Distance to closest record: {label}", fig.update_layout(title=f"{label}: distance to the "
                                                                                        "closest training row")))
    fair_rows = {label: sec.get("fairness") for label, sec in series.items() if sec.get("fairness")}
    if fair_rows:
        rates = {}
        for label, fair in fair_rows.items():
            rates[f"{label}: data"] = fair["data"]["positive_rate_by_group"]
            rates[f"{label}: classifier"] = fair["classifier"]["predicted_positive_rate_by_group"]
        positive = next(iter(fair_rows.values()))["positive"]
        out.append(("Fairness", group_rates_chart(rates, positive, report["sensitive"])))
    for key in ("pca", "umap"):
        proj = report["projections"].get(key)
        if proj is None:
            continue
        ev = f" (variance explained {proj.explained_variance[0]:.1%}, {proj.explained_variance[1]:.1%})" if proj.explained_variance else ""
        title = (f"{key.upper()} fitted on the real rows{ev}; samples: "
                 + ", ".join(f"{k} {v}" for k, v in proj.sample_sizes.items()))
        out.append((f"Projection: {key.upper()}", projection_chart(proj.points, title)))
    return out


def _summary_table(report: dict) -> str:
    series = dict(report["results"])
    if report.get("reference"):
        series[REFERENCE] = report["reference"]
    names: list[str] = []
    for sec in series.values():
        for f in sec["figures"]:
            if f.name not in names:
                names.append(f.name)
    head = "".join(f"<th>{html.escape(l)}</th>" for l in series)
    rows = []
    for name in names:
        cells = []
        meaning, better = "", ""
        for sec in series.values():
            f = next((f for f in sec["figures"] if f.name == name), None)
            if f is None:
                cells.append("<td>–</td>")
                continue
            meaning, better = f.meaning, f.better
            cells.append(f'<td style="color:{_COLOURS.get(f.verdict, "#000")}">{_fmt(f.value)} '
                         f'<small>{html.escape(f.verdict)}</small></td>')
        th = f.details.get("thresholds") if f is not None else None
        thr = ""
        if isinstance(th, dict) and "good" in th and isinstance(th["good"], (int, float)):
            thr = f" Good {'≤' if better == 'lower' else '≥'} {th['good']:g}, fair {'≤' if better == 'lower' else '≥'} {th['fair']:g}."
        rows.append(f"<tr><td><b>{html.escape(PLAIN.get(name, name))}</b> <small>({html.escape(name)})</small>"
                    f"<br><small>{html.escape(meaning)} "
                    f"({html.escape(better)} is better.{html.escape(thr)})</small></td>{''.join(cells)}</tr>")
    return f"<table><tr><th>figure</th>{head}</tr>{''.join(rows)}</table>"


def _ledger_html(report: dict) -> str:
    parts = []
    for label, led in report["ledgers"].items():
        if not led:
            parts.append(f"<p><b>{html.escape(label)}</b>: no privacy ledger was given.</p>")
            continue
        entries = "".join(f"<li>{html.escape(str(e.get('mechanism')))}: ε = {_fmt(e.get('epsilon'))}, "
                          f"δ = {_fmt(e.get('delta'))}</li>" for e in led.get("entries", []))
        warn = "".join(f"<p class=warn>{html.escape(w)}</p>" for w in led.get("warnings", []))
        parts.append(f"<p><b>{html.escape(label)}</b>: spent ε = {_fmt(led.get('spent_epsilon'))} of "
                     f"{_fmt(led.get('target_epsilon'))}, δ = {_fmt(led.get('target_delta'))} "
                     f"({html.escape(str(led.get('composition', '')))})</p><ul>{entries}</ul>{warn}")
    return "".join(parts)


def _errors_html(report: dict) -> str:
    items = []
    for label, sec in report["results"].items():
        for key, msg in sec.get("errors", {}).items():
            items.append(f"<li>{html.escape(label)} / {html.escape(key)}: {html.escape(msg)}</li>")
    return f"<h2>Not computed</h2><ul>{''.join(items)}</ul>" if items else ""


def write_html(report: dict, path: Path, title: str) -> None:
    from plotly.offline import get_plotlyjs

    prov = report["schema"]["provenance"]
    prov_html = (f"<p class=warn>{html.escape(prov['warning'])}</p>" if prov.get("warning")
                 else "<p>The schema's facts were declared public (confirmed by the steward).</p>")
    rows = ", ".join(f"{k}: {v}" for k, v in report["rows"].items() if v is not None)
    body = [f"<h1>{html.escape(title)}</h1>",
            f"<p>Created {report['created']}; target: {html.escape(str(report['target']))}; sensitive: "
            f"{html.escape(str(report['sensitive']))}; rows: {html.escape(rows)}. Computed in {report['seconds']:.1f} s.</p>",
            "".join(f"<p class=note>{html.escape(n)}</p>" for n in report["notes"]),
            "<h2>Schema provenance</h2>", prov_html,
            "<h2>Privacy ledger</h2>", _ledger_html(report),
            "<h2>Figures</h2><p>Colour: verdict against the stated thresholds (rules of thumb, see each line). "
            "Large tables are sampled; sample sizes are in the JSON.</p>", _summary_table(report),
            _errors_html(report)]
    for heading, fig in _plots(report):
        body.append(f"<h2>{html.escape(heading)}</h2>")
        body.append(fig.to_html(full_html=False, include_plotlyjs=False))
    doc = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           "<style>body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}.warn{color:#cf222e}"
           ".note{color:#57606a}</style>"
           f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>{''.join(body)}</body></html>")
    write_atomic(path, doc, private=True)


def json_ready(report: dict) -> dict:
    """The JSON form: every figure, section and projection (coordinates of sampled rows only)."""
    out = dict(report)
    out["projections"] = {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in report["projections"].items()}
    return _jsonable(out)


def build_report(real_train: pd.DataFrame, synthetic: Any, schema: Schema, holdout: pd.DataFrame | None = None,
                 target: str | None = None, sensitive: str | None = None, ledger: Any = None,
                 out_dir: str | Path = "report", title: str = "Synthetic data review", seed: int = 0,
                 include_umap: bool = True, n_threads: int | None = None,
                 progress: Callable[[float, str], None] | None = None) -> tuple[Path, Path]:
    """Evaluate and write `out_dir`/report.html (offline) and `out_dir`/report.json; returns both
    paths.

    synthetic: a DataFrame or {label: DataFrame} (a comparison of runs); ledger: a PrivacyLedger,
    its dict, or {label: ledger}; see `evaluate` for the rest."""
    report = evaluate(real_train, synthetic, schema, holdout=holdout, target=target, sensitive=sensitive,
                      ledger=ledger, seed=seed, include_umap=include_umap, n_threads=n_threads, progress=progress)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)  # the report holds statistics of the private table: owner only
    json_path, html_path = out / "report.json", out / "report.html"
    write_atomic(json_path, json.dumps(json_ready(report), indent=1, allow_nan=False), private=True)
    write_html(report, html_path, title)
    return html_path, json_path


__all__ = ["evaluate", "build_report", "json_ready", "REFERENCE"]
