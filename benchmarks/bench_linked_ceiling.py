"""How far calibration can take a linked run (issue 45: Males' parents' level): one trained model,
sampled three ways: as the model draws (`raw`), calibrated to the run's own noisy marginals
(`noisy`, what a steward gets), and calibrated to the same marginals measured almost without noise
(`exact`: a measurement at ε = 100 on the training persons, a ceiling for this benchmark alone,
never offered to a steward). Where `exact` is far better than `noisy`, the noise of the marginals
limits the level; where `exact` is no better, the model's pool or the calibration does.

Figures as bench_linked.py (the linked tables' TVDs against the training persons' rows):

    python benchmarks/bench_linked_ceiling.py --tables males pbcseq --epsilons 1 4 --repeats 3 \
        --out benchmarks/results/linked_ceiling
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_linked import DELTA, FIGURES, TABLES, load  # noqa: E402
from synth_core import api  # noqa: E402
from synth_core.evaluate.linked import canonical, linked_fidelity  # noqa: E402
from synth_core.privacy.contribution import bound_children  # noqa: E402
from synth_core.privacy.ledger import PrivacyLedger  # noqa: E402
from synth_core.privacy.person_marginals import measure_person_marginals  # noqa: E402
from synth_core.schema.linked import link_tables  # noqa: E402

# the largest ε the privacy layer accepts: noise about a hundredth of a run's at ε = 1
CEILING_EPSILON = 100.0
WAYS = ("raw", "noisy", "exact")


def one(table: str, epsilon: float, out: Path, repeat: int) -> dict:
    train, _, schema = load(table)
    real = canonical(train, schema)
    persons = len(train.parents)
    result = {"table": table, "epsilon": epsilon, "persons": persons}
    with tempfile.TemporaryDirectory() as work:
        api.fit(train, schema, "dp-tbart", epsilon=epsilon, delta=DELTA, seed=0, public_table=True,
                run_dir=Path(work) / "r")
        model = api.load_model(Path(work) / "r")
        result["raw"] = linked_fidelity(real, model.sample(persons, calibrate=False), schema)
        result["noisy"] = linked_fidelity(real, model.sample(persons), schema)
        rows, _ = bound_children(*link_tables(train, schema), schema.max_children)
        model.calibration, _ = measure_person_marginals(rows, schema, CEILING_EPSILON, 0.1,
                                                        PrivacyLedger(CEILING_EPSILON, 0.1, persons), persons)
        result["exact"] = linked_fidelity(real, model.sample(persons), schema)
    print(f"{table} ε={epsilon:g} ({repeat}): " + "; ".join(
        f"{way} parents 1-way {result[way]['parents']['1way']:.3f}, parent × child {result[way]['parent_child_2way']:.3f}"
        for way in WAYS), flush=True)
    (out / f"{table}-eps{epsilon:g}-{repeat}.json").write_text(json.dumps(result, indent=2))
    return result


def show(out: Path) -> None:
    cells: dict = {}
    for path in sorted(out.glob("*.json")):
        r = json.loads(path.read_text())
        cells.setdefault((r["table"], r["epsilon"]), []).append(r)
    print("| table | ε | sampled | runs | parents 1-way | parents 2-way | children 1-way | children 2-way | "
          "children per person | parent × child 2-way |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (table, epsilon), runs in sorted(cells.items()):
        for way in WAYS:
            values = [[r[way][p[0]] if len(p) == 1 else r[way][p[0]][p[1]] for r in runs] for p in FIGURES]
            text = [f"{np.mean(v):.3f}" + (f" ({min(v):.3f}-{max(v):.3f})" if len(v) > 1 else "") for v in values]
            print(f"| {table} | {epsilon:g} | {way} | {len(runs)} | {' | '.join(text)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--tables", nargs="+", default=["males", "pbcseq"], choices=list(TABLES))
    ap.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 4.0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--print", action="store_true", help="print the table of the result files in --out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.print:
        for epsilon in args.epsilons:
            for table in args.tables:
                for repeat in range(args.repeats):
                    if not (out / f"{table}-eps{epsilon:g}-{repeat}.json").exists():
                        one(table, epsilon, out, repeat)
    show(out)


if __name__ == "__main__":
    main()
