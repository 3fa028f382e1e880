"""The floor of each benchmark table: how far its real training split is from its real test split,
by the protocol's TVD (20 quantile bins fitted on the training split). No model comes closer to
unseen rows than rows of the same table do, so a forecast's curve flattens there
(benchmarks/fit_forecast.py fits the floor from public facts).

    python benchmarks/bench_floor.py            # every table of the grid and the corpus, into results/floor
    python benchmarks/bench_floor.py --tables ecdat-doctorcontacts stevedata-mm_nhis   # only these (file names)
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_models import load_dataset, table_spec  # noqa: E402
from fit_forecast import known_tables  # noqa: E402
from synth_core.evaluate import protocol  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(HERE / "results" / "floor"))
    ap.add_argument("--data-dir", default=str(HERE.parent.parent / "shared" / "datasets"))
    ap.add_argument("--tables", nargs="+", help="only these tables (their file names, e.g. aer-doctorvisits)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    known = known_tables()
    unknown = set(args.tables or ()) - set(known)
    if unknown:
        raise SystemExit(f"not a table of the grid or the corpus: {', '.join(sorted(unknown))}")
    for name, (dataset, target) in known.items():
        path = out / f"{name}.json"
        if path.exists() or (args.tables and name not in args.tables):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            schema, train, test = load_dataset(table_spec(dataset, target), Path(args.data_dir))
        tvd = protocol.tvd(protocol.comparison(train, train, test), schema.numeric_columns, ks=(1, 2))
        path.write_text(json.dumps({"table": name, "train_rows": len(train), "test_rows": len(test),
                                    "tvd": {str(k): float(v) for k, v in tvd.items()}}))
        print(f"{name}: train {len(train):,}, test {len(test):,}: 1-way {tvd[1]:.3f}, 2-way {tvd[2]:.3f}", flush=True)


if __name__ == "__main__":
    main()
