"""AIM's options, its sizes, its workload (the marginals it may select) and private-pgm's `mbi`,
imported on first use; the mechanism is models.aim."""
from __future__ import annotations

import contextlib
import itertools
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from .. import import_clock

# mbi runs on JAX; in float64, as mbi advises for tables of over 100k rows
_MBI = None


def mbi():
    """private-pgm's mbi, imported on first use (JAX takes seconds to load)."""
    global _MBI
    if _MBI is None:
        compile_quickly()
        with import_clock.timed("mbi", "jax"):
            import jax
            jax.config.update("jax_enable_x64", True)
            keep_compiled(jax)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import mbi as module
        _MBI = module
    return _MBI


# XLA's flag for how hard LLVM optimises the CPU programs it compiles (its default: 2)
LLVM_LEVEL_FLAG = "--xla_backend_optimization_level"


def compile_quickly(environ=os.environ) -> None:
    """Have XLA compile mbi's programs at LLVM's level 0. mbi compiles its estimation anew for each
    model structure, and an AIM round is mostly that compiling: on HMDA 2.3 of a round's 2.9 s, on
    Ames 10-14 of 12-17 s (two programs a round: the mirror-descent steps and the marginals). At
    level 0 a round took 0.80 of the time (median of 22 paired runs on 11 tables) and the model is
    the same (benchmarks/RESULTS.md, "AIM's compiling"). XLA reads $XLA_FLAGS when JAX first makes
    its CPU backend, so this is set before mbi is imported; a level the environment names is kept.
    """
    flags = environ.get("XLA_FLAGS", "")
    if LLVM_LEVEL_FLAG not in flags:
        environ["XLA_FLAGS"] = f"{flags} {LLVM_LEVEL_FLAG}=0".strip()


# the most JAX's compiled programs may take on disk before the oldest go, when a process starts (a
# round on 80 columns adds about 0.8 MB)
COMPILED_BYTES = 512 * 2 ** 20


def keep_compiled(jax) -> None:
    """JAX's persistent compilation cache, in the workbench home's cache/jax unless
    $JAX_COMPILATION_CACHE_DIR says where. mbi compiles its estimation anew for each model
    structure: on Ames (79 columns, AIM's tiny size, 5 rounds) 463 small programs took 17 of the
    fit's 28 s, and the next fit, in a new process, 11 s. A program is compiled from shapes (the
    public schema's domains and the model's structure); the rows reach it only as arguments, never
    as constants. Every program is kept (JAX keeps only those that took a second to compile).

    The folder is held under COMPILED_BYTES here, once a process (`prune_compiled`), not by JAX
    ($JAX_COMPILATION_CACHE_MAX_SIZE): JAX's bound reads every entry's size and last use on every
    write, so a run slowed as it compiled. AIM on DoctorContacts at ε = 1 had written 2,100
    programs after 20 rounds of 3-5 s, and its 21st round took 86 s, 55% of it in those reads."""
    if not jax.config.jax_compilation_cache_dir:
        from ..home import cache_root
        jax.config.update("jax_compilation_cache_dir", str(cache_root() / "jax"))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if "JAX_COMPILATION_CACHE_MAX_SIZE" not in os.environ:
        prune_compiled(jax.config.jax_compilation_cache_dir, COMPILED_BYTES)


def prune_compiled(folder, most: int) -> int:
    """The newest programs in the cache `folder` that fit in `most` bytes kept, the older deleted,
    with the last-use records JAX writes when it bounds the folder itself (none are needed when it
    does not). Returns the bytes kept. A program another process deletes meanwhile is compiled
    again where it is asked for."""
    entries = []
    for path in Path(folder).glob("*-cache"):
        with contextlib.suppress(OSError):
            stat = path.stat()
            entries.append((stat.st_mtime, stat.st_size, path))
    kept = 0
    for _, size, path in sorted(entries, key=lambda e: e[0], reverse=True):
        if kept + size <= most:
            kept += size
            continue
        for gone in (path, path.with_name(path.name[: -len("-cache")] + "-atime")):
            with contextlib.suppress(OSError):
                gone.unlink()
    for record in Path(folder).glob("*-atime"):
        if not record.with_name(record.name[: -len("-atime")] + "-cache").exists():
            with contextlib.suppress(OSError):
                record.unlink()
    return kept


@dataclass
class AIMConfig:
    # public bins per numeric column; 0: from the rows × ε per column (recommend.aim_bins)
    n_bins: int = 0
    degree: int = 2                 # the workload: every set of this many columns ...
    max_cells: int = 10_000         # ... with at most this many cells
    # MiB the graphical model's tables may reach once the budget is spent
    max_model_size: float = 80.0
    # planned rounds (0: 16 per column, AIM's default); the budget ends them
    rounds: int = 0
    iters: int = 1000               # mirror-descent iterations per round
    numeric_decoding: str = "uniform"
    # the workload adds the target column (schema role) with each pair of others
    target_triples: bool = True
    # of ρ, for the first measurement of every column (0: a round's worth each, AIM's)
    one_way_share: float = 0.0
    # merge the cells the first measurement finds below 3σ into one (MST's domain compression)
    compress: bool = False
    # the rounds are held within this many times those expected before the run, either way
    # (models.aim_rounds; 0: as many as the budget's annealing gives, AIM's own)
    rounds_band: float = 1.25

    ZERO_OK = frozenset({"n_bins", "rounds"})  # 0: chosen from the rows and ε, 16 a column

    def check(self) -> None:
        for name in ("n_bins", "degree", "max_cells", "iters"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or (v < 0 or v == 1 if name == "n_bins" else v < 1):
                least = "0 (chosen from the rows and ε) or at least 2" if name == "n_bins" else "at least 1"
                raise ValueError(f"{name} must be a whole number, {least}, not {v!r}")
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 0:
            raise ValueError(f"rounds must be a whole number (0: 16 per column), not {self.rounds!r}")
        if isinstance(self.one_way_share, bool) or not isinstance(self.one_way_share, (int, float)) \
                or not 0 <= self.one_way_share < 1:
            raise ValueError(f"one_way_share must be a share of ρ in [0, 1), not {self.one_way_share!r}")
        if not isinstance(self.max_model_size, (int, float)) or not self.max_model_size > 0:
            raise ValueError(f"max_model_size must be a positive number of MiB, not {self.max_model_size!r}")
        if not isinstance(self.compress, bool):
            raise ValueError(f"compress must be true or false, not {self.compress!r}")
        if isinstance(self.rounds_band, bool) or not isinstance(self.rounds_band, (int, float)) \
                or not (self.rounds_band == 0 or self.rounds_band >= 1):
            raise ValueError("rounds_band must be 0 (unbounded) or at least 1, "
                             f"not {self.rounds_band!r}")
        if self.numeric_decoding not in ("uniform", "midpoint"):
            raise ValueError(f"numeric_decoding must be 'uniform' or 'midpoint', not {self.numeric_decoding!r}")


def workload(sizes: dict[str, int], degree: int, max_cells: int, target: str | None = None) -> dict[tuple, float]:
    """AIM's candidates: every marginal of the workload (each set of `degree` columns, and each of
    the public `target` column with `degree` others, with at most max_cells cells, weight 1) and
    every marginal they contain, scored by how many workload columns it covers. The target's sets
    let the model learn what predicts it from two columns at once (train-on-synthetic figures:
    benchmarks/history/2026-11-27.md)."""
    names = list(sizes)
    sets = [cl for cl in itertools.combinations(names, min(degree, len(names)))
            if math.prod(sizes[c] for c in cl) <= max_cells]
    if target in sizes:
        others = [c for c in names if c != target]
        sets += [(target, *cl) for cl in itertools.combinations(others, min(degree, len(others)))
                 if sizes[target] * math.prod(sizes[c] for c in cl) <= max_cells]
    closure = {sub for cl in sets for r in range(1, len(cl) + 1) for sub in itertools.combinations(cl, r)}
    closure |= {(name,) for name in names}
    # a marginal's weight, Σ over the workload's sets of the columns it shares with each, is the sum
    # over its columns of the sets that hold that column
    holding = {name: 0 for name in names}
    for w in sets:
        for name in w:
            holding[name] += 1
    return {cl: float(sum(holding[c] for c in cl)) or 1.0 for cl in sorted(closure, key=len)}


PRESETS = {
    # a round's cost is mostly compiling the estimation for the model's new structure: iterations
    # are cheap
    "tiny": {"model": dict(n_bins=10, max_model_size=1.0, rounds=8, iters=100), "train": {}},
    # the model's size bounds how long a round takes (Adult on 2 CPU cores:
    # benchmarks/history/2026-11-27.md); `paper` is AIM's own default (80 MiB), for a long run
    "quick": {"model": dict(max_model_size=2.0, iters=1000), "train": {}},
    "cpu": {"model": dict(max_model_size=5.0, iters=1000), "train": {}},
    "paper": {"model": dict(max_model_size=80.0, iters=1000), "train": {}},  # AIM's own model size
}
