"""Batched, gradient-free encoding through the protocol: media embeddings, site inputs, landmarks."""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor
from tqdm.auto import tqdm

from .linalg import unit_rows
from .protocol import DualEncoder


def _batches(items: Sequence[Any], batch_size: int, progress: bool, desc: str):
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    starts = range(0, len(items), batch_size)
    for start in tqdm(starts, desc=desc, disable=not progress, leave=False):
        yield [items[i] for i in range(start, min(start + batch_size, len(items)))]


@torch.inference_mode()
def site_features(
    encoder: DualEncoder, items: Sequence[Any], batch_size: int = 64, progress: bool = False
) -> tuple[Tensor, Tensor]:
    """(S, Z): site input rows and raw embeddings of `items` (one forward pass each), on the CPU."""
    site = encoder.last_affine()
    s_parts, z_parts = [], []
    for chunk in _batches(items, batch_size, progress, f"encode {encoder.family}"):
        s, z = site.site_inputs(encoder, encoder.preprocess(chunk))
        s_parts.append(s.float().cpu())
        z_parts.append(z.float().cpu())
    if not z_parts:
        raise ValueError("no items to encode")
    return torch.cat(s_parts), torch.cat(z_parts)


@torch.inference_mode()
def encode_items(encoder: DualEncoder, items: Sequence[Any], batch_size: int = 64, progress: bool = False) -> Tensor:
    """Unit-norm media embeddings f(x) of `items` (n x d), on the CPU."""
    parts = [
        encoder.encode_media(encoder.preprocess(chunk)).float().cpu()
        for chunk in _batches(items, batch_size, progress, f"encode {encoder.family}")
    ]
    if not parts:
        raise ValueError("no items to encode")
    return torch.cat(parts)


@torch.inference_mode()
def landmarks(encoder: DualEncoder, prompts: Sequence[Sequence[str]], batch_size: int = 256) -> Tensor:
    """Class landmarks (M x d): g_c = normalize(mean_t g(template_t(c))), the usual zero-shot head."""
    flat = [p for cls in prompts for p in cls]
    counts = [len(cls) for cls in prompts]
    emb = torch.cat([encoder.encode_text(flat[i : i + batch_size]).float().cpu() for i in range(0, len(flat), batch_size)])
    per_class = torch.split(emb, counts)
    return unit_rows(torch.stack([unit_rows(e).mean(0) for e in per_class]))
