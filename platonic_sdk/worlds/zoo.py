"""The image world's model zoo: small dual encoders of several families, pretrained on the world's
corpus, and their source fine-tunes on the world's tasks (shipped in `worlds/zoo/`).

`ZOO` lists each member as data (family, config written over the family's tiny config, loss, seed),
so `python -m platonic_sdk.worlds.train_zoo` rebuilds what ships (about 5 min per member on one free
CPU core). Five families, five widths: clip (ViT 3x64, d=64), siglip (ViT 3x48 with its attention-pool
residual head, d=48, sigmoid loss), openclip (ViT 2x64, d=80), metaclip (ViT 2x96, d=96), evaclip
(timm EVA02 3x48, d=56). Members load through the family adapters (`member("clip")`, or `platonic_sdk.load(family,
folder)`); fine-tunes are fp16 media-tower task vectors (rank-4 LoRA merged, docs/method.md sec. 6) applied
to a copy of the member (`finetuned("clip", "amber_shapes")`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs

from ..errors import CheckpointError, PlatonicError
from ..finetune.source import FineTuned
from ..io import MARKER
from ..registry import load
from ..zoo_settings import MANIFEST, member_settings
from .image import ZOO_DIR, ImageWorld
from .pretrain import LossKind, PretrainConfig


@attrs.frozen
class ZooMember:
    """One pretrained model of the zoo: `name` is its workspace key (the family name)."""

    name: str
    family: str
    config: Mapping[str, Any]
    loss: LossKind
    seed: int
    lr: float = 2e-3


def _vit(prefix: str, width: int, layers: int, patch: int) -> dict[str, Any]:
    """HF vision/text sub-config of a small ViT."""
    return {
        "vision_config": {"image_size": 32, "patch_size": patch, "hidden_size": width, "intermediate_size": 2 * width,
                          "num_hidden_layers": layers, "num_attention_heads": 4},
        "text_config": {"hidden_size": width, "intermediate_size": 2 * width, "num_hidden_layers": 2, "num_attention_heads": 4},
    } | ({"projection_dim": width} if prefix == "clip" else {})


ZOO: tuple[ZooMember, ...] = (
    ZooMember("clip", "clip", _vit("clip", 64, 3, 8), "contrastive", seed=1),
    ZooMember("siglip", "siglip", _vit("siglip", 48, 3, 8), "sigmoid", seed=2),
    ZooMember(
        "openclip", "openclip",
        {"embed_dim": 80, "vision_cfg": {"image_size": 32, "patch_size": 8, "width": 64, "layers": 2, "head_width": 16},
         "text_cfg": {"width": 64, "heads": 4, "layers": 2}},
        "contrastive", seed=3,
    ),
    ZooMember("metaclip", "metaclip", _vit("clip", 96, 2, 8), "contrastive", seed=5),
    ZooMember(
        "evaclip", "evaclip",
        {"embed_dim": 56, "timm_kwargs": {"patch_size": 8, "embed_dim": 48, "depth": 3, "num_heads": 4},
         "text_cfg": {"width": 48, "heads": 4, "layers": 2}},
        "contrastive", seed=4, lr=1e-3,
    ),
)
CORPUS_SIZE = 40_000
PRETRAIN = PretrainConfig(steps=1500, batch_size=128)
# Rank-4 LoRA on q/v (docs/method.md sec. 6) with a higher lr and more epochs for models trained from scratch.
# The CE's temperature is CLIP's initial 1/0.07 (the pretraining loop's start; the loop does not keep
# the learned one), not the 100 of a converged CLIP: at 100 the tiny models fit each task with small
# cosine changes, and their descriptors (and every transfer) shrink accordingly.
FINETUNE = dict(rank=4, lora_alpha=8.0, epochs=10, lr=5e-3, batch_size=32, weight_decay=0.01, logit_scale=1 / 0.07)


@attrs.frozen
class ZooRecipe:
    """How a world's shipped zoo is rebuilt (`python -m platonic_sdk.worlds.train_zoo --modality ...`).

    `world()` gives the world (seed 0) whose corpus pretrains every member and whose transfer tasks
    each member is fine-tuned on (`finetune`: FinetuneConfig fields); `half` saves members in fp16.
    """

    name: str
    world: Callable[[], Any]
    members: tuple[ZooMember, ...]
    folder: Path
    corpus_size: int
    pretrain: PretrainConfig
    finetune: Mapping[str, Any]
    half: bool = False

    def member(self, name: str) -> ZooMember:
        for m in self.members:
            if m.name == name:
                return m
        raise PlatonicError(f"unknown zoo member {name!r}; the {self.name} zoo has {', '.join(m.name for m in self.members)}")


ZOO_RECIPE = ZooRecipe("image", lambda: ImageWorld(seed=0), ZOO, ZOO_DIR, CORPUS_SIZE, PRETRAIN, FINETUNE)


def read_manifest(root: str | Path = ZOO_DIR) -> dict[str, Any]:
    """The zoo's manifest (members, world seed, fine-tuned tasks, accuracies measured at build time, and the
    world's tuned settings, which `zoo_settings.world_settings` reads)."""
    path = Path(root) / MANIFEST
    if not path.is_file():
        raise CheckpointError(
            f"no trained zoo at {root} (missing {MANIFEST}); build it with `python -m platonic_sdk.worlds.train_zoo`"
        )
    return json.loads(path.read_text())


def zoo_recipe(checkpoint: str | Path | None) -> tuple[dict[str, Any], Path] | None:
    """(fine-tune recipe, the file that records it) when `checkpoint` is a member folder of a built zoo (its marker
    records the recipe the zoo's own fine-tunes used: zoo_settings.member_settings), else None."""
    world = member_settings(checkpoint)
    return (dict(world.finetune), Path(checkpoint) / MARKER) if world is not None and world.finetune else None


def load_models(root: str | Path = ZOO_DIR, names: Sequence[str] | None = None, device: str | None = None) -> dict[str, Any]:
    """Pretrained zoo members by name, loaded through their family adapters."""
    manifest = read_manifest(root)
    names = list(names or manifest["members"])
    unknown = [n for n in names if n not in manifest["members"]]
    if unknown:
        raise PlatonicError(f"zoo at {root} has no member(s) {unknown}; it has {', '.join(manifest['members'])}")
    models = {}
    for name in names:
        enc = load(manifest["members"][name]["family"], str(Path(root) / name), **({"device": device} if device else {}))
        models[name] = enc.eval()
    return models


def finetune_path(root: str | Path, name: str, task: str) -> Path:
    return Path(root) / "finetunes" / name / f"{task}.safetensors"


def load_finetunes(models: Mapping[str, Any], tasks: Sequence[str], root: str | Path = ZOO_DIR) -> dict[tuple[str, str], Any]:
    """Fine-tuned encoders {(member, task): encoder} for every shipped fine-tune among `tasks`."""
    return {(name, task): finetuned(name, task, root, pre) for name, pre in models.items() for task in tasks
            if finetune_path(root, name, task).is_file()}


def member(name: str, root: str | Path = ZOO_DIR, device: str | None = None) -> Any:
    """One pretrained zoo member by name (image zoo by default; `worlds.audio.AUDIO_ZOO_DIR` for audio)."""
    return load_models(root, [name], device)[name]


def finetuned(name: str, task: str, root: str | Path = ZOO_DIR, pre: Any | None = None) -> Any:
    """The member's shipped fine-tune on `task`: its task vector applied to a copy of the member
    (`pre`, when given, is that member already loaded; it stays untouched)."""
    path = finetune_path(root, name, task)
    if not path.is_file():
        shipped = sorted(p.stem for p in path.parent.glob("*.safetensors"))
        raise PlatonicError(f"the zoo at {root} has no fine-tune of {name!r} on {task!r}; it has {', '.join(shipped) or 'none'}")
    return FineTuned.load(path, pre if pre is not None else member(name, root)).encoder.eval()
