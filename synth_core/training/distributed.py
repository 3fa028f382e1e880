"""One DP-SGD run across several processes, launched by torchrun (`torchrun --nproc-per-node N -m
synth_core fit …`).

torchrun starts N×M copies of the same command and tells each its place (RANK, WORLD_SIZE,
LOCAL_RANK and the rendezvous in MASTER_ADDR/MASTER_PORT). `init_from_env` joins them in one process
group (gloo on the CPU, nccl on CUDA, one GPU per process); `current()` is that group, or a group of
one when torchrun is not in use, so the rest of the core asks the same questions either way.

What the privacy analysis needs of the processes, and where it is done:
- Poisson sampling across ranks (`ShardSampler`): each rank owns a fixed, data-independent shard of the rows
  (rows rank, rank+W, rank+2W, …) and includes each of them in each step's batch independently with the
  plan's rate q, drawn from its own secret generator. Every row thus joins each global batch with
  probability q, exactly the single-process sampled Gaussian mechanism; the global batch has expected size q·n.
  Every rank yields every step, an empty local batch included: Opacus' DistributedUniformWithReplacementSampler
  skips a rank's empty batch, which would leave the ranks a step apart (a hang in the next all-reduce) and a
  step untaken that the plan charged.
- Clipping on each rank, noise once (rank 0 adds N(0, σ²C²)), the clipped sums all-reduced: Opacus'
  distributed optimizers (training.engine) or `FuncDPStep` (which calls `sum_noisy`).
- Every rank runs the same plan (`share`: rank 0 alone runs the mechanisms before training, the noisy count,
  bounds and marginals, and sends their results), takes the same steps (`agree_to_stop`), and so holds the
  same accountant's state; rank 0 alone writes the run folder and the ledger, which records the processes.
"""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Callable, Iterator, TypeVar

import torch
import torch.distributed as dist

from ..errors import ProcessLost
from ..privacy import secret_generator

T = TypeVar("T")

# how long a rank waits in a collective for the others before the run fails (a rank that died is
# usually noticed at once, by its closed connection; a hung one by this)
TIMEOUT = datetime.timedelta(minutes=10)


@dataclass(frozen=True)
class Group:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    launcher: int | None = None  # torchrun's process: if it goes (killed outright), the ranks stop

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def _tensor(self, values) -> torch.Tensor:
        device = f"cuda:{self.local_rank}" if dist.get_backend() == "nccl" else "cpu"
        return torch.tensor(values, dtype=torch.float64, device=device)

    def agree_to_stop(self, asked: bool) -> bool:
        """True on every rank if any rank was asked to stop (a cancel seen by rank 0, a SIGTERM
        anywhere): the ranks stop after the same step."""
        if not self.active:
            return asked
        # torchrun killed outright leaves its processes running, unseen: they stop as after a cancel
        asked = asked or (self.launcher is not None and os.getppid() != self.launcher)
        t = self._tensor([1.0 if asked else 0.0])
        _collective(dist.all_reduce, t, op=dist.ReduceOp.MAX)
        return bool(t.item() > 0)

    def step_totals(self, batch: int, loss: float | None) -> tuple[int, float | None]:
        """The global batch size and mean loss of a step from each rank's own (an empty batch has no
        loss)."""
        if not self.active:
            return batch, loss
        t = self._tensor([float(batch), (loss or 0.0) * batch])
        _collective(dist.all_reduce, t)
        total, loss_sum = int(round(t[0].item())), t[1].item()
        return total, (loss_sum / total if total else None)

    def share(self, compute: Callable[[], T]) -> T:
        """`compute()` run on rank 0 only, its result sent to every rank (pickled: the plan, the
        ledger, the schema with its bounds, the noisy marginals). If rank 0 fails, the others raise
        ProcessLost with its message instead of waiting."""
        if not self.active:
            return compute()
        box: list = [None]
        error = None
        if self.is_main:
            try:
                box[0] = ("ok", compute())
            except BaseException as e:  # noqa: BLE001 - told to the other ranks, then raised here
                box[0], error = ("error", f"{type(e).__name__}: {e}"), e
        _collective(dist.broadcast_object_list, box, src=0)
        if error is not None:
            raise error
        kind, value = box[0]
        if kind == "error":
            raise ProcessLost(f"the first process stopped before training: {value}")
        return value

    def sum_noisy(self, tensors: list[torch.Tensor], add_noise: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """In place: each tensor becomes the sum over ranks, plus noise added once (by rank 0)."""
        for t in tensors:
            if self.is_main or not self.active:
                t.add_(add_noise(t))
            if self.active:
                _collective(dist.all_reduce, t)


_current = Group()


def current() -> Group:
    """The process group this process trains in (a group of one without torchrun)."""
    return _current


def launched_by_torchrun() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_from_env() -> Group:
    """Join the processes torchrun started (a group of one when it did not start this one). CUDA:
    nccl, with this process on GPU LOCAL_RANK; otherwise gloo."""
    global _current
    if not launched_by_torchrun():
        return _current
    rank, world, local = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    # Opacus (imported where training starts, not with this module) before the group starts:
    # imported after it, rank 0 aborted as it exited on a loaded machine (5 runs in 13)
    import opacus  # noqa: F401
    if not dist.is_initialized():
        if torch.cuda.is_available():
            if local >= torch.cuda.device_count():
                raise ValueError(f"process {local} on this machine has no GPU of its own (the machine has "
                                 f"{torch.cuda.device_count()}): start at most that many processes per node")
            torch.cuda.set_device(local)
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", timeout=TIMEOUT)
    _current = Group(rank=rank, world_size=world, local_rank=local, launcher=os.getppid())
    return _current


def most_processes() -> int:
    """How many training processes this machine can run one run in: one per GPU on a CUDA machine
    (nccl needs a GPU each), else one per CPU core (gloo; on a machine with few cores, no faster
    than one process)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else (os.cpu_count() or 1)


def offered_processes() -> list[int]:
    """The choices the app offers: 1 to the number of GPUs when it sees several, else one
    process."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return list(range(1, gpus + 1)) if gpus > 1 else [1]


def shutdown() -> None:
    global _current
    if dist.is_initialized():
        dist.destroy_process_group()
    _current = Group()


_TRANSPORT_ERRORS = ("gloo", "nccl", "connection", "timed out", "broken pipe")


def lost(e: BaseException) -> ProcessLost | None:
    """A failed collective as ProcessLost (another rank died, hung or cannot be reached); None for
    any other error, which is the step's own and is raised as it is."""
    text = str(e).strip()
    if not isinstance(e, (RuntimeError, dist.DistError)) or not any(w in text.lower() for w in _TRANSPORT_ERRORS):
        return None
    first = text.splitlines()[0] if text else type(e).__name__
    # gloo's "[file:line] Read error …: Connection reset by peer"
    why = first.split("] ", 1)[-1].split(". ")[0]
    return ProcessLost(f"another training process stopped or cannot be reached ({why}); the steps taken are "
                       "charged to the ledger")


def _collective(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except (RuntimeError, dist.DistError) as e:
        raise (lost(e) or ProcessLost(f"another training process stopped or cannot be reached ({e})")) from e


class ShardSampler:
    """Poisson batches over this rank's shard of n rows (see the module's docstring): `steps`
    batches of global row indices, empty ones included."""

    def __init__(self, n: int, sample_rate: float, steps: int, group: Group):
        from opacus.utils.uniform_sampler import UniformWithReplacementSampler
        self.shard = torch.arange(group.rank, n, group.world_size)
        self.steps = steps
        self._poisson = (UniformWithReplacementSampler(num_samples=len(self.shard), sample_rate=sample_rate,
                                                       generator=secret_generator(), steps=steps)
                         if len(self.shard) else None)

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[list[int]]:
        # fewer rows than ranks: this rank has none, and still takes every step
        if self._poisson is None:
            for _ in range(self.steps):
                yield []
            return
        for local in self._poisson:
            yield self.shard[torch.as_tensor(local, dtype=torch.long)].tolist()
