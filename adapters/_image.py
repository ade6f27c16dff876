"""Image preprocessing taken from the checkpoint itself, run by the model's own library.

- transformers families: the checkpoint's image processor with its PIL backend
  (`AutoImageProcessor.from_pretrained(folder, backend="pil")`, the processors these checkpoints were
  published with): resize with the checkpoint's resample mode, optional centre crop, rescale, normalise
  (SigLIP2 NaFlex: patchify). transformers 5 defaults to a torchvision backend, whose resizing differs
  from PIL's (measured on the parity checkpoints of tests/test_parity.py: up to 6e-3 on unit embeddings
  with bilinear / bicubic resizing of noise images, 2e-2 with nearest), so it is not used.
- open_clip families: open_clip's eval transform built from the model's preprocess config
  (`image_transform_v2`: resize mode "shortest" / "longest" / "squash", interpolation, mean, std).

Items go through `platonic_sdk.data.images.as_images` first (PIL in any supported mode, uint8 arrays,
CHW uint8 tensors); each library then converts to RGB in its own way.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import attrs
import torch
from torch import Tensor

from platonic_sdk.data.images import as_images

IMAGE_BACKEND = "pil"  # transformers image-processor backend (see the module docstring)


@attrs.frozen
class HFImages:
    """A transformers image processor: items -> `pixel_values` (or the whole NaFlex dict of patches and masks).

    Items are first made RGB with transformers' own `convert_to_rgb` (transparency onto white), which is
    what processors with `do_convert_rgb` do; processors without it (SigLIP2 NaFlex) would otherwise
    fail on greyscale or palette images.
    """

    processor: Any

    def __call__(self, items: Sequence[Any], device: torch.device, dtype: torch.dtype) -> Tensor | dict[str, Tensor]:
        from transformers.image_transforms import convert_to_rgb

        images = [convert_to_rgb(image, return_numpy=True) for image in as_images(items)]
        out = self.processor(images=images, return_tensors="pt")
        batch = {k: v.to(device) for k, v in out.items()}
        batch["pixel_values"] = batch["pixel_values"].to(dtype)
        return batch["pixel_values"] if batch.keys() == {"pixel_values"} else batch

    def save(self, path: str) -> None:
        """Write the processor's config (`preprocessor_config.json`)."""
        self.processor.save_pretrained(path)


@attrs.frozen
class OpenClipImages:
    """open_clip's eval transform of a `PreprocessCfg` (one PIL image at a time, then stacked)."""

    cfg: Any  # open_clip.transform.PreprocessCfg
    transform: Any = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        from open_clip.transform import image_transform_v2

        object.__setattr__(self, "transform", image_transform_v2(self.cfg, is_train=False))

    @classmethod
    def for_model(cls, model: Any, preprocess_cfg: dict[str, Any]) -> "OpenClipImages":
        """As `create_model_and_transforms` builds it: open_clip's defaults (OpenAI statistics, bicubic,
        shortest-side resize) merged with `preprocess_cfg`, at the media tower's own `image_size`."""
        from open_clip.transform import PreprocessCfg, merge_preprocess_dict

        merged = merge_preprocess_dict(PreprocessCfg(), preprocess_cfg)
        if hasattr(model.visual, "image_size"):
            merged["size"] = model.visual.image_size
        return cls(PreprocessCfg(**merged))

    def to_dict(self) -> dict[str, Any]:
        """The `preprocess_cfg` section of open_clip_config.json."""
        return dataclasses.asdict(self.cfg)

    def __call__(self, items: Sequence[Any], device: torch.device, dtype: torch.dtype) -> Tensor:
        return torch.stack([self.transform(image) for image in as_images(items)]).to(device=device, dtype=dtype)
