"""Training: source fine-tuning (LoRA or full), OrthoReg as a pluggable regulariser, weight-space task vectors."""

from .orthoreg import OrthoReg, dense_updates, lora_updates
from .source import FinetuneConfig, FineTuned, finetune
from .weightspace import AppliedTaskVector, TaskVector

__all__ = [
    "AppliedTaskVector",
    "FineTuned",
    "FinetuneConfig",
    "OrthoReg",
    "TaskVector",
    "dense_updates",
    "finetune",
    "lora_updates",
]
