"""What source fine-tuning and the LoRA route share: the seeded minibatch loop (with progress) and recipe checks."""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Iterator

import attrs
import torch
from torch import Tensor
from ..progress import progress as progress_bar

from ..errors import PlatonicError


def positive(_inst: Any, attribute: attrs.Attribute, value: float) -> None:
    """attrs validator: value > 0."""
    if not value > 0:
        raise PlatonicError(f"{attribute.name} must be positive, got {value!r}")


def non_negative(_inst: Any, attribute: attrs.Attribute, value: float) -> None:
    """attrs validator: value >= 0."""
    if not value >= 0:
        raise PlatonicError(f"{attribute.name} must be >= 0, got {value!r}")


@contextlib.contextmanager
def seeded(seed: int, device: torch.device) -> Iterator[None]:
    """Seed torch's global RNGs for the block, restoring the caller's RNG state afterwards."""
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def total_steps(n: int, batch_size: int, epochs: int, max_steps: int | None) -> int:
    """epochs * ceil(n / batch_size), capped at max_steps."""
    steps = epochs * math.ceil(n / batch_size)
    return steps if max_steps is None else min(steps, max_steps)


def train(
    loss_fn: Callable[[Tensor], Tensor],
    optimizer: torch.optim.Optimizer,
    n: int,
    batch_size: int,
    steps: int,
    seed: int,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    desc: str = "train",
    progress: bool = True,
) -> list[float]:
    """Run `steps` optimiser steps on loss_fn(ids) over seeded reshuffles of range(n); returns the losses."""
    order = torch.Generator().manual_seed(seed)
    losses: list[float] = []
    with progress_bar(total=steps, desc=desc, disable=not progress, leave=False) as bar:
        while len(losses) < steps:
            perm = torch.randperm(n, generator=order)
            for start in range(0, n, batch_size):
                if len(losses) >= steps:
                    break
                loss = loss_fn(perm[start : start + batch_size])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                losses.append(float(loss.detach()))
                bar.update(1)
                bar.set_postfix(loss=f"{losses[-1]:.4g}")
    return losses
