"""peft adapter folders (adapter_config.json + adapter_model.safetensors) as LoRA factors by module name.

peft computes an adapted linear as W x + s_m B A x, with s_m = alpha_m / r_m (alpha_m / sqrt(r_m) under
rsLoRA; alpha_m and r_m from `alpha_pattern` / `rank_pattern`, else lora_alpha and r). Reading folds
any per-module scale into B, so that one scale lora_alpha / r holds for every module; writing uses one
scale. Names are the full module names of the model the adapter wraps (peft stores
`base_model.model.<name>.lora_A.weight`). The SDK's own record (family, strength, fit) sits next to
them in `platonic.json`, which peft ignores.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import attrs
import safetensors.torch
from peft import LoraConfig, PeftConfig, PeftModel, get_peft_model_state_dict
from peft.utils import load_peft_weights
from peft.utils.constants import CONFIG_NAME, SAFETENSORS_WEIGHTS_NAME
from peft.utils.other import get_pattern_key
from torch import Tensor

from ..atomic import atomic_path, write_json
from ..errors import CheckpointError, PlatonicError
from ..io import MARKER

PEFT_PREFIX = "base_model.model."  # what PeftModel puts before the wrapped model's module names
_FACTOR_SUFFIXES = {".lora_A.weight": 0, ".lora_B.weight": 1}
# LoraConfig features that are not a plain W + s B A on nn.Linear weights (each must be off)
_UNSUPPORTED = ("use_dora", "lora_bias", "modules_to_save", "fan_in_fan_out", "target_parameters",
                "layer_replication", "trainable_token_indices", "alora_invocation_tokens")


@attrs.frozen(eq=False)
class Adapter:
    """LoRA factors (A: r x in, B: out x r) by full module name; every module's update is (lora_alpha / rank) B A."""

    factors: dict[str, tuple[Tensor, Tensor]]
    rank: int
    lora_alpha: float
    base_model: str | None = None
    record: dict[str, Any] = attrs.field(factory=dict)


def write_adapter(folder: str | os.PathLike, adapter: Adapter) -> None:
    """Write `adapter` as a peft LoRA folder that `PeftModel.from_pretrained(model, folder)` loads (the weights and the
    SDK's record atomically; the same adapter gives the same bytes)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise PlatonicError(f"cannot write the adapter folder {folder}: it is a file; give the path of a folder")
    config = LoraConfig(
        r=adapter.rank, lora_alpha=adapter.lora_alpha, target_modules=sorted(adapter.factors),
        lora_dropout=0.0, bias="none", base_model_name_or_path=adapter.base_model,
    )
    config.save_pretrained(str(folder))
    tensors = {}
    for name, (A, B) in adapter.factors.items():
        tensors[f"{PEFT_PREFIX}{name}.lora_A.weight"] = A.detach().contiguous().cpu()
        tensors[f"{PEFT_PREFIX}{name}.lora_B.weight"] = B.detach().contiguous().cpu()
    with atomic_path(folder / SAFETENSORS_WEIGHTS_NAME) as tmp:  # one metadata key: its bytes never vary
        safetensors.torch.save_file(tensors, str(tmp), metadata={"format": "pt"})
    write_json(folder / MARKER, adapter.record)


def read_adapter(folder: str | os.PathLike) -> Adapter:
    """Read a peft LoRA folder (safetensors weights only: pickled adapter_model.bin files are refused)."""
    folder = Path(folder)
    if not (folder / CONFIG_NAME).is_file():
        raise CheckpointError(f"{folder} is not a peft adapter folder (no {CONFIG_NAME})")
    if not (folder / SAFETENSORS_WEIGHTS_NAME).is_file():
        raise CheckpointError(f"{folder} has no {SAFETENSORS_WEIGHTS_NAME} (pickled adapter weights are not read)")
    try:
        config = PeftConfig.from_pretrained(str(folder))
        state = load_peft_weights(str(folder), device="cpu")
    except Exception as exc:  # peft raises several types for foreign or corrupt folders
        raise CheckpointError(f"{folder} is not a readable peft adapter ({exc})") from None
    record = {}
    if (folder / MARKER).is_file():
        try:
            record = json.loads((folder / MARKER).read_text())
        except json.JSONDecodeError as exc:
            raise CheckpointError(f"corrupt {folder / MARKER}: {exc}") from None
    return _parse(config, state, record, str(folder))


def adapter_of(model: PeftModel) -> Adapter:
    """The active LoRA adapter of a live PeftModel."""
    name = model.active_adapter
    return _parse(model.peft_config[name], get_peft_model_state_dict(model, adapter_name=name), {}, f"PeftModel adapter {name!r}")


def _parse(config: PeftConfig, state: dict[str, Tensor], record: dict[str, Any], where: str) -> Adapter:
    """Factors by module name from peft's config and state dict, with per-module scales folded into B."""
    if not isinstance(config, LoraConfig):
        raise PlatonicError(f"{where} is a {config.peft_type} adapter; only LoRA adapters are LoRA edits")
    used = [f for f in _UNSUPPORTED if getattr(config, f, None)] + (["bias"] if config.bias != "none" else [])
    if used:
        raise PlatonicError(f"{where} uses LoRA features that are not W + s B A on a linear weight: {used}")
    parts: dict[str, list[Tensor | None]] = {}
    strange = []
    for key, tensor in state.items():
        name = key.removeprefix(PEFT_PREFIX)
        suffix = next((s for s in _FACTOR_SUFFIXES if name.endswith(s)), None)
        if suffix is None:
            strange.append(key)
            continue
        parts.setdefault(name.removesuffix(suffix), [None, None])[_FACTOR_SUFFIXES[suffix]] = tensor
    if strange:
        raise PlatonicError(f"{where} holds tensors that are not linear LoRA factors, e.g. {strange[:3]}")
    incomplete = [n for n, (A, B) in parts.items() if A is None or B is None]
    if not parts or incomplete:
        raise PlatonicError(f"{where} has no complete LoRA factors (A or B missing for {incomplete[:3]})")
    scale = config.lora_alpha / config.r
    factors = {}
    for name, (A, B) in parts.items():
        r = config.rank_pattern.get(get_pattern_key(config.rank_pattern.keys(), name), config.r)
        alpha = config.alpha_pattern.get(get_pattern_key(config.alpha_pattern.keys(), name), config.lora_alpha)
        own = alpha / (math.sqrt(r) if config.use_rslora else r)
        if own != scale and scale == 0:
            raise PlatonicError(f"{where}: lora_alpha is 0 but {name!r} has its own alpha; cannot fold the scales")
        factors[name] = (A, B if own == scale else (B.double() * (own / scale)).to(B.dtype))
    return Adapter(factors, config.r, float(config.lora_alpha), config.base_model_name_or_path, record)
