"""Image preprocessing shared by the fixed-resolution vision families, in torch (fast on batches).

x -> (resize(x) / 255 - mean) / std, where resize is either a square resize to `size` or, with `crop`,
a resize of the shorter side to `size` followed by a centre crop (CLIP's recipe).
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs
import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from platonic_sdk.errors import ShapeError

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
HALF = (0.5, 0.5, 0.5)


def to_uint8_batch(items: Sequence[Any] | np.ndarray | Tensor) -> list[Tensor]:
    """PIL images, HxWx3 uint8 arrays, or one n x H x W x 3 uint8 array -> list of 3 x H x W uint8 tensors."""
    if isinstance(items, (np.ndarray, Tensor)) and items.ndim == 4:
        items = list(items)
    out = []
    for i, item in enumerate(items):
        if hasattr(item, "convert"):  # PIL image
            item = np.asarray(item.convert("RGB"))
        array = torch.tensor(np.asarray(item))  # a copy: PIL arrays are read-only
        if array.dtype != torch.uint8 or array.ndim != 3 or array.shape[-1] != 3:
            raise ShapeError(
                f"item {i}: expected a PIL image or an H x W x 3 uint8 array, got {tuple(array.shape)} {array.dtype}"
            )
        out.append(array.permute(2, 0, 1))
    if not out:
        raise ShapeError("no images to preprocess")
    return out


@attrs.frozen
class ImageTransform:
    """Resize and normalise images to the model's input size and statistics."""

    size: int
    mean: tuple[float, float, float] = OPENAI_MEAN
    std: tuple[float, float, float] = OPENAI_STD
    crop: bool = True

    def _resize(self, images: Tensor) -> Tensor:
        """n x 3 x h x w -> n x 3 x size x size."""
        h, w = images.shape[-2:]
        if not self.crop:
            target = (self.size, self.size)
        else:
            scale = self.size / min(h, w)
            target = (max(self.size, round(h * scale)), max(self.size, round(w * scale)))
        if (h, w) != target:
            images = F.interpolate(images, size=target, mode="bicubic", antialias=True, align_corners=False)
        if self.crop:
            top, left = (images.shape[-2] - self.size) // 2, (images.shape[-1] - self.size) // 2
            images = images[..., top : top + self.size, left : left + self.size]
        return images

    def __call__(self, items: Sequence[Any], device: torch.device, dtype: torch.dtype) -> Tensor:
        """A float batch n x 3 x size x size on `device` (images of one shape are resized together)."""
        images = to_uint8_batch(items)
        if all(im.shape == images[0].shape for im in images):
            batch = self._resize(torch.stack(images).to(device=device, dtype=torch.float32) / 255.0)
        else:
            batch = torch.cat([self._resize(im[None].to(device=device, dtype=torch.float32) / 255.0) for im in images])
        mean = torch.tensor(self.mean, device=device).view(1, 3, 1, 1)
        std = torch.tensor(self.std, device=device).view(1, 3, 1, 1)
        return ((batch - mean) / std).to(dtype)

    def save(self, path: str) -> None:
        """Write an HF `preprocessor_config.json` (CLIP-style with crop, SigLIP-style without)."""
        from transformers import CLIPImageProcessor, SiglipImageProcessor

        common = dict(image_mean=list(self.mean), image_std=list(self.std))
        if self.crop:
            processor = CLIPImageProcessor(
                size={"shortest_edge": self.size}, crop_size={"height": self.size, "width": self.size}, **common
            )
        else:
            processor = SiglipImageProcessor(size={"height": self.size, "width": self.size}, **common)
        processor.save_pretrained(path)

    @classmethod
    def from_hf(cls, processor: Any) -> "ImageTransform":
        """Size, statistics and crop mode of a loaded HF CLIP/SigLIP image processor."""
        crop = bool(getattr(processor, "do_center_crop", False))
        dims = processor.crop_size if crop else processor.size
        size = dims.height or dims.shortest_edge
        return cls(size=int(size), mean=tuple(processor.image_mean), std=tuple(processor.image_std), crop=crop)
