"""CLIP and MetaCLIP (transformers `CLIPModel`): z = W_p h with W_p = visual_projection (no bias).

MetaCLIP checkpoints are `CLIPModel`s too; the two families differ in their default checkpoint.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import Tensor
from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel, PretrainedConfig, PreTrainedTokenizerBase

from platonic_sdk.errors import NotAffineError
from platonic_sdk.protocol.encoder import AffineSite
from platonic_sdk.registry import FamilySpec, register_family

from ._hf import HFImageTextEncoder, deep_merge, text_config_for

TINY_CONFIG: dict[str, Any] = {
    "projection_dim": 64,
    "text_config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2},
    "vision_config": {
        "image_size": 32,
        "patch_size": 8,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
    },
}


class CLIPEncoder(HFImageTextEncoder):
    """HF CLIPModel: f = visual_projection(vision pooler), g = text_projection(text pooler at <eos>)."""

    model_types = ("clip",)

    @classmethod
    def model_class(cls, config: PretrainedConfig) -> type[CLIPModel]:
        return CLIPModel

    @classmethod
    def default_processor(cls, config: PretrainedConfig) -> CLIPImageProcessorPil:
        """CLIP's recipe (OpenAI statistics, bicubic shortest-side resize, centre crop) at the model's size."""
        size = config.vision_config.image_size
        return CLIPImageProcessorPil(size={"shortest_edge": size}, crop_size={"height": size, "width": size})

    @property
    def embed_dim(self) -> int:
        return int(self._model.config.projection_dim)

    def embed_media(self, batch: Tensor) -> Tensor:
        pooled = self._model.vision_model(pixel_values=batch).pooler_output
        return self._model.visual_projection(pooled)

    def embed_text(self, texts: Sequence[str]) -> Tensor:
        pooled = self._model.text_model(**self.tokenize(texts)).pooler_output
        return self._model.text_projection(pooled)

    def last_affine(self) -> AffineSite:
        proj = self._model.visual_projection
        if not isinstance(proj, torch.nn.Linear):
            raise NotAffineError(f"{self.family}: visual_projection is a {type(proj).__name__}, not nn.Linear")
        return AffineSite(kind="projection", weight=proj.weight, bias=proj.bias, layout="out_in")


def _family(name: str, default_checkpoint: str, description: str) -> FamilySpec:
    def load(checkpoint: str, **options: Any) -> CLIPEncoder:
        return CLIPEncoder.load(checkpoint, family=name, **options)

    def from_config(
        config: dict[str, Any] | None = None, tokenizer: PreTrainedTokenizerBase | None = None, **options: Any
    ) -> CLIPEncoder:
        """Random CLIPModel from a CLIPConfig dict written over the tiny config (vocab from `tokenizer`)."""
        cfg = deep_merge(TINY_CONFIG, config or {})
        tokenizer, cfg["text_config"] = text_config_for(tokenizer, cfg.get("text_config", {}))
        return CLIPEncoder.build(CLIPConfig(**cfg), tokenizer, family=name, **options)

    return register_family(FamilySpec(name, "image", default_checkpoint, load, from_config, description))


_family("clip", "openai/clip-vit-large-patch14", "OpenAI CLIP (transformers CLIPModel)")
_family("metaclip", "facebook/metaclip-l14-400m", "MetaCLIP (transformers CLIPModel)")
