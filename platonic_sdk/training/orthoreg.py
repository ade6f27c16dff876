"""OrthoReg as a pluggable regulariser: lambda * sum_l ||Gram(Delta W_l) - I||_F over selected updates.

Updates come from one of two sources: dense (full fine-tuning: Delta W = W - W_pre for every trainable
2-D tensor) or LoRA ((lora_alpha / r) B A for every peft LoRA layer). Both loops (source fine-tuning and the
LoRA route) add `OrthoReg(...)(updates)` to their task loss; a penalty weight lambda of 0 switches it off.
lambda is `OrthoReg.weight`, a training hyperparameter, never an edit's strength.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Iterator, Mapping

import attrs
import torch
from torch import Tensor, nn

from ..errors import PlatonicError, check_strength
from ..linalg import orthoreg_penalty

Update = tuple[str, Tensor]


def _weight(value: float) -> float:
    value = check_strength(value, "OrthoReg penalty weight")
    if value < 0:
        raise PlatonicError(f"OrthoReg penalty weight must be >= 0, got {value}")
    return value


def pattern(value: str | re.Pattern[str] | None) -> re.Pattern[str] | None:
    """attrs converter: a regular expression (compiled), or None; bad ones raise PlatonicError."""
    if value is None:
        return None
    try:
        return re.compile(value)
    except re.error as exc:
        raise PlatonicError(f"{value!r} is not a valid regular expression ({exc})") from None


@attrs.frozen
class OrthoReg:
    """lambda * sum_l ||Gram(Delta W_l) - I||_F (or its square), lambda = `weight`; `include` is a regex
    searched in layer names."""

    weight: float = attrs.field(default=0.0, converter=_weight)
    squared: bool = False
    include: re.Pattern[str] | None = attrs.field(default=None, converter=pattern)

    @property
    def active(self) -> bool:
        return self.weight > 0

    def describe(self) -> dict[str, Any]:
        """JSON-ready record (stored in the metadata of what a regularised run produces)."""
        return {"weight": self.weight, "squared": self.squared, "include": self.include.pattern if self.include else None}

    def selected(self, name: str) -> bool:
        return self.include is None or self.include.search(name) is not None

    def __call__(self, updates: Iterable[Update]) -> Tensor:
        """The penalty term over the selected updates (raises when the filter selects none)."""
        terms = [orthoreg_penalty(d.float().reshape(d.shape[0], -1), self.squared) for n, d in updates if self.selected(n)]
        if not terms:
            raise PlatonicError("OrthoReg selected no 2-D update (check the parameter filter and what is trainable)")
        return self.weight * torch.stack(terms).sum()


def dense_updates(module: nn.Module, reference: Mapping[str, Tensor]) -> Iterator[Update]:
    """(name, W - W_pre) for each trainable 2-D parameter of `module` that has a reference copy."""
    for name, p in module.named_parameters():
        if p.requires_grad and p.ndim == 2 and name in reference:
            yield name, p - reference[name]


def lora_updates(module: nn.Module) -> Iterator[Update]:
    """(layer name, (lora_alpha / r) B A) for each active adapter of each peft LoRA layer in `module`."""
    from peft.tuners.lora import LoraLayer

    for name, layer in module.named_modules():
        if isinstance(layer, LoraLayer):
            for adapter in layer.active_adapters:
                if adapter in layer.lora_A:
                    yield name, layer.get_delta_weight(adapter)


def dense_reference(module: nn.Module) -> dict[str, Tensor]:
    """Frozen copies W_pre of the trainable 2-D parameters (what `dense_updates` subtracts)."""
    return {name: p.detach().clone() for name, p in module.named_parameters() if p.requires_grad and p.ndim == 2}
