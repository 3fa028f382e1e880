"""What a fresh worker pays before its first step that the process timing an estimate has paid
already: starting Python and importing the worker (a run's "start" phase), and readying its device
(CUDA's context and its math library's first call, part of "setup"). Timed in a child process
that does just that, once per process and device, on the machine as it is.

Why not constants: a worker's start, measured on a quiet 2-core machine as 2.6-3.0 s on 29 Nov,
was 3.5 s there on 30 Nov; and on a GPU machine (an H200) the first estimate of DP-TBART's short
runs said 7-18 s where the runs took 14-22 s, the worker importing CUDA's torch and creating its
context as the app's process had done before (benchmarks/RESULTS.md, "Estimates against runs").
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

# the child: the worker's own imports, then the device's first work (nothing for the CPU)
CHILD = """import json, sys, time
import synth_core.worker
imported = time.time()
import torch
device = torch.device(sys.argv[1])
if device.type != "cpu":
    x = torch.ones(256, 256, device=device)
    float((x @ x).sum())
print(json.dumps({"imported": imported, "device_s": time.time() - imported}))
"""
# seconds the child may take before the estimate falls back on the stored constants
CHILD_TIMEOUT_S = 120.0
_MEASURED: dict[str, tuple[float, float]] = {}


def seconds(device, fallback_start_s: float) -> tuple[float, float]:
    """(a worker's start, its device's readying) in seconds on `device`, timed once in this process;
    (fallback_start_s, 0.0) where the child could not run, which is never an error for the
    estimate."""
    key = str(device)
    if key not in _MEASURED:
        _MEASURED[key] = _time_child(key) or (fallback_start_s, 0.0)
    return _MEASURED[key]


def _time_child(device: str) -> tuple[float, float] | None:
    # the worker starts in the repository's root, with this process's environment (runs.jobs)
    root = Path(__file__).resolve().parents[2]
    started = time.time()
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, device], cwd=str(root),
                              capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=True)
        said = json.loads(done.stdout.strip().splitlines()[-1])
        return max(0.0, float(said["imported"]) - started), max(0.0, float(said["device_s"]))
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError, TypeError):
        return None


def forget() -> None:
    """Time the next estimate's worker start anew (tests)."""
    _MEASURED.clear()
