"""Pretrain a dual encoder from scratch on (item, caption) pairs: one loop for every family and modality.

The loop talks to the model only through the DualEncoder protocol (`preprocess`, `embed_media`,
`embed_text`), and keeps the loss's own temperature (and bias) as parameters of the loop:

- ``contrastive`` (CLIP-like): CE over softmax(t * cos) in both directions, t = exp(log_scale);
- ``sigmoid`` (SigLIP-like): mean over pairs of -log sigmoid(y_ij (t * cos_ij + b)), y = +-1.

Pairs with identical captions count as positives in both (soft targets for the softmax), which keeps
a small-vocabulary world from pushing equal descriptions apart (a cause of SigLIP collapse, docs/method.md sec. 11).
"""

from __future__ import annotations

import math
from typing import Any, Literal, Sequence

import attrs
import numpy as np
import torch
from torch import Tensor, nn

from ..progress import progress as progress_bar
from ..protocol.encoder import DualEncoder

LossKind = Literal["contrastive", "sigmoid"]


@attrs.frozen
class PretrainConfig:
    """Optimiser and loss settings; `init_log_scale`/`init_bias` default per loss (CLIP 1/0.07, SigLIP 10, -5)."""

    loss: LossKind = "contrastive"
    steps: int = 1000
    batch_size: int = 128
    lr: float = 2e-3
    weight_decay: float = 0.05
    warmup: int = 50
    grad_clip: float = 1.0
    init_log_scale: float | None = None
    init_bias: float = -5.0
    seed: int = 0

    def __attrs_post_init__(self) -> None:
        if self.loss not in ("contrastive", "sigmoid"):
            raise ValueError(f"loss must be 'contrastive' or 'sigmoid', got {self.loss!r}")
        if self.steps < 1 or self.batch_size < 2:
            raise ValueError("pretraining needs steps >= 1 and batch_size >= 2")


class LossHead(nn.Module):
    """The loss's learnable temperature (and SigLIP bias): z_media, z_text -> scalar loss."""

    def __init__(self, kind: LossKind, init_log_scale: float | None = None, init_bias: float = -5.0) -> None:
        super().__init__()
        self.kind = kind
        default = math.log(1 / 0.07) if kind == "contrastive" else math.log(10.0)
        self.log_scale = nn.Parameter(torch.tensor(default if init_log_scale is None else init_log_scale))
        self.bias = nn.Parameter(torch.tensor(float(init_bias)), requires_grad=kind == "sigmoid")

    def forward(self, media: Tensor, text: Tensor, positives: Tensor) -> Tensor:
        """Loss of unnormalised embeddings (n x d each); positives[i, j] = item i and caption j match."""
        f = nn.functional.normalize(media, dim=-1)
        g = nn.functional.normalize(text, dim=-1)
        logits = self.log_scale.clamp(max=math.log(100.0)).exp() * f @ g.T
        pos = positives.to(logits.dtype)
        if self.kind == "contrastive":
            rows = pos / pos.sum(1, keepdim=True)
            cols = pos / pos.sum(0, keepdim=True)
            return 0.5 * (
                -(rows * logits.log_softmax(1)).sum(1).mean() - (cols * logits.log_softmax(0)).sum(0).mean()
            )
        signs = 2 * pos - 1
        return -nn.functional.logsigmoid(signs * (logits + self.bias)).sum(1).mean()


def caption_positives(captions: Sequence[str]) -> Tensor:
    """Boolean n x n matrix: captions i and j are identical."""
    _, ids = np.unique(np.asarray(captions, dtype=object), return_inverse=True)
    ids_t = torch.as_tensor(ids)
    return ids_t[:, None] == ids_t[None, :]


def _take(items: Sequence[Any], idx: np.ndarray) -> Any:
    if isinstance(items, (np.ndarray, Tensor)):
        return items[idx]
    return [items[int(i)] for i in idx]


def _lr_factor(step: int, warmup: int, total: int) -> float:
    """Linear warm-up, then cosine decay to zero."""
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))


def pretrain(
    encoder: DualEncoder,
    items: Sequence[Any],
    captions: Sequence[str],
    config: PretrainConfig,
    progress: bool = True,
) -> list[float]:
    """Train both towers of `encoder` in place on (items[i], captions[i]); returns the loss per step.

    Batches are drawn without replacement (reshuffled every epoch) from a generator seeded by config.seed.
    """
    if len(items) != len(captions):
        raise ValueError(f"{len(items)} items but {len(captions)} captions")
    if len(items) < config.batch_size:
        raise ValueError(f"need at least batch_size={config.batch_size} pairs, got {len(items)}")
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    head = LossHead(config.loss, config.init_log_scale, config.init_bias).to(encoder.device)
    params = [p for p in encoder.model.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2] + [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=config.lr
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_factor(s, config.warmup, config.steps))
    captions = list(captions)
    encoder.model.train()
    order, cursor, losses = rng.permutation(len(items)), 0, []
    bar = progress_bar(range(config.steps), desc=f"pretrain {encoder.family}", disable=not progress)
    for _ in bar:
        if cursor + config.batch_size > len(order):
            order, cursor = rng.permutation(len(items)), 0
        idx = order[cursor : cursor + config.batch_size]
        cursor += config.batch_size
        texts = [captions[int(i)] for i in idx]
        loss = head(encoder.embed_media(encoder.preprocess(_take(items, idx))), encoder.embed_text(texts), caption_positives(texts).to(encoder.device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(params, config.grad_clip)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    encoder.model.eval()
    return losses
