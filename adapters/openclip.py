"""OpenCLIP ViT (open_clip): z = h @ P with P = visual.proj (a Parameter stored in_out, no bias).

Checkpoints: a folder in open_clip's own `local-dir` layout (open_clip_config.json with model_cfg and
preprocess_cfg, open_clip_model.safetensors, plus transformers tokenizer files named by
`text_cfg.hf_tokenizer_name` when the tokenizer is not open_clip's bundled BPE, plus platonic.json), an
"org/name" hub id, or an open_clip model name with a pretrained tag or local weights file:
"ViT-L-14:laion2b_s32b_b82k", or load("ViT-L-14", pretrained=path_or_tag). Images and text go through
open_clip's own eval transform and tokenizer (`get_tokenizer`: whitespace cleaning, max-length padding).

LoRA on q and v: open_clip's ViT blocks use a fused nn.MultiheadAttention (one in_proj for q, k, v),
which peft can only wrap whole. The adapter therefore swaps each media-tower MHA for `SplitQKVAttention`,
the same computation with q_proj / k_proj / v_proj as separate nn.Linear (weights copied exactly);
`save` fuses them back, so files stay in open_clip's format.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path
from typing import Any, ClassVar, Sequence

import open_clip
import torch
from open_clip.tokenizer import HFTokenizer
from open_clip.transformer import ResidualAttentionBlock
from safetensors.torch import save_file
from torch import Tensor, nn
from torch.nn import functional as F
from transformers import PreTrainedTokenizerBase

from platonic_sdk.errors import CheckpointError, NotAffineError, PlatonicError
from platonic_sdk.protocol.encoder import AffineSite, DualEncoder
from platonic_sdk.registry import FamilySpec, register_family

from ._hf import check_family, deep_merge, read_marker, seeded, write_marker
from ._image import OpenClipImages
from ._text import check_texts, check_vocab, context_length_of, default_tokenizer

CONFIG_FILE = "open_clip_config.json"
WEIGHTS_FILE = "open_clip_model.safetensors"
# weight files open_clip writes or publishes, in its own order of preference
WEIGHTS_FILES = (WEIGHTS_FILE, "open_clip_pytorch_model.safetensors", "open_clip_pytorch_model.bin")
# open_clip's get_tokenizer("local-dir:...") reads a transformers tokenizer from the folder itself whenever
# text_cfg names any hf_tokenizer_name; this is the name written for tokenizers that have no hub id.
TOKENIZER_IN_FOLDER = "local-dir"

TINY_CONFIG: dict[str, Any] = {
    "embed_dim": 64,
    "vision_cfg": {"image_size": 32, "patch_size": 8, "width": 64, "layers": 2, "head_width": 32},
    "text_cfg": {"width": 64, "heads": 2, "layers": 2},
}


class SplitQKVAttention(nn.Module):
    """Batch-first self-attention, softmax(q k^T / sqrt(d_h) + mask) v then out_proj, with q, k, v as nn.Linear.

    Built from an nn.MultiheadAttention by slicing its fused in_proj, so both compute the same map.
    """

    def __init__(self, mha: nn.MultiheadAttention) -> None:
        super().__init__()
        if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
            raise PlatonicError("only plain self-attention MultiheadAttention modules can be split into q, k, v")
        d, bias = mha.embed_dim, mha.in_proj_bias is not None
        self.num_heads, self.batch_first = mha.num_heads, mha.batch_first
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(d, d, bias=bias) for _ in range(3))
        with torch.no_grad():
            for i, proj in enumerate((self.q_proj, self.k_proj, self.v_proj)):
                proj.weight.copy_(mha.in_proj_weight[i * d : (i + 1) * d])
                if bias:
                    proj.bias.copy_(mha.in_proj_bias[i * d : (i + 1) * d])
        self.out_proj = mha.out_proj
        self.to(mha.in_proj_weight.device, mha.in_proj_weight.dtype)

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, need_weights: bool = False, attn_mask: Tensor | None = None
    ) -> tuple[Tensor, None]:
        if not self.batch_first:
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        n, length, d = query.shape

        def heads(x: Tensor) -> Tensor:
            return x.reshape(n, -1, self.num_heads, d // self.num_heads).transpose(1, 2)

        out = F.scaled_dot_product_attention(
            heads(self.q_proj(query)), heads(self.k_proj(key)), heads(self.v_proj(value)), attn_mask=attn_mask
        )
        out = self.out_proj(out.transpose(1, 2).reshape(n, length, d))
        return (out if self.batch_first else out.transpose(0, 1)), None


def split_attention(tower: nn.Module) -> nn.Module:
    """Replace every fused self-attention of the tower's residual blocks by a `SplitQKVAttention` (in place).

    Raises PlatonicError when there is none to replace (e.g. a future open_clip whose blocks no longer use
    nn.MultiheadAttention): the LoRA routes would otherwise find no q / v projection and fit nothing.
    """
    blocks = [b for b in tower.modules() if isinstance(b, ResidualAttentionBlock) and isinstance(b.attn, nn.MultiheadAttention)]
    if not blocks:
        raise PlatonicError(
            f"no nn.MultiheadAttention in the residual blocks of this {type(tower).__name__} "
            f"(open_clip {open_clip.__version__}): its q / k / v cannot be split for the LoRA routes"
        )
    for block in blocks:
        block.attn = SplitQKVAttention(block.attn)
    return tower


def fused_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """The model's state dict in open_clip's layout: each split q/k/v triple fused back into in_proj."""
    state = {k: v.detach() for k, v in model.state_dict().items()}
    for name, module in model.named_modules():
        if isinstance(module, SplitQKVAttention):
            parts = ("q_proj", "k_proj", "v_proj")
            state[f"{name}.in_proj_weight"] = torch.cat([state.pop(f"{name}.{p}.weight") for p in parts])
            if module.q_proj.bias is not None:
                state[f"{name}.in_proj_bias"] = torch.cat([state.pop(f"{name}.{p}.bias") for p in parts])
    return {k: v.contiguous() for k, v in state.items()}


class OpenClipEncoder(DualEncoder):
    """An open_clip CLIP / CustomTextCLIP model with its tokenizer and image transform."""

    modality = "image"
    description: ClassVar[str] = "an open_clip ViT"
    # builder options beyond open_clip's model config, popped from `from_config` dicts, kept in platonic.json
    extra_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        model: nn.Module,
        model_cfg: dict[str, Any],
        tokenizer: Any,
        images: OpenClipImages,
        *,
        family: str,
        checkpoint: str | None = None,
        extras: dict[str, Any] | None = None,
    ) -> None:
        check_vocab(getattr(tokenizer, "tokenizer", tokenizer), model_cfg["text_cfg"].get("vocab_size", 49408),
                    f"the {family} model")
        self._model = self.prepare(model).eval()
        self.model_cfg = model_cfg
        self.tokenizer = tokenizer
        self.images = images
        self.family = family
        self.checkpoint = checkpoint
        self.extras = dict(extras or {})

    # -- family hooks ---------------------------------------------------------------------------
    @classmethod
    def accepts(cls, model_cfg: dict[str, Any]) -> bool:
        """Whether an open_clip model config belongs to this family (a ViT media tower here)."""
        vision = model_cfg.get("vision_cfg", {})
        return not vision.get("timm_model_name") and not vision.get("hf_model_name")

    @classmethod
    def prepare(cls, model: nn.Module) -> nn.Module:
        """Make the media tower's q and v projections separate modules (see module docstring)."""
        split_attention(model.visual)
        return model

    @classmethod
    def build_model(cls, model_cfg: dict[str, Any], extras: dict[str, Any]) -> nn.Module:
        """open_clip's model class for the config, with random weights."""
        cfg = copy.deepcopy(model_cfg)
        model_cls = open_clip.CustomTextCLIP if cfg.pop("custom_text", False) else open_clip.CLIP
        return model_cls(**cfg)

    # -- protocol -------------------------------------------------------------------------------
    @property
    def model(self) -> nn.Module:
        return self._model

    @property
    def embed_dim(self) -> int:
        return int(self.model_cfg["embed_dim"])

    @property
    def media_encoder(self) -> nn.Module:
        return self._model.visual

    @property
    def lora_targets(self) -> list[str]:
        return ["attn.q_proj", "attn.v_proj"]

    @property
    def logit_scale(self) -> float:
        """exp of open_clip's stored `logit_scale` (its log)."""
        return float(self._model.logit_scale.detach().exp())

    @property
    def context_length(self) -> int:
        return int(self._model.context_length)

    def preprocess(self, items: Sequence[Any]) -> Tensor:
        return self.images(items, self.device, self.dtype)

    def tokenize(self, texts: Sequence[str]) -> Tensor:
        """open_clip's tokenizer: token ids n x context_length on this encoder's device."""
        return self.tokenizer(check_texts(texts), context_length=self.context_length).to(self.device)

    def embed_media(self, batch: Tensor) -> Tensor:
        return self._model.encode_image(batch, normalize=False)

    def embed_text(self, texts: Sequence[str]) -> Tensor:
        return self._model.encode_text(self.tokenize(texts), normalize=False)

    def last_affine(self) -> AffineSite:
        proj = getattr(self._model.visual, "proj", None)
        if not isinstance(proj, nn.Parameter) or proj.ndim != 2:
            raise NotAffineError(f"{self.family}: visual.proj is not a 2-D projection matrix")
        return AffineSite(kind="projection", weight=proj, layout="in_out")

    def save(self, path: str) -> None:
        """open_clip's local-dir layout, which `create_model_and_transforms("local-dir:" + path)` loads."""
        os.makedirs(path, exist_ok=True)
        config = {"model_cfg": self.model_cfg, "preprocess_cfg": self.images.to_dict()}
        Path(path, CONFIG_FILE).write_text(json.dumps(config, indent=2))
        save_file(fused_state_dict(self._model), os.path.join(path, WEIGHTS_FILE), metadata={"family": self.family})
        if isinstance(self.tokenizer, HFTokenizer):
            self.tokenizer.save_pretrained(path)
        write_marker(path, self, extras=self.extras)

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_folder(cls, folder: str, family: str) -> "OpenClipEncoder":
        """Read a folder in open_clip's local-dir layout (as `save` writes it)."""
        marker = read_marker(folder)
        check_family(marker, family, folder)
        try:
            config = json.loads(Path(folder, CONFIG_FILE).read_text())
            model_cfg, pre = config["model_cfg"], config.get("preprocess_cfg", {})
        except (OSError, json.JSONDecodeError, KeyError) as exc:
            raise CheckpointError(f"{folder} is not an open_clip checkpoint folder ({CONFIG_FILE}: {exc})") from exc
        if not cls.accepts(model_cfg):
            raise CheckpointError(f"{folder} holds an open_clip model that is not {cls.description}")
        extras = marker.get("extras", {})
        weights = next((Path(folder, f) for f in WEIGHTS_FILES if Path(folder, f).is_file()), None)
        if weights is None:
            raise CheckpointError(f"{folder} has no weights file ({', '.join(WEIGHTS_FILES)})")
        model = cls.build_model(model_cfg, extras)
        try:
            open_clip.load_checkpoint(model, str(weights), strict=True)
        except Exception as exc:  # corrupt file, wrong keys or shapes
            raise CheckpointError(f"cannot load {family} weights from {folder}: {exc}") from exc
        if Path(folder, "tokenizer_config.json").is_file() and not model_cfg["text_cfg"].get("hf_tokenizer_name"):
            raise CheckpointError(
                f"{folder} ships tokenizer files but its {CONFIG_FILE} names no text_cfg.hf_tokenizer_name, so "
                "open_clip would tokenize with its bundled BPE instead: add one (any name) to use the folder's tokenizer"
            )
        try:
            tokenizer = open_clip.get_tokenizer(f"local-dir:{folder}")
        except Exception as exc:  # transformers raises OSError, ValueError, ... for missing/corrupt files
            raise CheckpointError(f"cannot load the tokenizer of {folder}: {exc}") from exc
        images = OpenClipImages.for_model(model, pre)
        return cls(model, model_cfg, tokenizer, images, family=family, checkpoint=folder, extras=extras)

    @classmethod
    def from_open_clip(cls, name: str, pretrained: str | None, family: str, checkpoint: str) -> "OpenClipEncoder":
        """open_clip.create_model for a hub id ("hf-hub:org/name") or a model name + tag or weights file."""
        try:
            if name.startswith("hf-hub:"):
                from huggingface_hub import hf_hub_download

                config = json.loads(Path(hf_hub_download(name[len("hf-hub:") :], CONFIG_FILE)).read_text())
                model_cfg = config["model_cfg"]
            else:
                model_cfg = open_clip.get_model_config(name)
            if model_cfg is None:
                raise CheckpointError(f"{name!r} is not an open_clip model name")
            if not cls.accepts(model_cfg):
                raise CheckpointError(f"{name} is not {cls.description}")
            if pretrained is not None:  # None only for hub ids, whose weights come with the id
                _fetch_pretrained(name, pretrained)
            model = open_clip.create_model(name, pretrained=pretrained)
            tokenizer = open_clip.get_tokenizer(name)
        except CheckpointError:
            raise
        except Exception as exc:  # offline hub, unknown tag, corrupt weights file
            raise CheckpointError(f"cannot load {family} checkpoint {checkpoint!r}: {exc}") from exc
        images = OpenClipImages.for_model(model, getattr(model.visual, "preprocess_cfg", {}))
        return cls(model, model_cfg, tokenizer, images, family=family, checkpoint=checkpoint)

    @classmethod
    def load(
        cls, checkpoint: str, *, family: str, pretrained: str | None = None, device: str | torch.device | None = None
    ) -> "OpenClipEncoder":
        """A folder, an "org/name" or "hf-hub:org/name" hub id, or "MODEL[:TAG]" / MODEL with pretrained=."""
        text = str(checkpoint)
        path = Path(text).expanduser()
        if path.is_dir():
            encoder = cls.from_folder(str(path), family)
        elif text.startswith("hf-hub:") or (text.count("/") == 1 and not text.startswith(("/", ".", "~"))):
            encoder = cls.from_open_clip(text if text.startswith("hf-hub:") else f"hf-hub:{text}", None, family, text)
        else:
            name, _, tag = text.partition(":")
            if name not in open_clip.list_models():
                raise CheckpointError(
                    f"no checkpoint folder at {text}, and it is neither a hub id nor an open_clip model name"
                )
            if pretrained is not None and tag:
                raise CheckpointError(f"{text} names a pretrained tag and pretrained={pretrained!r} another")
            if pretrained is None and not tag:
                raise CheckpointError(
                    f"{name} names no weights: add ':TAG' or pretrained=TAG_OR_FILE (random weights: from_config)"
                )
            encoder = cls.from_open_clip(name, pretrained or tag or None, family, text)
        return encoder.to(device) if device is not None else encoder

    @classmethod
    def from_config(
        cls,
        config: dict[str, Any] | None,
        tokenizer: PreTrainedTokenizerBase | None,
        *,
        family: str,
        tiny: dict[str, Any],
        seed: int = 0,
        device: str | torch.device | None = None,
    ) -> "OpenClipEncoder":
        """Random weights from an open_clip model config written over `tiny`; the text tower pools at <eos>."""
        tokenizer = tokenizer if tokenizer is not None else default_tokenizer()
        cfg = deep_merge(tiny, config or {})
        extras = {key: cfg.pop(key) for key in cls.extra_keys if key in cfg}
        text = cfg.setdefault("text_cfg", {})
        text.setdefault("context_length", context_length_of(tokenizer))
        text.update(
            vocab_size=len(tokenizer),
            pool_type="eos",
            eos_id=tokenizer.eos_token_id,
            pad_id=tokenizer.pad_token_id,
            hf_tokenizer_name=TOKENIZER_IN_FOLDER,
        )
        model = seeded(seed, lambda: cls.build_model(cfg, extras))
        images = OpenClipImages.for_model(model, {})
        encoder = cls(model, cfg, open_clip_tokenizer(tokenizer, text), images, family=family, extras=extras)
        return encoder.to(device) if device is not None else encoder


def _fetch_pretrained(name: str, pretrained: str) -> None:
    """Check a weights path, or download (or find cached) a tag's weights before the model is built.

    Fails fast offline instead of after building a large model.
    """
    if pretrained.endswith((".safetensors", ".bin", ".pt", ".pth")) or os.sep in pretrained:
        if not Path(pretrained).expanduser().is_file():
            raise CheckpointError(f"no weights file at {pretrained}")
        return
    pretrained_cfg = open_clip.get_pretrained_cfg(name, pretrained)
    if not pretrained_cfg:
        tags = ", ".join(open_clip.list_pretrained_tags_by_model(name)) or "none"
        raise CheckpointError(f"open_clip has no pretrained tag {pretrained!r} for {name} (known: {tags})")
    open_clip.download_pretrained(pretrained_cfg)


def open_clip_tokenizer(tokenizer: PreTrainedTokenizerBase, text_cfg: dict[str, Any]) -> HFTokenizer:
    """open_clip's HFTokenizer around a transformers tokenizer, as `get_tokenizer` builds it from a folder."""
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        return HFTokenizer(
            folder,
            context_length=text_cfg["context_length"],
            tokenizer_mode=text_cfg.get("tokenizer_mode"),
            **text_cfg.get("tokenizer_kwargs", {}),
        )


def register_open_clip_family(
    name: str, cls: type[OpenClipEncoder], default_checkpoint: str, tiny: dict[str, Any]
) -> FamilySpec:
    """Register an open_clip-backed family whose encoder class is `cls` and tiny test config `tiny`."""

    def load(checkpoint: str, **options: Any) -> OpenClipEncoder:
        return cls.load(checkpoint, family=name, **options)

    def from_config(
        config: dict[str, Any] | None = None, tokenizer: PreTrainedTokenizerBase | None = None, **options: Any
    ) -> OpenClipEncoder:
        return cls.from_config(config, tokenizer, family=name, tiny=tiny, **options)

    return register_family(FamilySpec(name, "image", default_checkpoint, load, from_config, cls.description))


register_open_clip_family("openclip", OpenClipEncoder, "laion/CLIP-ViT-L-14-laion2B-s32B-b82K", TINY_CONFIG)
