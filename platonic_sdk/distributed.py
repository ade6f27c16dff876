"""Scale-out over ranks with torch.distributed (launch with `torchrun --nproc_per_node N script.py`).

Feature extraction: rank r encodes the r-th contiguous slice of the items; the slices are gathered
in rank order, so the result is the single-process result. Work lists (e.g. evaluation cells):
item i runs on rank i mod N; results come back in list order. Without an initialised process group
every function runs as a single process (rank 0 of 1), so one script serves both cases.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

from .features import site_features
from .items import take
from .errors import PlatonicError
from .protocol import DualEncoder

__all__ = ["init", "rank_and_world", "local_device", "shard_range", "gather_rows", "extract_sharded", "map_sharded"]

T = TypeVar("T")
R = TypeVar("R")


def init(backend: str | None = None) -> tuple[int, int]:
    """Join the process group torchrun describes (env RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).

    Backend: nccl when CUDA is available, gloo otherwise; each rank takes GPU LOCAL_RANK. Returns (rank, world).
    """
    if not dist.is_initialized():
        backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group(backend)
    return rank_and_world()


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


def gather_rows(rows: Tensor, dst: int | None = None) -> Tensor | None:
    """Concatenate every rank's rows in rank order, on all ranks (dst None) or on rank `dst` only (None elsewhere)."""
    rank, world = rank_and_world()
    if world == 1:
        return rows
    device = local_device()
    local = rows.to(device).contiguous()
    count = torch.tensor([local.shape[0]], device=device)
    counts = [torch.zeros_like(count) for _ in range(world)]
    dist.all_gather(counts, count)
    sizes = [int(c) for c in counts]
    padded = torch.zeros((max(sizes), *local.shape[1:]), dtype=local.dtype, device=device)
    padded[: local.shape[0]] = local
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded)
    if dst is not None and rank != dst:
        return None
    return torch.cat([part[:size] for part, size in zip(parts, sizes)]).to(rows.device)


def extract_sharded(
    encoder: DualEncoder,
    items: Sequence[Any],
    batch_size: int = 64,
    workers: int | None = None,
    amp: bool = False,
    dst: int | None = None,
) -> tuple[Tensor, Tensor] | None:
    """(S, Z) of all `items` (see features.site_features), each rank encoding its contiguous slice; gathered in order.

    Every rank holds the same encoder, placed on its own device (`encoder.to(local_device())`).
    """
    rank, world = rank_and_world()
    if len(items) < world:
        raise PlatonicError(f"{len(items)} items cannot be sharded over {world} ranks")
    mine = shard_range(len(items), rank, world)
    S, Z = site_features(encoder, take(items, mine), batch_size, workers=workers, amp=amp)
    S_all, Z_all = gather_rows(S, dst), gather_rows(Z, dst)
    return None if S_all is None else (S_all, Z_all)


def map_sharded(fn: Callable[[T], R], work: Sequence[T], dst: int | None = None) -> list[R] | None:
    """[fn(w) for w in work] with item i computed on rank i mod world; results (picklable) in list order.

    An exception on any rank is re-raised on every rank (naming the item), so no rank waits forever.
    """
    rank, world = rank_and_world()
    mine: list[tuple[int, bool, Any]] = []
    for i in range(rank, len(work), world):
        try:
            mine.append((i, True, fn(work[i])))
        except Exception as exc:  # reported to every rank below
            mine.append((i, False, f"{type(exc).__name__}: {exc}"))
    if world == 1:
        gathered = [mine]
    else:
        gathered = [None] * world
        dist.all_gather_object(gathered, mine)
    results: list[Any] = [None] * len(work)
    for i, ok, value in (entry for part in gathered for entry in part):
        if not ok:
            raise PlatonicError(f"work item {i} failed on rank {i % world}: {value}")
        results[i] = value
    return results if dst is None or rank == dst else None
