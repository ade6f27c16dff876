"""peft LoRA on a media tower through the protocol's `lora_targets` (shared by source fine-tuning and the LoRA route)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from torch import nn

from ..errors import PlatonicError

if TYPE_CHECKING:
    from peft.tuners.lora import LoraModel

ADAPTER = "default"


def inject_lora(tower: nn.Module, targets: Sequence[str], rank: int, lora_alpha: float) -> LoraModel:
    """Wrap the modules of `tower` named by `targets` (name suffixes) with rank-r LoRA, B = 0, in place.

    Only the LoRA factors are trainable afterwards; `.unload()` removes them, `.merge_and_unload()`
    folds W <- W + (lora_alpha / r) B A (peft's scale; not an edit's strength).
    """
    if rank < 1 or lora_alpha <= 0:
        raise PlatonicError(f"LoRA needs rank >= 1 and lora_alpha > 0, got rank={rank}, lora_alpha={lora_alpha}")
    if not targets:
        raise PlatonicError("the encoder names no LoRA target modules (lora_targets is empty)")
    from peft import LoraConfig
    from peft.tuners.lora import LoraModel

    config = LoraConfig(r=int(rank), lora_alpha=float(lora_alpha), target_modules=list(targets), lora_dropout=0.0, bias="none")
    tower.requires_grad_(False)
    try:
        return LoraModel(tower, config, ADAPTER)
    except ValueError as exc:  # peft reports unmatched target names as ValueError
        raise PlatonicError(f"cannot attach LoRA to {list(targets)}: {exc}") from None
