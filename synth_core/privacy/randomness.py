"""DP randomness: the noise added to gradients and statistics, Poisson sampling, a mechanism's
draws.

Every generator here is seeded from the operating system's CSPRNG on every call, never derived from
the run's seed and never stored. An attacker who reads the code and knows the seed, the other rows
and the released output still cannot replay a run. The run's seed governs only what is not part of a
privacy mechanism: initial weights, splits, and sampling from the trained model.
"""
from __future__ import annotations

import secrets

import numpy as np
import torch


def secret_generator(device: torch.device | str = "cpu") -> torch.Generator:
    """A torch generator for DP randomness on `device`, seeded with 64 bits from the OS's CSPRNG.

    A new one for every run (and every mechanism): the seed is held nowhere but in the generator, so
    neither the run's seed nor anything in the run folder can replay the noise or the batches."""
    gen = torch.Generator(device=device)
    gen.manual_seed(secrets.randbits(64))
    return gen


def secret_rng() -> np.random.Generator:
    """A numpy generator for a mechanism's draws (DP quantiles, measurements), seeded with 128 bits
    from the OS's CSPRNG and never stored."""
    return np.random.Generator(np.random.PCG64(secrets.randbits(128)))


def secure_gaussian(std: float, shape) -> np.ndarray:
    """N(0, std²) noise of `shape` for a measurement (marginals, quantile histograms, AIM's rounds),
    drawn as DP-SGD's noise is: Opacus' secure mode (`gaussian_noise`) from a fresh secret
    generator. NumPy's Gaussian is a single floating-point draw, whose low-order bits can give the
    true value away (Mironov 2012)."""
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
    like = torch.zeros(shape, dtype=torch.float64)
    return gaussian_noise(float(std), like, secret_generator()).numpy()


def noisy_counts(counts: np.ndarray, std: float) -> np.ndarray:
    """Counts plus secure Gaussian noise of `std`, rounded to whole numbers before anything keeps
    them (the rounding is post-processing; it leaves no fraction that carries the draw's low-order
    bits)."""
    counts = np.asarray(counts, dtype=float)
    return np.round(counts + secure_gaussian(std, counts.shape)) + 0.0  # + 0.0: no "-0"


def gaussian_noise(std: float, like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """N(0, std²) noise shaped like `like`, drawn as Opacus' secure mode does (the sum of four draws
    halved, the first draw thrown away), which resists attacks on the floating-point representation
    of a single Gaussian draw (Mironov 2012; Holohan et al. 2021)."""
    from opacus.optimizers.optimizer import _generate_noise  # here: importing Opacus takes 2 s
    return _generate_noise(std, like, generator=generator, secure_mode=True)
