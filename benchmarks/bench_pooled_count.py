"""The row count calibration aims at: the released (noisy) count of persons alone, or pooled with
the measured marginals' sums (`privacy.measurements.pooled_rows`), on linked tables.

    count      60 measurements of the persons' count and marginals at ε as a run makes them (the count at its share,
               the marginals at the default calibration share of what is left): the error of the released count and of the pooled one, mean ± sd
    paired     N models trained as bench_linked trains them (DP-TBART over persons, ε, δ = 1e-4), each sampled
               three times calibrated to the pooled count, to the released count, and uncalibrated: each level's
               1-way TVD, children per person, parent × child 2-way TVD, and the weights' effective persons

    python benchmarks/bench_pooled_count.py --tables males pbcseq --epsilon 1 --models 6
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_linked import DELTA, load  # noqa: E402
from synth_core import api  # noqa: E402
from synth_core.evaluate.linked import canonical, linked_fidelity  # noqa: E402
from synth_core.privacy import PrivacyLedger  # noqa: E402
from synth_core.privacy.measurements import count_epsilon, noisy_count  # noqa: E402
from synth_core.privacy.budget import DEFAULT_CALIBRATION_SHARE  # noqa: E402
from synth_core.privacy.person_marginals import measure_person_marginals  # noqa: E402
from synth_core.privacy.split import planned_split  # noqa: E402
from synth_core.schema.linked import link_tables  # noqa: E402

FIGURES = ("parents 1-way", "children 1-way", "children per person", "parent × child 2-way", "effective persons")


def count_errors(table: str, epsilon: float, draws: int = 60) -> None:
    train, _, schema = load(table)
    rows, _ = link_tables(train, schema)
    n = len(rows)
    released, pooled = [], []
    for _ in range(draws):
        ledger = PrivacyLedger(target_epsilon=epsilon, target_delta=DELTA, n_rows=None, rows_public=False)
        count = noisy_count(n, count_epsilon(epsilon), ledger, of="persons")
        # as a run splits it
        split = planned_split(epsilon, DELTA, calibration_share=DEFAULT_CALIBRATION_SHARE)
        marginals, _ = measure_person_marginals(rows, schema, split.marginals, DELTA, ledger, count)
        released.append(count - n)
        pooled.append(marginals.persons.total - n)
    print(f"{table} ({n} persons), ε = {epsilon:g}: released count error {np.mean(released):+.1f} ± "
          f"{np.std(released):.1f}, pooled {np.mean(pooled):+.1f} ± {np.std(pooled):.1f}")


def paired(table: str, epsilon: float, models: int, work: Path) -> None:
    train, _, schema = load(table)
    real = canonical(train, schema)
    means = {which: [] for which in ("pooled", "released", "uncalibrated")}
    for k in range(models):
        api.fit(train, schema, "dp-tbart", epsilon=epsilon, delta=DELTA, seed=0, public_table=True,
                run_dir=work / f"{table}-{k}")
        model = api.load_model(work / f"{table}-{k}")
        measured = model.calibration
        pooled_total = measured.persons.total
        for which, total in (("pooled", pooled_total), ("released", float(measured.persons.rows)),
                             ("uncalibrated", None)):
            measured.persons.total = measured.children.total = total
            model.calibration = measured if total is not None else None
            figures = []
            for seed in range(3):
                synth = model.sample(len(train.parents), seed=seed)
                f = linked_fidelity(real, synth, schema)
                figures.append([f["parents"]["1way"], f["children"]["1way"], f["children_per_person_tvd"],
                                f["parent_child_2way"],
                                (model.last_sample_info.get("calibration") or {}).get("effective_rows", np.nan)])
            means[which].append(np.mean(figures, axis=0))
            print(f"{table} model {k} (released {measured.persons.rows}, pooled {pooled_total:.0f}, true "
                  f"{len(train.parents)}) {which}: " + ", ".join(f"{name} {v:.3f}" for name, v in
                                                              zip(FIGURES, means[which][-1])))
        model.calibration = measured
    for which, values in means.items():
        print(f"{table} ε = {epsilon:g}, {models} models, {which}: " + ", ".join(
            f"{name} {v:.3f}" for name, v in zip(FIGURES, np.mean(values, axis=0))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", nargs="+", default=["males", "pbcseq"])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--models", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("SYNTH_WORKBENCH_HOME", str(Path(tmp) / "home"))
        for table in args.tables:
            count_errors(table, args.epsilon)
        for table in args.tables:
            paired(table, args.epsilon, args.models, Path(tmp))


if __name__ == "__main__":
    main()
