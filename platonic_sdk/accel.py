"""Fast feature extraction for any adapter: bf16 autocast, DataLoader preprocessing, optional torch.compile.

Nothing here changes what is computed: autocast is a no-op off CUDA, worker preprocessing runs the
adapter's own `preprocess`, and a compiled media tower is checked against the eager one before use.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping
from typing import Any, Callable, ContextManager, Iterator, Sequence

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from .protocol import DualEncoder

__all__ = ["autocast", "batches", "compiled_media"]


def autocast(device: torch.device | str, enabled: bool = True) -> ContextManager:
    """bf16 autocast on CUDA; a no-op context on any other device (or when not enabled)."""
    device = torch.device(device)
    if enabled and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class _OnHost:
    """The encoder seen with device = cpu, so its own `preprocess` builds the batch in host memory."""

    device = torch.device("cpu")

    def __init__(self, encoder: DualEncoder):
        self._encoder = encoder

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)


class _HostCollate:
    """DataLoader collate for worker processes: the adapter's `preprocess`, placed in host memory."""

    def __init__(self, encoder: DualEncoder):
        self.encoder = encoder

    def __call__(self, items: list[Any]) -> Any:
        return type(self.encoder).preprocess(_OnHost(self.encoder), items)


def _to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor of a (nested) batch to `device`, asynchronously from pinned memory."""
    if isinstance(batch, Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        return type(batch)({k: _to_device(v, device) for k, v in batch.items()})
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(v, device) for v in batch)
    return batch


def batches(encoder: DualEncoder, items: Sequence[Any], batch_size: int = 64, workers: int = 0) -> Iterator[Any]:
    """Model batches of `items` in order, each on the encoder's device.

    workers = 0: the adapter preprocesses in this process (on its device, as `preprocess` does).
    workers > 0: DataLoader worker processes preprocess in host memory (pinned on CUDA) while the
    model runs; batches are then copied to the device without blocking.
    """
    if batch_size < 1 or workers < 0:
        raise ValueError(f"batch_size must be positive and workers non-negative, got {batch_size} and {workers}")
    if workers == 0:
        for start in range(0, len(items), batch_size):
            yield encoder.preprocess([items[i] for i in range(start, min(start + batch_size, len(items)))])
        return
    device = encoder.device
    loader = DataLoader(
        items,  # type: ignore[arg-type]  (any sequence is a map-style dataset)
        batch_size=batch_size,
        collate_fn=_HostCollate(encoder),
        num_workers=workers,
        pin_memory=device.type == "cuda",
    )
    for batch in loader:
        yield _to_device(batch, device)


@contextlib.contextmanager
def compiled_media(encoder: DualEncoder, example: Any, backend: str | Callable = "inductor", mode: str | None = None) -> Iterator[bool]:
    """Within the block, the media tower's forward is torch.compile'd (yields True), else eager (False).

    The compiled forward is run once on `example` (a model batch) and must match the eager embeddings
    to 1e-3 relative (5e-2 for low-precision weights or under autocast); on any error or mismatch it
    is dropped with a warning. Enter it inside `autocast(...)` to compile the autocast graph once.
    The eager forward is back on exit.
    """
    module = encoder.media_encoder
    with torch.inference_mode():
        reference = encoder.embed_media(example).float()
    try:
        module.forward = torch.compile(module.forward, backend=backend, mode=mode, dynamic=False)
        with torch.inference_mode():
            got = encoder.embed_media(example).float()
        low_precision = encoder.dtype != torch.float32 or torch.is_autocast_enabled(encoder.device.type)
        tolerance = 5e-2 if low_precision else 1e-3
        error = float((got - reference).norm() / reference.norm().clamp_min(1e-30))
        if error > tolerance:
            raise RuntimeError(f"compiled embeddings differ from eager ones by {error:.2e} relative")
        ok = True
    except Exception as exc:  # compilation fails in many library-specific ways; eager always works
        warnings.warn(f"torch.compile of the {encoder.family} media tower failed, running eager: {exc}", stacklevel=3)
        if "forward" in vars(module):
            del module.forward
        ok = False
    try:
        yield ok
    finally:
        if "forward" in vars(module):
            del module.forward
