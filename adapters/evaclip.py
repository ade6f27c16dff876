"""EVA-CLIP (open_clip with a timm EVA02 media trunk): z = W h + b with the trunk's classifier `head`

(visual.trunk.head, nn.Linear with bias, when the config has timm_proj null as EVA02-L-14 does; an
open_clip `visual.head.proj` Linear when a config adds one). The trunk's attention already has separate
q_proj / v_proj (timm `qkv_fused=False`), so peft targets them directly.

Custom sizes: open_clip's TimmModel passes no architecture arguments to timm, so a config may carry
`timm_kwargs` (e.g. patch_size, embed_dim, depth, num_heads), and the trunk is then built by `TimmTower`
with those arguments (same module layout and state-dict keys as open_clip's TimmModel).
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import open_clip
import timm
from open_clip.timm_model import TimmModel
from torch import nn

from platonic_sdk.errors import NotAffineError, PlatonicError
from platonic_sdk.protocol.encoder import AffineSite

from .openclip import OpenClipEncoder, register_open_clip_family

TINY_CONFIG: dict[str, Any] = {
    "embed_dim": 64,
    "custom_text": True,
    "vision_cfg": {
        "image_size": 32,
        "timm_model_name": "eva02_large_patch14_clip_224",
        "timm_model_pretrained": False,
        "timm_pool": "token",
        "timm_proj": None,
    },
    "text_cfg": {"width": 64, "heads": 2, "layers": 2},
    "timm_kwargs": {"patch_size": 8, "embed_dim": 64, "depth": 2, "num_heads": 2},
}


class TimmTower(TimmModel):
    """open_clip's TimmModel layout (trunk + empty head) for a timm trunk built with architecture kwargs.

    The trunk's classifier, of width `out_dim` (the joint embedding), is the projection into the joint space.
    """

    def __init__(self, model_name: str, out_dim: int, image_size: int, pool: str, timm_kwargs: dict[str, Any]) -> None:
        nn.Module.__init__(self)  # TimmModel.__init__ would build the named trunk at its full size first
        self.image_size = (image_size, image_size)
        patch = timm_kwargs.get("patch_size", 14)
        kwargs = {"ref_feat_shape": (image_size // patch, image_size // patch), **timm_kwargs}
        self.trunk = timm.create_model(
            model_name, pretrained=False, num_classes=out_dim, global_pool=pool, img_size=image_size, **kwargs
        )
        self.head = nn.Sequential()


class EvaClipEncoder(OpenClipEncoder):
    """open_clip CustomTextCLIP with an EVA02 timm trunk."""

    description = "an open_clip EVA model (timm EVA trunk)"
    extra_keys: ClassVar[tuple[str, ...]] = ("timm_kwargs",)

    @classmethod
    def accepts(cls, model_cfg: dict[str, Any]) -> bool:
        return str(model_cfg.get("vision_cfg", {}).get("timm_model_name") or "").startswith("eva")

    @classmethod
    def prepare(cls, model: nn.Module) -> nn.Module:
        return model

    @classmethod
    def build_model(cls, model_cfg: dict[str, Any], extras: dict[str, Any]) -> nn.Module:
        timm_kwargs = extras.get("timm_kwargs")
        if not timm_kwargs:
            return super().build_model(model_cfg, extras)
        cfg = copy.deepcopy(model_cfg)
        vision = cfg["vision_cfg"]
        if vision.get("timm_proj") or vision.get("timm_pool", "token") in ("abs_attn", "rot_attn"):
            raise PlatonicError("timm_kwargs support EVA towers without an extra projection (timm_proj null)")
        size = vision["image_size"]
        # the text tower and temperatures come from open_clip; the media tower is a minimal stand-in, replaced below
        cfg["vision_cfg"] = {"image_size": size, "patch_size": size, "width": 8, "layers": 1, "head_width": 8}
        cfg.pop("custom_text", None)
        model = open_clip.CustomTextCLIP(**cfg)
        model.visual = TimmTower(
            vision["timm_model_name"], cfg["embed_dim"], size, vision.get("timm_pool", "token"), timm_kwargs
        )
        return model

    @property
    def lora_targets(self) -> list[str]:
        return ["attn.q_proj", "attn.v_proj"]

    def last_affine(self) -> AffineSite:
        visual = self._model.visual
        proj = getattr(visual.head, "proj", None)
        if proj is None and len(visual.head) == 0:
            proj = getattr(visual.trunk, "head", None)
        if not isinstance(proj, nn.Linear):
            raise NotAffineError(f"{self.family}: the media tower does not end in an nn.Linear projection")
        return AffineSite(kind="projection", weight=proj.weight, bias=proj.bias, layout="out_in")


register_open_clip_family("evaclip", EvaClipEncoder, "EVA02-L-14:merged2b_s4b_b131k", TINY_CONFIG)
