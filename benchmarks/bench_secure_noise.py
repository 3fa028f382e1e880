"""What secure noise costs the measurements (issue 40 item 4): Adult's marginals measured with the
noise drawn as DP-SGD's is (Opacus' secure mode: four draws summed and halved, from a secret torch
generator; counts rounded), against NumPy's single Gaussian draw, in the same run and on the same
validated table.

    python benchmarks/bench_secure_noise.py [--repeats 5] [--data-dir ../shared/datasets]

Prints the median time of `measure_marginals` each way, the noise draw alone each way, and their
ratios.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_models import DATASETS, load_dataset  # noqa: E402
from synth_core.privacy import PrivacyLedger, measurements  # noqa: E402
from synth_core.privacy.measurements import measure_marginals, measured_marginals  # noqa: E402
from synth_core.privacy.randomness import noisy_counts, secret_rng  # noqa: E402


def numpy_counts(counts, std):
    """The old draw: one NumPy Gaussian per cell, kept at full float precision."""
    return np.asarray(counts, float) + secret_rng().normal(0.0, std, size=np.shape(counts))


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "datasets"))
    args = ap.parse_args()
    schema, train, _ = load_dataset(DATASETS["adult"], Path(args.data_dir))

    def measure():
        ledger = PrivacyLedger(target_epsilon=1.0, target_delta=1e-5, n_rows=len(train))
        return measure_marginals(train, schema, 0.3, 1e-6, ledger, rows=len(train), accountant="prv")

    marginals, _ = measure()
    shapes = [m.counts.shape for m in marginals.marginals]
    cells = sum(int(np.prod(s)) for s in shapes)
    print(f"Adult training split: {len(train):,} rows; {len(measured_marginals(schema.modelled()))} marginals, "
          f"{cells:,} cells")
    secure = timed(measure, args.repeats)
    measurements.noisy_counts = numpy_counts
    try:
        old = timed(measure, args.repeats)
    finally:
        measurements.noisy_counts = noisy_counts
    zeros = [np.zeros(s) for s in shapes]
    noise_secure = timed(lambda: [noisy_counts(z, 3.0) for z in zeros], args.repeats)
    noise_old = timed(lambda: [numpy_counts(z, 3.0) for z in zeros], args.repeats)
    print(f"measure_marginals, median of {args.repeats}: NumPy Gaussian {old:.3f} s, secure {secure:.3f} s "
          f"(x{secure / old:.2f})")
    print(f"the noise alone: NumPy {noise_old * 1000:.1f} ms, secure {noise_secure * 1000:.1f} ms "
          f"(x{noise_secure / noise_old:.1f})")


if __name__ == "__main__":
    main()
