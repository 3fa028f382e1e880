"""What AIM asks of its graphical model each round, made cheap on wide tables: the model's marginal
on every candidate clique (`project_many`) and whether measuring a candidate keeps the model small
enough (`SizeCheck`).

A round of AIM scores every candidate of the workload (a table of 86 columns has 3,655 pairs)
against the model. Two facts keep that affordable (benchmarks/history/2026-11-27.md, "AIM on wide
tables"):

- the model's columns fall into connected components (columns linked by the cliques it has measured); columns of
  different components are independent under the model, so a candidate that spans several is the outer product
  of its parts' marginals, and a part is contracted over its own component's factors only;
- mbi's model size for a candidate (its junction tree with the candidate added) costs ~40 ms on 86 columns, so it
  is asked lazily: only of the candidates the exponential mechanism reaches (`privacy.selection`), not of all.
"""
from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np

# a candidate's marginal is contracted by opt_einsum when its plan costs at most this many
# operations, else by mbi's variable elimination (uncompiled: it would compile one function per
# clique and model structure)
EINSUM_MAX_COST = 2e7
# a product of a component's factors (each at most 1) whose largest cell is smaller than this is
# contracted again in logs: float64's smallest normal number is about 1e-308
TINY_PRODUCT = 1e-250


def components(model) -> dict:
    """Each column of the model's domain -> a label shared by the columns its measured cliques
    link."""
    parent = {a: a for a in model.domain.attributes}

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for cl in model.cliques:
        for a in cl[1:]:
            parent[find(a)] = find(cl[0])
    return {a: find(a) for a in parent}


def project_many(model, cliques: list) -> dict:
    """The model's marginal (counts, flat in the clique's order) on each clique. A clique inside one
    of the model's own comes from its marginals; a clique spanning components is the outer product
    of its parts (independent under the model); a part inside one component is the sum over that
    component's other columns of the product of its factors, contracted by opt_einsum where its plan
    is cheap (in logs, pair by pair, where the product underflows), else by mbi's elimination
    (uncompiled)."""
    import jax
    import opt_einsum

    names = list(model.domain.attributes)
    axis = {a: i for i, a in enumerate(names)}
    label = components(model)
    operands, logs = defaultdict(list), defaultdict(list)
    for cl in model.cliques:
        factor = model.potentials[cl]
        log = np.asarray(factor.values, dtype=np.float64)
        log, where = log - log.max(), [axis[a] for a in factor.domain.attributes]
        operands[label[cl[0]]] += [np.exp(log), where]
        logs[label[cl[0]]] += [log, where]
    total = float(model.total)
    parts: dict[tuple, np.ndarray] = {}

    def part(attrs: tuple) -> np.ndarray:
        """Counts on columns of one component, shaped by their sizes, in their order."""
        if attrs in parts:
            return parts[attrs]
        shape = [model.domain.size(a) for a in attrs]
        counts = None
        if model.marginals.supports(attrs):
            counts = np.asarray(model.marginals.project(attrs).datavector())
        else:
            ops, out = operands[label[attrs[0]]], [axis[a] for a in attrs]
            path, info = opt_einsum.contract_path(*ops, out, optimize="greedy")
            if info.opt_cost <= EINSUM_MAX_COST:
                counts = _normalised(opt_einsum.contract(*ops, out, optimize=path).ravel(), total)
                if counts is None:  # the product underflowed: again in logs, pair by pair
                    log = contract_log(logs[label[attrs[0]]], out, path).ravel()
                    with np.errstate(under="ignore"):
                        counts = _normalised(np.exp(log - log.max()), total)
            if counts is None:
                with jax.disable_jit():
                    counts = np.asarray(model.project(attrs).datavector())
        parts[attrs] = counts = np.asarray(counts, dtype=np.float64).reshape(shape)
        return counts

    out = {}
    for cl in cliques:
        cl = tuple(cl)
        groups: dict = {}
        for a in cl:
            groups.setdefault(label[a], []).append(a)
        if len(groups) == 1:
            out[cl] = part(cl).ravel()
            continue
        spans = list(groups.values())
        order = [a for g in spans for a in g]
        joint = part(tuple(spans[0]))
        for g in spans[1:]:
            joint = np.multiply.outer(joint, part(tuple(g))) / total
        out[cl] = np.transpose(joint, [order.index(a) for a in cl]).ravel()
    return out


def _normalised(counts: np.ndarray, total: float) -> np.ndarray | None:
    """Counts scaled to `total`; None where they cannot be trusted: not finite, or so small that
    cells may have underflowed (the largest under TINY_PRODUCT)."""
    if not counts.size or not np.max(counts) >= TINY_PRODUCT:
        return None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        counts = counts * (total / counts.sum())
    return counts if np.isfinite(counts).all() else None


def contract_log(ops: list, out: list, path: list) -> np.ndarray:
    """The log of the einsum of exp(`ops`) (log-arrays and their axes, interleaved) onto the axes
    `out`, pair by pair along `path` (opt_einsum's), up to an additive constant. Each pair is
    contracted by einsum on its parts shifted to their largest entry, or where even that
    underflows to zeros, by a log-sum-exp over their broadcast sum. Contracted at once, the
    product of a component's factors on ames (80 columns; 6 factors) underflowed to zeros, and
    mbi's uncompiled elimination that stood in took 20-120 s a round."""
    import opt_einsum

    arrays, axes = list(ops[0::2]), [list(a) for a in ops[1::2]]
    for step in path:
        pairs = [(arrays.pop(i), axes.pop(i)) for i in sorted(step, reverse=True)]
        # the axes still needed: the output's and those of the operands not yet contracted
        kept = sorted({a for _, ax in pairs for a in ax} & set(out).union(*map(set, axes)))
        shifts = [float(np.max(a)) if a.size else 0.0 for a, _ in pairs]
        with np.errstate(under="ignore"):
            part = opt_einsum.contract(*[v for (a, ax), s in zip(pairs, shifts)
                                         for v in (np.exp(a - s), ax)], kept)
        if part.size and np.max(part) > 0 and np.isfinite(part).all():
            with np.errstate(divide="ignore"):
                arrays.append(np.log(part) + sum(shifts))
        else:
            arrays.append(_log_sum_exp_pair(pairs, kept))
        axes.append(kept)
    (log,), (axes_left,) = arrays, axes
    return np.transpose(log, [axes_left.index(a) for a in out]) if axes_left else log


def _log_sum_exp_pair(pairs: list, kept: list) -> np.ndarray:
    """log Σ exp(a + b) over the axes not `kept`, for log-arrays with their axes, on the union of
    their axes (sorted, as `kept` is)."""
    from scipy.special import logsumexp

    union = sorted({a for _, ax in pairs for a in ax})
    summed = 0.0
    for a, ax in pairs:
        a = np.transpose(a, sorted(range(len(ax)), key=lambda i: ax[i]))
        summed = summed + a.reshape([a.shape[sorted(ax).index(u)] if u in ax else 1
                                     for u in union])
    dropped = tuple(i for i, u in enumerate(union) if u not in kept)
    return logsumexp(summed, axis=dropped) if dropped else np.asarray(summed)


class SizeCheck:
    """Whether measuring a candidate keeps the model within `limit` MiB (mbi's junction-tree size
    with the candidate added), asked lazily and remembered for this round's model; a candidate
    inside a clique the model holds always fits."""

    def __init__(self, model, limit: float):
        from .aim import mbi

        self._size = mbi().junction_tree.hypothetical_model_size
        self.domain, self.cliques, self.limit = model.domain, list(model.cliques), limit
        self.held = {tuple(sub) for c in self.cliques for sub in _subsets(c)}
        self.memo: dict[tuple, bool] = {}

    def __call__(self, clique) -> bool:
        clique = tuple(clique)
        if clique in self.held:
            return True
        if clique not in self.memo:
            self.memo[clique] = self._size(self.domain, self.cliques + [clique]) <= self.limit
        return self.memo[clique]


def random_cliques(domain, held: list, candidates: list, count: int, limit: float, rng,
                   most_cells: float = float("inf")) -> list:
    """Up to `count` candidates at random of at most `most_cells` cells that, with the cliques
    `held`, keep the model within `limit` MiB: what a time estimate's probe adds to its model so
    that its timed rounds come after as many cliques as a run's middle round holds (a round's
    seconds grow with them, `models.aim.AIM.timed_plan`)."""
    from .aim import mbi

    size, held, picked = mbi().junction_tree.hypothetical_model_size, list(held), []
    for i in rng.permutation(len(candidates)):
        if len(picked) >= count:
            break
        clique = tuple(candidates[i])
        if domain.size(clique) <= most_cells and size(domain, held + [clique]) <= limit:
            held.append(clique)
            picked.append(clique)
    return picked


def largest_allowed(weights: np.ndarray, allowed) -> float:
    """The largest weight among the candidates `allowed` accepts (the exponential mechanism's
    sensitivity over them), asking `allowed` level by level from the top: usually of one
    candidate."""
    for w in np.unique(weights)[::-1]:
        if any(allowed(int(i)) for i in np.flatnonzero(weights == w)):
            return float(w)
    raise ValueError("no candidate is allowed")


def _subsets(clique: tuple):
    for r in range(1, len(clique) + 1):
        yield from itertools.combinations(clique, r)


# memory maps a process may hold before the compiled programs are freed (Linux allows 65,530 by
# default)
MAPS_SOFT_LIMIT = 20_000


def release_compiled(rounds_done: int) -> None:
    """Free the programs JAX compiled for the model so far, once the process holds many memory maps.
    mbi compiles its estimation anew for each model structure, and every round adds a clique: each
    compiled program stays loaded and holds memory maps (~600 a round on 47 columns), and a long run
    stopped at the kernel's limit with "LLVM ERROR: Unable to allocate section memory" (AER's STAR
    at ε = 1, ~100 rounds in). Freeing them every round keeps the maps flat but costs ~50% more time
    a round (what is reused is compiled again), so it waits for MAPS_SOFT_LIMIT (every 10 rounds
    where the maps cannot be counted)."""
    import jax

    try:
        with open("/proc/self/maps", "rb") as f:
            many = sum(1 for _ in f) > MAPS_SOFT_LIMIT
    except OSError:
        many = rounds_done % 10 == 0
    if many:
        jax.clear_caches()
