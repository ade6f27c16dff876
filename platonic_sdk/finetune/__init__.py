"""Fine-tuning: source fine-tuning (LoRA or full), weight-space task vectors and their merging methods; OrthoReg,
a pluggable regulariser shared with the LoRA route, lives in `platonic_sdk.training` and is exported here too."""

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
