"""Where training runs, what it is called, and what a seed reproduces."""
from __future__ import annotations

import numpy as np
import torch


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """CUDA when present, else the CPU; an explicit choice wins (ValueError if this machine lacks
    it)."""
    if not device:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"unknown device {device!r}: use cpu, cuda or cuda:N") from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}: use cpu, cuda or cuda:N")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r}: this machine has no CUDA GPU; use cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: this machine has {torch.cuda.device_count()} GPU(s)")
    return dev


AUTOMATIC = "automatic"  # what a request that names no device gets: pick_device(None)


def available_devices() -> list[str]:
    """The devices a steward may name for a run on this machine: automatic, the CPU, then each
    GPU."""
    gpus = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return [AUTOMATIC, "cpu", *gpus]


def device_label(device: str | torch.device | None = None) -> str:
    """A readable name for a device (None: the one training would pick): the GPU's name, or the CPU
    and the threads torch uses."""
    dev = pick_device(device)
    if dev.type == "cuda":
        return f"GPU: {torch.cuda.get_device_name(dev)}"
    return f"CPU ({torch.get_num_threads()} threads)"


def seed_everything(seed: int | None) -> None:
    """Seed torch's and numpy's global generators, which give what a seed reproduces: initial
    weights and a loss's own randomness (diffusion noise, masks). DP randomness never comes from
    here: the noise and the Poisson batches are drawn from privacy.secret_generator, fresh for every
    run."""
    if seed is None:
        return
    torch.manual_seed(seed)
    np.random.seed(seed % (2**32))
