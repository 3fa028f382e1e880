"""Balanced against systematic resampling of a calibrated sample (synth_core.models.resampling),
paired: one fit, then samples drawn from the same weighted pool both ways, seed by seed.

    linked   bench_linked's tables (DP-TBART over persons, its default calibration): samples of as many persons as
             the training persons, every figure against the training persons' rows (bench_linked's protocol)
    single   bench_models' tables with dp-tbart (calibration share 0.5, auto's for it): samples of as many rows as
             the training split, 1-/2-way TVD against the test split (the protocol: 20 quantile bins)

    python benchmarks/bench_resampling.py --out benchmarks/results/resampling --linked guimmun:4 males:4 males:1 \
        pbcseq:1 pbcseq:4 guimmun:1 --single demo:1 demo:4 hmda:1 hmda:4 wages1:1 wages1:4 --samples 4
    python benchmarks/bench_resampling.py --out benchmarks/results/resampling --print
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_linked import load as load_linked, linked_run  # noqa: E402
from bench_models import DATASETS, load_dataset  # noqa: E402
from synth_core import api  # noqa: E402
from synth_core.evaluate import kway_tvd_report  # noqa: E402
from synth_core.evaluate.linked import canonical, linked_fidelity  # noqa: E402
from synth_core.models import resampling  # noqa: E402

# BALANCE_UP_TO -1: never balanced
WAYS = (("systematic", -1), ("balanced", resampling.BALANCE_UP_TO))


def _samples(run: Path, n: int, samples: int, figures) -> list[dict]:
    out = []
    for way, up_to in WAYS:
        resampling.BALANCE_UP_TO = up_to
        for seed in range(samples):
            t = time.perf_counter()
            synth, _ = api.sample(run, n, seed=seed)
            out.append({"way": way, "seed": seed, **figures(synth), "sample_s": time.perf_counter() - t})
    resampling.BALANCE_UP_TO = WAYS[1][1]
    return out


def linked(table: str, epsilon: float, samples: int) -> list[dict]:
    train, _, schema = load_linked(table)
    real = canonical(train, schema)

    def figures(synth) -> dict:
        f = linked_fidelity(real, synth, schema)
        return {"parents_1way": f["parents"]["1way"], "parents_2way": f["parents"]["2way"],
                "children_1way": f["children"]["1way"], "children_2way": f["children"]["2way"],
                "children_per_person": f["children_per_person_tvd"], "parent_child_2way": f["parent_child_2way"]}
    with tempfile.TemporaryDirectory() as work:
        linked_run(train, schema, epsilon, len(train.parents), Path(work))
        return _samples(Path(work) / "linked", len(train.parents), samples, figures)


def single(name: str, epsilon: float, samples: int) -> list[dict]:
    schema, train, test = load_dataset(DATASETS[name], ROOT.parent / "shared" / "datasets")
    columns, numeric = schema.modelled().names, schema.modelled().numeric_columns

    def figures(synth) -> dict:
        tvd = kway_tvd_report(test[columns], synth[columns], numeric, ks=(1, 2))
        return {"1way": tvd[1], "2way": tvd[2]}
    with tempfile.TemporaryDirectory() as work:
        api.fit(train, schema, "dp-tbart", epsilon=epsilon, delta=1e-5, preset="cpu", calibration_share=0.5,
                run_dir=Path(work) / "run", public_table=True, seed=0)
        return _samples(Path(work) / "run", len(train), samples, figures)


def show(out: Path) -> None:
    for kind in ("linked", "single"):
        rows = [{"table": f.stem.split("-eps")[0].removeprefix(kind + "-"), "eps": json.loads(f.read_text())["epsilon"],
                 **r} for f in sorted(out.glob(f"{kind}-*.json")) for r in json.loads(f.read_text())["samples"]]
        if rows:
            frame = pd.DataFrame(rows).drop(columns="seed")
            print(frame.groupby(["table", "eps", "way"]).mean().round(4).to_string(), "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--linked", nargs="*", default=[], help="TABLE:EPSILON, bench_linked's tables")
    ap.add_argument("--single", nargs="*", default=[], help="NAME:EPSILON, bench_models' tables")
    ap.add_argument("--samples", type=int, default=4, help="samples each way from the one fit")
    ap.add_argument("--print", action="store_true", help="print the result files in --out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.print:
        for kind, specs, run in (("linked", args.linked, linked), ("single", args.single, single)):
            for spec in specs:
                name, _, eps = spec.partition(":")
                rows = run(name, float(eps), args.samples)
                (out / f"{kind}-{name}-eps{float(eps):g}.json").write_text(
                    json.dumps({"table": name, "epsilon": float(eps), "samples": rows}, indent=1))
                print(f"{kind} {name} ε={eps}: done", flush=True)
    show(out)


if __name__ == "__main__":
    main()
