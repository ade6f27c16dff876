"""SigLIP and SigLIP2 (transformers): the embedding is the attention-pooling head's output,

    z = a + W_2 u + b_2,   u = act(W_1 LN(a) + b_1),   a = attention-pooled probe token,

so the last affine is a residual head at `vision_model.head.mlp.fc2` (docs/method.md sec. 4).
SigLIP2 has two layouts: fixed-resolution checkpoints are `model_type: "siglip"` (a SiglipModel with a
Gemma tokenizer); NaFlex checkpoints are `Siglip2Model`, fed patchified pixels with a patch mask and
per-image patch-grid shapes. The loader reads config.json to pick.
"""

from __future__ import annotations

from typing import Any, Sequence

from torch import Tensor, nn
from transformers import (
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Siglip2Config,
    Siglip2ImageProcessorPil,
    Siglip2Model,
    SiglipConfig,
    SiglipImageProcessorPil,
    SiglipModel,
)

from platonic_sdk.errors import NotAffineError, PlatonicError
from platonic_sdk.protocol.encoder import AffineSite
from platonic_sdk.registry import FamilySpec, register_family

from ._hf import HFImageTextEncoder, deep_merge, text_config_for

_TEXT = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2}
_VISION = {
    "patch_size": 8,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
}
TINY_CONFIG: dict[str, Any] = {"text_config": _TEXT, "vision_config": {"image_size": 32, **_VISION}}
# NaFlex towers have no fixed image size: a learned 16 x 16 position grid, resized to each image's patch grid.
# Patch 16 and 256 patches are what Siglip2Processor passes to its image processor whatever the saved config
# says, so a saved tiny model embeds the same through the native processor.
TINY_NAFLEX_CONFIG: dict[str, Any] = {
    "text_config": _TEXT,
    "vision_config": {**_VISION, "patch_size": 16, "num_patches": 256},
}


class SiglipEncoder(HFImageTextEncoder):
    """HF SiglipModel: f = vision head output (pooler), g = text head at the last position."""

    model_types: tuple[str, ...] = ("siglip",)
    text_attention_mask = False  # SigLIP was trained on max-length-padded text without a mask

    @classmethod
    def model_class(cls, config: PretrainedConfig) -> type[PreTrainedModel]:
        return SiglipModel

    @classmethod
    def default_processor(cls, config: PretrainedConfig) -> Any:
        """SigLIP's recipe (bicubic square resize, mean = std = 0.5) at the model's size."""
        size = config.vision_config.image_size
        return SiglipImageProcessorPil(size={"height": size, "width": size})

    @property
    def embed_dim(self) -> int:
        return int(self._model.config.vision_config.hidden_size)

    def embed_media(self, batch: Tensor) -> Tensor:
        return self._model.vision_model(pixel_values=batch).pooler_output

    def embed_text(self, texts: Sequence[str]) -> Tensor:
        return self._model.text_model(**self.tokenize(texts)).pooler_output

    def last_affine(self) -> AffineSite:
        head = getattr(self._model.vision_model, "head", None)
        fc2 = getattr(getattr(head, "mlp", None), "fc2", None)
        if not isinstance(fc2, nn.Linear) or fc2.bias is None:
            raise NotAffineError(
                f"{self.family}: the vision tower has no attention-pooling head with an mlp.fc2 Linear"
            )
        return AffineSite(kind="residual_head", weight=fc2.weight, bias=fc2.bias, layout="out_in", module=fc2)


class Siglip2Encoder(SiglipEncoder):
    """SigLIP2: a SiglipModel (fixed resolution) or a Siglip2Model (NaFlex), by config model_type."""

    model_types = ("siglip", "siglip2")

    @classmethod
    def model_class(cls, config: PretrainedConfig) -> type[PreTrainedModel]:
        return Siglip2Model if config.model_type == "siglip2" else SiglipModel

    @classmethod
    def default_processor(cls, config: PretrainedConfig) -> Any:
        if config.model_type != "siglip2":
            return super().default_processor(config)
        vision = config.vision_config
        return Siglip2ImageProcessorPil(patch_size=vision.patch_size, max_num_patches=vision.num_patches)

    def embed_media(self, batch: Tensor | dict[str, Tensor]) -> Tensor:
        if isinstance(self._model, Siglip2Model):
            return self._model.vision_model(**batch).pooler_output
        return super().embed_media(batch)


def _register(name: str, cls: type[SiglipEncoder], default_checkpoint: str, description: str) -> FamilySpec:
    def load(checkpoint: str, **options: Any) -> SiglipEncoder:
        return cls.load(checkpoint, family=name, **options)

    def from_config(
        config: dict[str, Any] | None = None, tokenizer: PreTrainedTokenizerBase | None = None, **options: Any
    ) -> SiglipEncoder:
        """Random weights from a config dict written over the tiny config (vocab from `tokenizer`).

        For siglip2, `config["model_type"]` picks the layout: "siglip2" (NaFlex, default) or "siglip".
        """
        config = dict(config or {})
        naflex = config.pop("model_type", "siglip2" if cls is Siglip2Encoder else "siglip") == "siglip2"
        if naflex and cls is not Siglip2Encoder:
            raise PlatonicError(f"family {name!r} has no NaFlex layout (use family 'siglip2')")
        cfg = deep_merge(TINY_NAFLEX_CONFIG if naflex else TINY_CONFIG, config)
        # the text head maps into the joint space, whose width is the vision tower's
        cfg["text_config"].setdefault("projection_size", cfg["vision_config"]["hidden_size"])
        tokenizer, cfg["text_config"] = text_config_for(tokenizer, cfg.get("text_config", {}))
        hf_config = Siglip2Config(**cfg) if naflex else SiglipConfig(**cfg)
        return cls.build(hf_config, tokenizer, family=name, **options)

    return register_family(FamilySpec(name, "image", default_checkpoint, load, from_config, description))


_register("siglip", SiglipEncoder, "google/siglip-large-patch16-256", "SigLIP (transformers SiglipModel)")
_register(
    "siglip2",
    Siglip2Encoder,
    "google/siglip2-large-patch16-256",
    "SigLIP2 (transformers SiglipModel fixed-res, or Siglip2Model NaFlex)",
)
