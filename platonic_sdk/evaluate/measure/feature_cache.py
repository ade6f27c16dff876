"""Cached evaluation features: accuracy of any folded operator at any strength without a forward pass.

An edit at the last affine site changes the raw embedding exactly as z -> z + c A s (c: its strength), so caching
its site inputs s and raw embeddings z once makes every later evaluation a product, a normalisation and an argmax.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import attrs
import numpy as np
import torch
from torch import Tensor

from ...encoding.feature_store import FeatureStore, model_fingerprint
from ...encoding.features import site_features
from ...encoding.zeroshot import accuracy_of, predict
from ...errors import CheckpointError, ShapeError
from ...io import load_tensors, require, save_tensors
from ...linalg import edited_embeddings
from ...protocol.encoder import DualEncoder
from ...tasks import Split


@attrs.frozen(eq=False)
class FeatureCache:
    """Site inputs s (rows of `site_inputs`), raw embeddings z (`raw_embeddings`) and labels of one
    evaluation set on one target."""

    site_inputs: Tensor
    raw_embeddings: Tensor
    labels: np.ndarray = attrs.field(converter=lambda v: np.asarray(v, dtype=np.int64))
    meta: dict[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if not (self.site_inputs.shape[0] == self.raw_embeddings.shape[0] == len(self.labels)):
            raise ShapeError(f"cache rows disagree: site inputs {tuple(self.site_inputs.shape)}, "
                             f"raw embeddings {tuple(self.raw_embeddings.shape)}, {len(self.labels)} labels")

    @classmethod
    def build(
        cls, encoder: DualEncoder, items: Sequence[Any] | Split, labels=None, batch_size: int | None = 64, progress: bool = False,
        cache: FeatureStore | bool = True, meta: Mapping[str, Any] | None = None,
    ) -> "FeatureCache":
        """Encode `items` (or a Split) once on `encoder`; `cache` (default: the active on-disk store, if any),
        see `features.site_features`; `meta` is recorded beside the encoder's family, checkpoint and weights."""
        if isinstance(items, Split):
            items, labels = items.items, items.labels
        S, Z = site_features(encoder, items, batch_size, progress, cache=cache)
        return cls(S, Z, labels, {"family": encoder.family, "checkpoint": encoder.checkpoint, "model": model_fingerprint(encoder), **(meta or {})})

    def embeddings(self, A: Tensor | None = None, strength: float = 0.0) -> Tensor:
        """Raw embeddings after folding `strength` A (A None: the unedited model)."""
        if A is None or strength == 0:
            return self.raw_embeddings
        return edited_embeddings(self.site_inputs, self.raw_embeddings, A, strength)

    def accuracy(self, class_landmarks: Tensor, A: Tensor | None = None, strength: float = 0.0) -> float:
        """Zero-shot accuracy (percent) after folding `strength` A."""
        return accuracy_of(predict(self.embeddings(A, strength), class_landmarks), torch.from_numpy(self.labels))

    def save(self, path: str | os.PathLike) -> None:
        tensors = {"site_inputs": self.site_inputs, "raw_embeddings": self.raw_embeddings, "labels": torch.from_numpy(self.labels)}
        save_tensors(path, tensors, "feature_cache", self.meta)

    @classmethod
    def load(cls, path: str | os.PathLike, encoder: DualEncoder | None = None) -> "FeatureCache":
        """A saved cache; with `encoder`, one built on another model (other weights) is refused, naming both."""
        tensors, meta, _ = load_tensors(path, "feature_cache")
        tensors = {{"S": "site_inputs", "Z": "raw_embeddings"}.get(k, k): v for k, v in tensors.items()}  # older files: S, Z
        _check_cache_file(path, tensors, meta)
        if encoder is not None and meta.get("model") != model_fingerprint(encoder):
            raise CheckpointError(
                f"feature cache {str(path)!r} was built on {meta.get('family')} {meta.get('checkpoint')!r} "
                f"(weights {meta.get('model')}), not on {encoder.family} {encoder.checkpoint!r} (weights {model_fingerprint(encoder)})"
            )
        return cls(tensors["site_inputs"], tensors["raw_embeddings"], tensors["labels"].numpy(), meta)


def _check_cache_file(path: str | os.PathLike, tensors: dict[str, Tensor], meta: dict[str, Any]) -> None:
    """A feature cache file holds real, finite site inputs and raw embeddings, one row and one integer label per item."""
    require(path, "feature cache", tensors, meta, ("site_inputs", "raw_embeddings", "labels"))
    for name in ("site_inputs", "raw_embeddings"):
        t = tensors[name]
        if not t.is_floating_point() or t.ndim != 2:
            raise CheckpointError(f"{path} is a malformed feature cache: {name!r} must be a matrix of real numbers, "
                                  f"got {t.dtype} of shape {tuple(t.shape)}")
        if not torch.isfinite(t).all():
            raise CheckpointError(f"feature cache {path} holds {int((~torch.isfinite(t)).sum())} NaN/inf value(s) in {name!r}; "
                                  "delete it and build it again")
    labels = tensors["labels"]
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool or labels.ndim != 1:
        raise CheckpointError(f"{path} is a malformed feature cache: 'labels' must be a vector of integers, "
                              f"got {labels.dtype} of shape {tuple(labels.shape)}")
    rows = {n: tensors[n].shape[0] for n in ("site_inputs", "raw_embeddings", "labels")}
    if len(set(rows.values())) != 1:
        raise CheckpointError(f"{path} is a malformed feature cache: its tensors have different numbers of rows ({rows})")
