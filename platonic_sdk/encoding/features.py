"""Batched, gradient-free encoding through the protocol: media embeddings, site inputs, landmarks."""

from __future__ import annotations

import functools
from typing import Any, Sequence

import torch
from torch import Tensor

from ..items import take
from ..linalg import unit_rows
from ..progress import progress as progress_bar
from ..protocol.encoder import DualEncoder
from . import distributed
from .accel import CPU_BATCH, Prepared, autocast, batches, device_batch_size
from .feature_store import FeatureStore, active_store


@torch.inference_mode()
def site_features(
    encoder: DualEncoder,
    items: Sequence[Any],
    batch_size: int | None = CPU_BATCH,
    progress: bool = False,
    workers: int | None = None,
    amp: bool = False,
    cache: FeatureStore | bool = False,
) -> tuple[Tensor, Tensor]:
    """(S, Z) on the CPU in float32: site input rows and raw embeddings, one forward pass per batch.

    Items may be in memory, `Items` references (decoded batch by batch, so memory stays flat as the
    dataset grows) or `accel.Prepared` (preprocessed once, whichever model of the same preprocessing encodes them). `batch_size` None sizes batches to the device (`accel.device_batch_size`);
    `workers` > 0 decodes and preprocesses in DataLoader workers (pinned memory on CUDA), None lets
    `accel.default_workers` choose; `amp` runs the forward under bf16 autocast on CUDA (~3 significant digits).
    `cache`: an on-disk `FeatureStore` to read and write, or True for the store of the active
    `feature_store.caching` block (if any); callers that encode a model as loaded opt in, so that
    transient edited models never fill the cache.
    Inside `distributed.sharding()` with several ranks, each rank encodes its run of whole batches and
    every rank gets all rows; the store counts as hit only when every rank has the entry, and rank 0 writes it.
    """
    if not len(items):
        raise ValueError("no items to encode")
    store = cache if isinstance(cache, FeatureStore) else active_store() if cache else None
    if distributed.sharded():
        encode = functools.partial(_encode_sharded, encoder, items, batch_size, progress, workers, amp)
        if store is None:
            return encode()
        rank0 = distributed.rank_and_world()[0] == 0  # one writer; a hit counts only when every rank has it
        S, Z = store.features(encoder, items, encode, amp, agree=lambda hit: bool(distributed.agreed_min(hit)), write=rank0)
        distributed.barrier()  # rank 0's entry is written before any rank looks for it again
        return S, Z
    encode = functools.partial(_encode, encoder, items, batch_size, progress, workers, amp)
    return encode() if store is None else store.features(encoder, items, encode, amp)


def _encode_sharded(encoder: DualEncoder, items: Sequence[Any], batch_size: int | None, progress: bool, workers: int | None,
                    amp: bool) -> tuple[Tensor, Tensor]:
    """`_encode` with this rank's run of whole batches (the single-process batches), gathered in rank order."""
    rank, world = distributed.rank_and_world()
    size = distributed.agreed_min(device_batch_size(encoder, items) if batch_size is None else batch_size)
    mine = distributed.batch_range(len(items), size, rank, world)
    S = Z = failure = None
    try:
        if len(mine):
            S, Z = _encode(encoder, items.part(mine.start, mine.stop) if isinstance(items, Prepared) else take(items, mine),
                           size, progress, workers, amp)
    except Exception as exc:  # e.g. an item that does not decode: raised on every rank, not left waiting
        failure = exc
    return distributed.gather_rows(S, failure), distributed.gather_rows(Z)


def _encode(encoder: DualEncoder, items: Sequence[Any], batch_size: int | None, progress: bool, workers: int | None, amp: bool) -> tuple[Tensor, Tensor]:
    site = encoder.last_affine()
    s_parts, z_parts = [], []
    with autocast(encoder.device, amp):
        size = device_batch_size(encoder, items) if batch_size is None else batch_size
        total = -(-len(items) // max(size, 1))
        for batch in progress_bar(batches(encoder, items, size, workers), total=total, disable=not progress, leave=False, desc=f"encode {encoder.family}"):
            s, z = site.site_inputs(encoder, batch)
            s_parts.append(s.float().cpu())
            z_parts.append(z.float().cpu())
    return torch.cat(s_parts), torch.cat(z_parts)


def encode_items(
    encoder: DualEncoder, items: Sequence[Any], batch_size: int | None = CPU_BATCH, progress: bool = False,
    workers: int | None = None, amp: bool = False, cache: FeatureStore | bool = False,
) -> Tensor:
    """Unit-norm media embeddings f(x) = z / ||z|| of `items` (n x d), on the CPU (`cache`: see `site_features`)."""
    return unit_rows(site_features(encoder, items, batch_size, progress, workers, amp, cache)[1])


@torch.inference_mode()
def landmarks(encoder: DualEncoder, prompts: Sequence[Sequence[str]], batch_size: int = 256) -> Tensor:
    """Class landmarks (M x d): g_c = normalize(mean_t g(template_t(c))), the usual zero-shot head."""
    flat = [p for cls in prompts for p in cls]
    counts = [len(cls) for cls in prompts]
    emb = torch.cat([encoder.encode_text(flat[i : i + batch_size]).float().cpu() for i in range(0, len(flat), batch_size)])
    per_class = torch.split(emb, counts)
    return unit_rows(torch.stack([unit_rows(e).mean(0) for e in per_class]))
