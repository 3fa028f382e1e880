"""Where training runs, what it is called, and what a seed reproduces."""
from __future__ import annotations

import os
import time
from contextlib import contextmanager

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


def free_cores(window_s: float = 0.25) -> int:
    """The CPU cores no other process keeps busy now: this process's cores less the machine's busy
    share over `window_s` (/proc/stat; a core counts from 0.7 of one busy), at least 1. Beside one
    busy process on 2 cores, a DP-SGD step on two threads took 2.3 s against 0.15 s on one (each
    thread waits for the other at every operation; benchmarks/RESULTS.md, "Estimates against
    runs"). $SYNTH_CPU_THREADS names the count outright; $OMP_NUM_THREADS caps it."""
    pinned, cap = (os.environ.get(name, "").strip()
                   for name in ("SYNTH_CPU_THREADS", "OMP_NUM_THREADS"))
    if pinned.isdigit() and int(pinned) > 0:
        return int(pinned)
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
             else os.cpu_count() or 1)
    if cap.isdigit() and int(cap) > 0:
        cores = min(cores, int(cap))

    def counters() -> tuple[float, float]:
        with open("/proc/stat") as f:
            ticks = [float(x) for x in f.readline().split()[1:]]
        return sum(ticks), ticks[3] + (ticks[4] if len(ticks) > 4 else 0.0)  # all, idle + iowait
    try:
        total, idle = counters()
        time.sleep(window_s)
        total2, idle2 = counters()
    except (OSError, ValueError, IndexError):
        return cores
    busy = (os.cpu_count() or cores) * (1.0 - (idle2 - idle) / max(total2 - total, 1e-9))
    return max(1, min(cores, cores - int(busy + 0.3)))


def use_free_cores() -> int:
    """Train and draw on the cores free now (free_cores): torch's threads and numpy's (BLAS and
    OpenMP pools, threadpoolctl; a calibrated draw is numpy's); how many."""
    from threadpoolctl import threadpool_limits
    threads = free_cores()
    torch.set_num_threads(threads)
    threadpool_limits(limits=threads)
    return threads


@contextmanager
def torch_threads(threads: int):
    """torch and numpy on `threads` threads within the block (a probe timed as the run will
    train)."""
    from threadpoolctl import threadpool_limits
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(before)


def seed_everything(seed: int | None) -> None:
    """Seed torch's and numpy's global generators, which give what a seed reproduces: initial
    weights and a loss's own randomness (diffusion noise, masks). DP randomness never comes from
    here: the noise and the Poisson batches are drawn from privacy.secret_generator, fresh for every
    run."""
    if seed is None:
        return
    torch.manual_seed(seed)
    np.random.seed(seed % (2**32))
