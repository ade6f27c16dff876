"""Scale-out over ranks with torch.distributed (launch with `torchrun --nproc-per-node N ...`).

Feature extraction (`features.site_features` inside a `sharding()` block): rank r encodes the r-th
contiguous run of whole batches, and the rows are gathered in rank order, so every rank holds exactly
the single-process result (the same batches go through the model). Work lists (e.g. evaluation
cells, `map_sharded`): item i runs on rank i mod N; results come back in list order on every rank.
Without an initialised process group every function runs as a single process (rank 0 of 1), so one
script serves both cases.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator, Sequence, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

from ..errors import PlatonicError

__all__ = [
    "init", "launched", "launch", "rank_and_world", "local_device", "shard_range", "batch_range", "gather_rows",
    "agreed_min", "barrier", "gather_objects", "raise_failures", "on_rank0", "map_sharded", "sharding", "sharded",
]

T = TypeVar("T")
R = TypeVar("R")


def launched() -> bool:
    """Whether this process was started by torchrun (or another launcher that sets RANK and WORLD_SIZE)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def init(backend: str | None = None) -> tuple[int, int]:
    """Join the process group torchrun describes (env RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

    Backend: nccl when CUDA is available, gloo otherwise; under nccl each rank takes GPU LOCAL_RANK. Returns (rank, world).
    """
    if not dist.is_initialized():
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend == "nccl":
            local, gpus = int(os.environ.get("LOCAL_RANK", 0)), torch.cuda.device_count()
            if local >= gpus:
                raise PlatonicError(f"LOCAL_RANK {local} has no GPU: this machine has {gpus}; start at most {gpus} processes per node")
            torch.cuda.set_device(local)
        dist.init_process_group(backend)
    return rank_and_world()


def launch(device: str | None) -> str | None:
    """Join torchrun's process group and return the device this rank's models go to.

    `device` None or "cuda" with CUDA present: GPU LOCAL_RANK over nccl; "cpu" (or no CUDA): the CPU over gloo.
    A numbered GPU is refused when there are several ranks (they would share it).
    """
    cuda = (device is None and torch.cuda.is_available()) or str(device or "").startswith("cuda")
    numbered = ":" in str(device or "")
    if cuda and numbered and int(os.environ.get("WORLD_SIZE", 1)) > 1:
        raise PlatonicError(f"--device {device} puts every rank on one GPU; give --device cuda (each rank takes GPU LOCAL_RANK)")
    init("nccl" if cuda else "gloo")
    return str(local_device()) if cuda and not numbered else device


def rank_and_world() -> tuple[int, int]:
    """(rank, world size); (0, 1) when no process group is initialised."""
    if not dist.is_initialized():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()


def local_device() -> torch.device:
    """This rank's device: its GPU under nccl, else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def shard_range(n: int, rank: int, world: int) -> range:
    """Contiguous slice of range(n) for `rank`; slice sizes differ by at most one, in rank order."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"rank {rank} is not in a world of {world}")
    base, extra = divmod(n, world)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (rank < extra))


def batch_range(n: int, batch_size: int, rank: int, world: int) -> range:
    """The items of `rank`'s contiguous run of whole batches of range(n) (empty when there are fewer batches than ranks)."""
    mine = shard_range(-(-n // batch_size), rank, world)
    return range(min(mine.start * batch_size, n), min(mine.stop * batch_size, n))


def gather_objects(value: Any) -> list[Any]:
    """Every rank's (picklable) `value`, in rank order, on every rank."""
    rank, world = rank_and_world()
    if world == 1:
        return [value]
    out: list[Any] = [None] * world
    dist.all_gather_object(out, value)
    return out


def agreed_min(value: int) -> int:
    """The smallest of every rank's integer `value` (e.g. a flag that holds on all ranks, a batch size that fits on all)."""
    if rank_and_world()[1] == 1:
        return int(value)
    t = torch.tensor([int(value)], device=local_device())
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return int(t)


def barrier() -> None:
    """Wait until every rank gets here (nothing to wait for in a single process)."""
    if rank_and_world()[1] > 1:
        dist.barrier()


def gather_rows(rows: Tensor | None, failure: BaseException | None = None) -> Tensor:
    """Every rank's rows concatenated in rank order, on every rank; an idle rank passes None (no rows).

    At least one rank must hold rows: they give the trailing shape and dtype. A rank that failed to make
    its rows passes its exception as `failure`: it is raised on every rank (see `raise_failures`).
    """
    world = rank_and_world()[1]
    if world == 1:
        if failure is not None:
            raise failure
        if rows is None:
            raise PlatonicError("no rows to gather")
        return rows
    shapes = gather_objects(failure_text(failure) if failure is not None else
                            None if rows is None else (rows.shape[0], tuple(rows.shape[1:]), rows.dtype))
    raise_failures([s if isinstance(s, str) else None for s in shapes], failure)
    held = [s for s in shapes if s is not None]
    if not held or len({s[1:] for s in held}) > 1:
        raise PlatonicError(f"the ranks hold rows of shapes and dtypes {shapes}: nothing to gather, or they disagree")
    trailing, dtype = held[0][1], held[0][2]
    sizes = [0 if s is None else s[0] for s in shapes]
    device = local_device()
    padded = torch.zeros((max(sizes), *trailing), dtype=dtype, device=device)
    if rows is not None:
        padded[: rows.shape[0]] = rows.to(device)
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    home = rows.device if rows is not None else torch.device("cpu")
    return torch.cat([part[:size] for part, size in zip(parts, sizes)]).to(home)


def failure_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def raise_failures(failures: Sequence[str | None], own: BaseException | None = None) -> None:
    """Raise on every rank when any rank failed (`failures[r]`: rank r's error text, or None): this rank's own
    exception `own` where it has one, else a PlatonicError naming the first failed rank and quoting its error."""
    if own is not None:
        raise own
    for rank, text in enumerate(failures):
        if text is not None:
            raise PlatonicError(f"rank {rank} failed: {text}")


def on_rank0(fn: Callable[[], R]) -> R:
    """fn() on rank 0 only, its (picklable) result on every rank; an exception there is raised on every rank
    (on rank 0 as itself, elsewhere as a PlatonicError quoting it), so no rank waits forever."""
    rank, world = rank_and_world()
    if world == 1:
        return fn()
    box: list[Any] = [None]
    error: BaseException | None = None
    if rank == 0:
        try:
            box = [(None, fn())]
        except Exception as exc:  # reported to every rank below
            error, box = exc, [(failure_text(exc), None)]
    dist.broadcast_object_list(box, src=0)
    raise_failures([box[0][0]], error)
    return box[0][1]


def map_sharded(fn: Callable[[T], R], work: Sequence[T], label: Callable[[int, T], str] | None = None) -> list[R]:
    """[fn(w) for w in work] with item i computed on rank i mod world; results (picklable) in list order on every rank.

    An exception on any rank is re-raised on every rank as a PlatonicError naming the item (`label(i, w)`,
    default "work item i") and the rank, so no rank waits forever. A single process runs fn plainly.
    """
    rank, world = rank_and_world()
    if world == 1:
        return [fn(w) for w in work]
    mine: list[tuple[int, bool, Any]] = []
    for i in range(rank, len(work), world):
        try:
            mine.append((i, True, fn(work[i])))
        except Exception as exc:  # reported to every rank below
            mine.append((i, False, failure_text(exc)))
    gathered = sorted(entry for part in gather_objects(mine) for entry in part)
    for i, ok, value in gathered:
        if not ok:
            name = label(i, work[i]) if label is not None else f"work item {i}"
            raise PlatonicError(f"{name} failed on rank {i % world}: {value}")
    return [value for _, _, value in gathered]


_SHARDING: list[bool] = []


@contextlib.contextmanager
def sharding() -> Iterator[None]:
    """Within the block, `features.site_features` splits its batches over the ranks (every rank must make
    the same calls in the same order: run the same code on the same inputs)."""
    _SHARDING.append(True)
    try:
        yield
    finally:
        _SHARDING.pop()


def sharded() -> bool:
    """Whether extraction is split over more than one rank here (inside `sharding()`, in a process group)."""
    return bool(_SHARDING) and rank_and_world()[1] > 1
