"""Source fine-tuning (docs/method.md sec. 6): where descriptors come from.

The media tower of any `DualEncoder` is trained on a task's train split with cross-entropy over the
frozen zero-shot head, logits = s * <f(x), g_c> (landmarks g_c computed once; the text tower never
changes), either through rank-r LoRA on the tower's `lora_targets` (default: r = 4, lora_alpha = 8) or by
full fine-tuning, with an optional OrthoReg term. The pre-trained encoder is never touched: training
runs on a copy, and LoRA is merged into that copy at the end.
"""

from __future__ import annotations

import copy
import os
import re
from typing import Any, Callable, Iterator, Literal, Mapping

import attrs
import torch
from torch import Tensor, nn

from ..descriptor import UTD
from ..encoding.accel import autocast
from ..encoding.features import landmarks
from ..errors import PlatonicError
from ..protocol.binding import portable_checkpoint
from ..protocol.encoder import DualEncoder
from ..spaces import DEFAULT_SPACE
from ..tasks import Grid, Task
from ..training.loop import non_negative, positive, seeded, total_steps, train
from ..training.lora_layers import inject_lora
from ..training.orthoreg import OrthoReg, Update, dense_reference, dense_updates, lora_updates, pattern
from .weightspace import TaskVector, named_tensors


def _mode(_inst: Any, _attribute: attrs.Attribute, value: str) -> None:
    if value not in ("lora", "full"):
        raise PlatonicError(f"fine-tuning mode must be 'lora' or 'full', got {value!r}")


@attrs.frozen
class FinetuneConfig:
    """Source fine-tuning recipe; defaults are the authors' (docs/method.md sec. 6). Tiny models may need more lr/epochs."""

    mode: Literal["lora", "full"] = attrs.field(default="lora", validator=_mode)
    rank: int = attrs.field(default=4, validator=positive)
    lora_alpha: float = attrs.field(default=8.0, validator=positive)
    epochs: int = attrs.field(default=3, validator=positive)
    lr: float = attrs.field(default=1e-4, validator=positive)
    batch_size: int = attrs.field(default=32, validator=positive)
    weight_decay: float = attrs.field(default=0.01, validator=non_negative)
    logit_scale: float = attrs.field(default=100.0, validator=positive)
    max_steps: int | None = attrs.field(default=None, validator=attrs.validators.optional(positive))
    seed: int = 0
    orthoreg: OrthoReg = attrs.field(factory=OrthoReg)
    trainable: re.Pattern[str] | None = attrs.field(default=None, converter=pattern)

    def __attrs_post_init__(self) -> None:
        if self.trainable is not None and self.mode != "full":
            raise PlatonicError("`trainable` selects parameters for full fine-tuning; LoRA trains lora_targets")

    def describe(self) -> dict[str, Any]:
        """JSON-ready record of the recipe (stored with saved fine-tunes)."""
        trainable = self.trainable.pattern if self.trainable else None
        return {**attrs.asdict(self, recurse=False), "orthoreg": self.orthoreg.describe(), "trainable": trainable}


@attrs.define(eq=False)
class FineTuned:
    """A fine-tuned copy of a source encoder, its media-tower task vector and the training record."""

    pre: DualEncoder
    encoder: DualEncoder
    task_vector: TaskVector
    losses: tuple[float, ...] = ()

    @property
    def metadata(self) -> dict[str, Any]:
        return self.task_vector.metadata

    def utd(self, grid: Grid, batch_size: int = 64, space: str = DEFAULT_SPACE, logit_scale: float | None = None,
            provenance: Mapping[str, Any] | None = None) -> UTD:
        """This fine-tune's descriptor on `grid` (`UTD.compute` of the pretrained and the fine-tuned model, `space`,
        `logit_scale` and `provenance` as there; in the affinity space UTD[i, j] = <f_ft(x_i), g_j> - <f_pre(x_i), g_j>,
        landmarks from the frozen text tower). The provenance records the fine-tune's mode and task."""
        prov = {"source": "finetune", "mode": self.metadata.get("mode"), "finetune_task": self.metadata.get("task"), **(provenance or {})}
        return UTD.compute(self.pre, self.encoder, grid, batch_size, space, logit_scale, prov)

    def save(self, path: str | os.PathLike) -> None:
        """Write the media-tower deltas (safetensors) with the recipe, family and task as JSON metadata."""
        self.task_vector.save(path)

    @classmethod
    def load(cls, path: str | os.PathLike, pre: DualEncoder) -> "FineTuned":
        """Rebuild a saved fine-tune on top of `pre` (which stays untouched)."""
        vector = TaskVector.load(path)
        family = vector.metadata.get("family")
        if family != pre.family:
            raise PlatonicError(f"{path} was fine-tuned from a {family!r} encoder, not a {pre.family!r} one")
        encoder = copy.deepcopy(pre)
        vector.fold_into(encoder.media_encoder)  # a new model: its base is the fine-tuned weights
        return cls(pre, encoder, vector)


def _make_trainable(
    tower: nn.Module, targets: list[str], config: FinetuneConfig
) -> tuple[list[nn.Parameter], Callable[[], Iterator[Update]], Callable[[], None]]:
    """Per `config.mode`: (trainable parameters, the live updates for OrthoReg, the finaliser).

    LoRA: factors on `targets`, updates (lora_alpha / r) B A, finalised by merging into the weights.
    Full: every tower parameter (or those whose name matches `config.trainable`, e.g. "self_attn" for
    attention-only fine-tuning), updates W - W_pre of the trainable 2-D ones, nothing to finalise.
    """
    if config.mode == "lora":
        lora = inject_lora(tower, targets, config.rank, config.lora_alpha)
        params = [p for p in tower.parameters() if p.requires_grad]
        return params, lambda: lora_updates(tower), lora.merge_and_unload
    params = [p for name, p in tower.named_parameters() if config.trainable is None or config.trainable.search(name)]
    if not params:
        raise PlatonicError(f"no media-tower parameter matches trainable={config.trainable.pattern!r}")
    for p in params:
        p.requires_grad_(True)
    reference = dense_reference(tower) if config.orthoreg.active else {}
    return params, lambda: dense_updates(tower, reference), lambda: None


def finetune(encoder: DualEncoder, task: Task, config: FinetuneConfig | None = None, progress: bool = True) -> FineTuned:
    """Fine-tune a copy of `encoder`'s media tower on `task.train`; minimise CE(s * f(x) G^T, y) + OrthoReg."""
    config = config or FinetuneConfig()
    n = len(task.train)
    if n == 0:
        raise PlatonicError(f"task {task.name!r} has an empty train split")
    ft = copy.deepcopy(encoder)
    ft.eval()  # dropout off and normalisation statistics frozen: only the weights learn
    ft.model.requires_grad_(False)
    device = ft.device
    tower = ft.media_encoder
    G = landmarks(ft, task.prompts()).to(device).clone()  # out of inference mode, usable under autograd
    labels = torch.as_tensor(task.train.labels, dtype=torch.long, device=device)
    steps = total_steps(n, config.batch_size, config.epochs, config.max_steps)
    with seeded(config.seed, device):
        params, updates, finish = _make_trainable(tower, ft.lora_targets, config)

        def loss_fn(ids: Tensor) -> Tensor:
            batch = ft.preprocess([task.train.items[i] for i in ids.tolist()])
            with autocast(device):
                f = ft.encode_media(batch)
            logits = config.logit_scale * f.float() @ G.T
            loss = nn.functional.cross_entropy(logits, labels[ids.to(device)])
            return loss + config.orthoreg(updates()) if config.orthoreg.active else loss

        optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
        desc = f"finetune {ft.family} on {task.name}"
        losses = train(loss_fn, optimizer, n, config.batch_size, steps, config.seed, desc=desc, progress=progress)
        finish()
    ft.model.requires_grad_(False)
    before, after = named_tensors(encoder.media_encoder), named_tensors(tower)
    changed = [name for name in before if name in after and not torch.equal(before[name], after[name])]
    meta = {
        "family": encoder.family,
        "checkpoint": portable_checkpoint(encoder.checkpoint),  # a local folder by its name: files carry no machine paths
        "task": task.name,
        "scope": "media_encoder",
        "steps": steps,
        **config.describe(),
    }
    vector = TaskVector.from_models(encoder.media_encoder, tower, include=changed, metadata=meta)
    return FineTuned(encoder, ft, vector, tuple(losses))
