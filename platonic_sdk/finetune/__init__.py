"""Training: source fine-tuning (LoRA or full), OrthoReg as a pluggable regulariser, weight-space task vectors and their merging methods."""

from ..training.orthoreg import OrthoReg, dense_updates, lora_updates
from .source import FinetuneConfig, FineTuned, finetune
from .weightspace import AppliedTaskVector, MergeMethod, TaskVector, merge, merge_methods, register_merge_method

__all__ = [
    "AppliedTaskVector",
    "FineTuned",
    "FinetuneConfig",
    "MergeMethod",
    "OrthoReg",
    "TaskVector",
    "dense_updates",
    "finetune",
    "lora_updates",
    "merge",
    "merge_methods",
    "register_merge_method",
]
