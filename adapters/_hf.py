"""Shared machinery of the transformers-backed image-text families (CLIP, MetaCLIP, SigLIP, SigLIP2).

A checkpoint is an HF folder or hub id: config.json (its `model_type` names the architecture),
safetensors weights, tokenizer files, preprocessor_config.json, plus `platonic.json` ({"family": ...})
in folders this SDK writes, so that a folder saved by one family is refused by another.
"""

from __future__ import annotations

import abc
import contextlib
import copy
import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Sequence

import torch
from torch import Tensor, nn
from transformers import AutoConfig, AutoImageProcessor, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from platonic_sdk.atomic import write_text
from platonic_sdk.errors import CheckpointError
from platonic_sdk.protocol.encoder import MARKER, DualEncoder, read_marker
from platonic_sdk.version import __version__

from ._image import IMAGE_BACKEND, HFImages
from ._text import check_texts, check_vocab, context_length_of, default_tokenizer, load_tokenizer


def resolve_checkpoint(checkpoint: str | os.PathLike) -> tuple[str, bool]:
    """(source, is_local): an existing folder, or an "org/name" hub id; anything else is a missing path."""
    text = str(checkpoint)
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise CheckpointError(f"{text} is a file; this family loads a checkpoint folder or a hub id")
        return str(path), True
    if text.startswith(("/", ".", "~")) or text.count("/") != 1:
        raise CheckpointError(f"no checkpoint folder at {text} (and it is not an 'org/name' hub id)")
    return text, False


def write_marker(folder: str | os.PathLike, encoder: DualEncoder, **fields: Any) -> None:
    """Record which family wrote `folder`, from which checkpoint it descends, the edits folded into its
    weights (`folded_edits`, see DualEncoder.edit_record) and any builder `fields`."""
    marker = {"family": encoder.family, "checkpoint": encoder.checkpoint, "sdk_version": __version__,
              "folded_edits": encoder.edit_record(), **fields}
    write_text(Path(folder) / MARKER, json.dumps(marker, indent=2))


def check_family(marker: dict[str, Any], family: str, where: str) -> None:
    """Refuse a folder that this SDK saved for another family."""
    saved = marker.get("family")
    if saved is not None and saved != family:
        raise CheckpointError(f"{where} holds a {saved!r} checkpoint, not a {family!r} one")


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """A copy of `base` with `update` written over it, recursing into nested dicts."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@contextlib.contextmanager
def quiet_progress() -> Iterator[None]:
    """Silence transformers' per-file progress bars (weights loading / shard writing) for the block."""
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


_TOKEN_ID_WARNING = re.compile(r"Model config: \w+_token_id must be `None` or an integer within the vocabulary \(between 0 and (\d+)\)")


@contextlib.contextmanager
def foreign_token_id_warnings_dropped(vocab_size: int | None) -> Iterator[None]:
    """Drop transformers' special-token-id warnings about configs other than ours (text vocabulary `vocab_size`).

    Printing or saving a config makes transformers build its *default* sub-configs (SigLIP's default
    text config has a 32,000-token vocabulary with bos id 49,406) and warn about their ids. A warning
    whose vocabulary is not our config's is that, and is dropped; one about our own ids passes.
    """

    def keep(record: logging.LogRecord) -> bool:
        match = _TOKEN_ID_WARNING.match(record.getMessage())
        return match is None or vocab_size is None or int(match.group(1)) == int(vocab_size) - 1

    logger = logging.getLogger("transformers.configuration_utils")
    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def local_config(source: str) -> dict[str, Any]:
    """A local checkpoint's config.json as a dict ({} for a hub id or an unreadable file)."""
    try:
        data = json.loads((Path(source) / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def text_vocab_size(config: dict[str, Any] | PretrainedConfig) -> int | None:
    """The text tower's vocabulary size of a config (object or config.json dict), None when it has none."""
    text = config.get("text_config") if isinstance(config, dict) else getattr(config, "text_config", None)
    value = text.get("vocab_size") if isinstance(text, dict) else getattr(text, "vocab_size", None)
    return int(value) if isinstance(value, int) else None


def seeded(seed: int, build: Callable[[], nn.Module]) -> nn.Module:
    """`build()` under torch seed `seed`, leaving the global RNG state as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


class HFImageTextEncoder(DualEncoder):
    """A transformers image-text model: vision_model + text_model, tokenizer and image processor.

    Subclasses name the accepted `model_types`, the model class, how text is padded, and implement
    `embed_media`, `embed_text`, `embed_dim` and `last_affine`.
    """

    modality = "image"
    model_types: ClassVar[tuple[str, ...]]
    # Text is always padded to the context length; CLIP also masks the padding (SigLIP was trained without).
    text_attention_mask: ClassVar[bool] = True

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        images: HFImages,
        *,
        family: str,
        checkpoint: str | None = None,
    ) -> None:
        check_vocab(tokenizer, model.config.text_config.vocab_size, f"the {family} model")
        self._model = model.eval()
        self.tokenizer = tokenizer
        self.images = images
        self.family = family
        self.checkpoint = checkpoint

    # -- protocol -------------------------------------------------------------------------------
    @property
    def model(self) -> PreTrainedModel:
        return self._model

    @property
    def media_encoder(self) -> nn.Module:
        return self._model.vision_model

    @property
    def lora_targets(self) -> list[str]:
        return ["self_attn.q_proj", "self_attn.v_proj"]

    @property
    def logit_scale(self) -> float:
        """exp of the model's stored `logit_scale` (CLIPModel, SiglipModel and Siglip2Model keep its log)."""
        return float(self._model.logit_scale.detach().exp())

    @property
    def context_length(self) -> int:
        """Number of text positions of the text tower (texts are padded/truncated to it)."""
        return int(self._model.config.text_config.max_position_embeddings)

    def preprocess(self, items: Sequence[Any]) -> Any:
        return self.images(items, self.device, self.dtype)

    def tokenize(self, texts: Sequence[str]) -> dict[str, Tensor]:
        """Token ids (and the padding mask where the family uses one) on this encoder's device."""
        enc = self.tokenizer(
            check_texts(texts),
            padding="max_length",
            truncation=True,
            max_length=self.context_length,
            return_tensors="pt",
        )
        out = {"input_ids": enc["input_ids"].to(self.device)}
        if self.text_attention_mask:
            out["attention_mask"] = enc["attention_mask"].to(self.device)
        return out

    def save(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)
        with quiet_progress(), foreign_token_id_warnings_dropped(text_vocab_size(self._model.config)):
            self._model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        self.images.save(path)
        write_marker(path, self)

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    @abc.abstractmethod
    def model_class(cls, config: PretrainedConfig) -> type[PreTrainedModel]:
        """The transformers class that builds `config`."""

    @classmethod
    @abc.abstractmethod
    def default_processor(cls, config: PretrainedConfig) -> Any:
        """The family's transformers image processor at the model's size (for `build`, and checkpoints that ship none)."""

    @classmethod
    def load(
        cls,
        checkpoint: str,
        *,
        family: str,
        device: str | torch.device | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> "HFImageTextEncoder":
        """Load an HF folder or hub id (offline: hub ids fail with CheckpointError)."""
        source, local = resolve_checkpoint(checkpoint)
        if local:
            check_family(read_marker(source), family, source)
        try:
            with foreign_token_id_warnings_dropped(text_vocab_size(local_config(source))):
                config = AutoConfig.from_pretrained(source)
        except Exception as exc:  # OSError offline / missing, ValueError for unknown model types
            raise CheckpointError(f"cannot read a model config from {source}: {exc}") from exc
        if config.model_type not in cls.model_types:
            raise CheckpointError(
                f"{source} holds a {config.model_type!r} model; family {family!r} loads {', '.join(cls.model_types)}"
            )
        try:
            with quiet_progress():
                model, info = cls.model_class(config).from_pretrained(
                    source, config=config, dtype=dtype, output_loading_info=True
                )
        except Exception as exc:  # missing or corrupt weight files
            raise CheckpointError(f"cannot load {family} weights from {source}: {exc}") from exc
        broken = {k: v for k, v in info.items() if k in ("missing_keys", "mismatched_keys") and v}
        if broken:
            raise CheckpointError(f"weights in {source} do not fit the {config.model_type} architecture: {broken}")
        tokenizer = load_tokenizer(source, config.text_config.vocab_size)
        try:  # the checkpoint's own processor (PIL backend: see adapters/_image.py)
            processor = AutoImageProcessor.from_pretrained(source, backend=IMAGE_BACKEND)
        except OSError:  # no preprocessor_config.json: the family's defaults at the model's size
            processor = cls.default_processor(config)
        encoder = cls(model, tokenizer, HFImages(processor), family=family, checkpoint=str(checkpoint))
        return encoder.to(device) if device is not None else encoder

    @classmethod
    def build(
        cls,
        config: PretrainedConfig,
        tokenizer: PreTrainedTokenizerBase,
        *,
        family: str,
        seed: int = 0,
        device: str | torch.device | None = None,
    ) -> "HFImageTextEncoder":
        """Random weights (seeded) for `config`, paired with `tokenizer`."""
        model = seeded(seed, lambda: cls.model_class(config)(config))
        encoder = cls(model, tokenizer, HFImages(cls.default_processor(config)), family=family)
        return encoder.to(device) if device is not None else encoder


def text_config_for(tokenizer: PreTrainedTokenizerBase | None, text: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(tokenizer, text config) with the vocabulary, special ids and context length taken from the tokenizer."""
    tokenizer = tokenizer if tokenizer is not None else default_tokenizer()
    text = dict(text)
    text.setdefault("max_position_embeddings", context_length_of(tokenizer))
    text.update(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return tokenizer, text
