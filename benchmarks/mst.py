"""MST (McKenna, Miklau & Sheldon 2021, "Winning the NIST Contest: A scalable and general approach
to differentially private synthetic data"), the second published method issue 15 compares `auto`
with, as a benchmark reference beside the independent DP marginals (`bench_models.py --model mst`).

As private-pgm's mechanisms/mst.py, on the public discretisation the independent reference uses
(public categories; numbers in the bins AIM would use at this row count and ε,
`recommend.aim_bins`): ρ of zCDP for (ε, δ) split in thirds. A third measures every column alone
(Gaussian mechanism); cells whose noisy count is below 3σ are merged into one (the domain
compression of mst.py, undone after sampling by a uniform draw among the merged cells). A third
selects a spanning tree of pairs by the exponential mechanism, one edge at a time among those
joining two components, scored by how far a model of the columns alone is from the pair (L1,
sensitivity 1). A third measures the tree's pairs. mbi fits a graphical model to every measurement,
and rows are drawn from it. Its randomness is the project's secret generator; only the draw of rows
is seeded.
"""
from __future__ import annotations

import math

import numpy as np

from synth_core.encoding.tokens import TokenEncoder
from synth_core.models.aim import _numpy_global_seed, mbi
from synth_core.models.recommend import aim_bins
from synth_core.privacy.accounting import rho_for
from synth_core.privacy.randomness import secret_rng
from synth_core.privacy.selection import RhoBudget

# mirror-descent iterations of the final estimate (mst.py: 5,000; a tree converges sooner)
ITERS = 2000


def _compress(y: np.ndarray, sigma: float):
    """mst.py's domain compression of one column from its noisy counts y: (cell -> new cell map, the
    merged cells, the measurement over the new cells, the per-cell weight its query applies)."""
    keep = y >= 3 * sigma
    if keep.all():
        return np.arange(y.size), np.array([], dtype=int), y, np.ones(y.size)
    mapping = np.full(y.size, int(keep.sum()))
    mapping[keep] = np.arange(int(keep.sum()))
    merged = np.flatnonzero(~keep)
    # the merged cell sums `merged.size` noisy counts: its noise scaled back
    scale = 1.0 / math.sqrt(merged.size)
    weights = np.append(np.ones(int(keep.sum())), scale)
    return mapping, merged, np.append(y[keep], y[~keep].sum()) * weights, weights


def mst(train, schema, epsilon: float, delta: float, accountant: str, seed: int):
    """MST's synthetic table (as many rows as the training split) and the numeric bins it read
    numbers in. `accountant` is unused: MST is accounted in zCDP, converted to (ε, δ) exactly
    (`rho_for`)."""
    m = mbi()
    modelled = schema.modelled()
    bins = aim_bins(len(train), epsilon, len(modelled.columns))
    encoder = TokenEncoder(modelled, bins)
    names = [c.spec.name for c in encoder.codecs]
    sizes = [c.size for c in encoder.codecs]
    cells = np.stack([encoder.cells(train, [name])[0] for name in names], axis=1)
    d = len(names)
    budget = RhoBudget(rho_for(epsilon, delta))
    rng = secret_rng()

    # a third of ρ: every column alone, then the domain compressed where the noisy counts are below
    # 3σ
    sigma = math.sqrt(3 * d / (2 * budget.total))
    maps, merged, one_way = [], [], []
    totals = []
    for j, size in enumerate(sizes):
        y = budget.measure(np.bincount(cells[:, j], minlength=size), sigma, rng, "one-way marginal")
        totals.append(y.sum())
        mapping, gone, y2, weights = _compress(y, sigma)
        maps.append(mapping)
        merged.append(gone)
        one_way.append((y2, weights))
    # every column's counts sum to the rows: equal variances per cell
    total = max(1.0, float(np.mean(totals)))
    small = np.stack([maps[j][cells[:, j]] for j in range(d)], axis=1)
    domain = m.Domain(tuple(names), tuple(int(mp.max()) + 1 for mp in maps))
    data = m.Dataset({name: small[:, j] for j, name in enumerate(names)}, domain)
    measurements = [m.LinearMeasurement(y2, (name,), stddev=sigma,
                                        query=(lambda f, w=weights: f.datavector(flatten=True) * w))
                    for name, (y2, weights) in zip(names, one_way)]
    estimator = m.estimation.MirrorDescent()

    # a third: a spanning tree of pairs, each edge chosen by the exponential mechanism
    tree = []
    if d > 1:
        independent = estimator.estimate(domain, measurements, known_total=total, iters=1000)
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
        error = {p: float(np.abs(np.asarray(data.project(p).datavector())
                                 - np.asarray(independent.project(p).datavector())).sum()) for p in pairs}
        component = {name: name for name in names}

        def root(a):
            while component[a] != a:
                a = component[a]
            return a

        select_epsilon = math.sqrt(8 * (budget.total / 3) / (d - 1))
        for _ in range(d - 1):
            open_pairs = [p for p in pairs if root(p[0]) != root(p[1])]
            a, b = open_pairs[budget.select(np.array([error[p] for p in open_pairs]), select_epsilon, 1.0, rng)]
            component[root(a)] = root(b)
            tree.append((a, b))
        # the last third: the tree's pairs
        sigma_pairs = math.sqrt(3 * (d - 1) / (2 * budget.total))
        for pair in tree:
            y = budget.measure(np.asarray(data.project(pair).datavector()), sigma_pairs, rng, "pair marginal")
            measurements.append(m.LinearMeasurement(y, pair, stddev=sigma_pairs))
    model = estimator.estimate(domain, measurements, known_total=total, iters=ITERS)

    with _numpy_global_seed(seed):
        drawn = model.synthetic_data(len(train)).to_dict()
    draw = np.random.default_rng(seed)
    tokens = np.empty((len(train), d), dtype=np.int64)
    for j, (name, codec) in enumerate(zip(names, encoder.codecs)):
        local = np.asarray(drawn[name], dtype=np.int64)
        kept = np.flatnonzero(maps[j] < maps[j].max()) if merged[j].size else np.arange(sizes[j])
        out = np.empty_like(local)
        is_merged = local == len(kept)
        out[~is_merged] = kept[local[~is_merged]]
        if merged[j].size:
            out[is_merged] = draw.choice(merged[j], size=int(is_merged.sum()))
        tokens[:, j] = codec.offset + out
    return schema.derive(encoder.decode(tokens, draw)), bins
