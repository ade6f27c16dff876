"""Fine-tuning: source fine-tuning (LoRA or full), weight-space task vectors and their merging methods; OrthoReg,
a pluggable regulariser shared with the LoRA route, lives in `platonic_sdk.training` and is exported here too."""

from ..lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {
    "..training.orthoreg": ["OrthoReg", "dense_updates", "lora_updates"],
    ".source": ["FinetuneConfig", "FineTuned", "finetune"],
    ".weightspace": ["AppliedTaskVector", "MergeMethod", "TaskVector", "merge", "merge_methods", "register_merge_method"],
})
