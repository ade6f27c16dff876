"""Batched, gradient-free encoding through the protocol: media embeddings, site inputs, landmarks."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor

from .accel import CPU_BATCH, autocast, batches, device_batch_size
from .linalg import unit_rows
from .progress import progress as progress_bar
from .protocol import DualEncoder


@torch.inference_mode()
def site_features(
    encoder: DualEncoder,
    items: Sequence[Any],
    batch_size: int | None = CPU_BATCH,
    progress: bool = False,
    workers: int | None = None,
    amp: bool = False,
) -> tuple[Tensor, Tensor]:
    """(S, Z) on the CPU in float32: site input rows and raw embeddings, one forward pass per batch.

    Items may be in memory or `Items` references (decoded batch by batch, so memory stays flat as the
    dataset grows). `batch_size` None sizes batches to the device (`accel.device_batch_size`);
    `workers` > 0 decodes and preprocesses in DataLoader workers (pinned memory on CUDA), None lets
    `accel.default_workers` choose; `amp` runs the forward under bf16 autocast on CUDA (~3 significant digits).
    """
    site = encoder.last_affine()
    s_parts, z_parts = [], []
    with autocast(encoder.device, amp):
        size = device_batch_size(encoder, items) if batch_size is None else batch_size
        total = -(-len(items) // max(size, 1))
        for batch in progress_bar(batches(encoder, items, size, workers), total=total, disable=not progress, leave=False, desc=f"encode {encoder.family}"):
            s, z = site.site_inputs(encoder, batch)
            s_parts.append(s.float().cpu())
            z_parts.append(z.float().cpu())
    if not z_parts:
        raise ValueError("no items to encode")
    return torch.cat(s_parts), torch.cat(z_parts)


def encode_items(
    encoder: DualEncoder, items: Sequence[Any], batch_size: int | None = CPU_BATCH, progress: bool = False,
    workers: int | None = None, amp: bool = False,
) -> Tensor:
    """Unit-norm media embeddings f(x) = z / ||z|| of `items` (n x d), on the CPU."""
    return unit_rows(site_features(encoder, items, batch_size, progress, workers, amp)[1])


@torch.inference_mode()
def landmarks(encoder: DualEncoder, prompts: Sequence[Sequence[str]], batch_size: int = 256) -> Tensor:
    """Class landmarks (M x d): g_c = normalize(mean_t g(template_t(c))), the usual zero-shot head."""
    flat = [p for cls in prompts for p in cls]
    counts = [len(cls) for cls in prompts]
    emb = torch.cat([encoder.encode_text(flat[i : i + batch_size]).float().cpu() for i in range(0, len(flat), batch_size)])
    per_class = torch.split(emb, counts)
    return unit_rows(torch.stack([unit_rows(e).mean(0) for e in per_class]))
