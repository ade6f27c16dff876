"""CLAP audio-text families on transformers `ClapModel` (HTSAT audio tower, RoBERTa text tower).

z = W_2 relu(W_1 h + b_1) + b_2 with h the HTSAT pooled output: the last affine is
`audio_projection.linear2` (a projection site, with bias). Four families share this adapter and differ
in their reference checkpoint and tiny test config: clap-htsat-unfused, clap-htsat-fused (4-channel
"fusion" input for clips longer than the model's window), clap-general and clap-music (HTSAT-base).
The original laion_clap `.pt` checkpoints load through `adapters/_laion.py` (optional `laion` extra).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor, nn
from transformers import ClapConfig, ClapFeatureExtractor, ClapModel, PreTrainedTokenizerBase

from platonic_sdk.data.audio import InputFormat
from platonic_sdk.errors import CheckpointError, PlatonicError
from platonic_sdk.protocol.encoder import AffineSite, DualEncoder
from platonic_sdk.registry import FamilySpec, register_family

from ._hf import (
    check_family,
    deep_merge,
    quiet_progress,
    read_marker,
    resolve_checkpoint,
    seeded,
    text_config_for,
    write_marker,
)
from ._text import check_texts, check_vocab, context_length_of, load_tokenizer

# HTSAT's window attention: the query and value projections of every Swin block.
LORA_TARGETS = ["attention.self.query", "attention.self.value"]
# Seed of the feature extractor's random crops (a fused model's views of clips longer than its window;
# unfused models get clips already cropped to their first window), fixed so that the same clip always
# gives the same features: descriptors and caches must be reproducible.
CROP_SEED = 0

_TINY_TEXT = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
              "max_position_embeddings": 40, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
_TINY_AUDIO = {"spec_size": 32, "num_mel_bins": 16, "patch_size": 4, "patch_stride": [4, 4], "window_size": 4,
               "depths": [1, 1], "num_attention_heads": [2, 4], "patch_embeds_hidden_size": 16, "hidden_size": 32,
               "hidden_dropout_prob": 0.0}
# 1 s at 8 kHz: 63 frames of 16 mel bins fold into a 32 x 32 HTSAT input (frequency ratio 2).
_TINY_FEATURES = {"sampling_rate": 8000, "hop_length": 128, "fft_window_size": 256, "max_length_s": 1,
                  "frequency_min": 40, "frequency_max": 4000}


def _feature_extractor(features: dict[str, Any], fused: bool) -> ClapFeatureExtractor:
    """The model's feature extractor; truncation follows the model ("fusion" input crashes an unfused one)."""
    return ClapFeatureExtractor(**{**features, "truncation": "fusion" if fused else "rand_trunc"})


class ClapEncoder(DualEncoder):
    """A transformers ClapModel with its feature extractor and tokenizer behind the DualEncoder protocol."""

    modality = "audio"

    def __init__(self, model: ClapModel, tokenizer: PreTrainedTokenizerBase, feature_extractor: ClapFeatureExtractor,
                 family: str, checkpoint: str | None = None) -> None:
        fused = bool(model.config.audio_config.enable_fusion)
        if (feature_extractor.truncation == "fusion") != fused:
            raise CheckpointError(
                f"feature extractor truncation {feature_extractor.truncation!r} does not fit a "
                f"{'fused' if fused else 'unfused'} CLAP model"
            )
        check_vocab(tokenizer, model.config.text_config.vocab_size, f"the {family} model")
        self._model = model.eval()
        self.tokenizer = tokenizer
        self.feature_extractor = feature_extractor
        self.input_format = InputFormat(int(feature_extractor.sampling_rate), int(feature_extractor.nb_max_samples), crop=not fused)
        self.family = family
        self.checkpoint = checkpoint

    @property
    def embed_dim(self) -> int:
        return int(self._model.audio_projection.linear2.out_features)

    @property
    def model(self) -> nn.Module:
        return self._model

    @property
    def media_encoder(self) -> nn.Module:
        return self._model.audio_model

    @property
    def lora_targets(self) -> list[str]:
        return list(LORA_TARGETS)

    @property
    def sample_rate(self) -> int:
        """The rate (Hz) every waveform is resampled to before its log-mel spectrogram."""
        return int(self.feature_extractor.sampling_rate)

    @property
    def logit_scale(self) -> float:
        """The audio-to-text logit scale, exp of the stored `logit_scale_a` (CLAP keeps one per direction)."""
        return float(self._model.logit_scale_a.detach().exp())

    def preprocess(self, items: Sequence[Any]) -> dict[str, Tensor]:
        """Waveforms or audio file paths -> mono at the model's rate, cropped to its window (`input_format`;
        a fused model reads long clips whole) -> the model's (padded) log-mels."""
        if len(items) == 0:
            raise PlatonicError("no audio items to preprocess")
        waves = [self.input_format.fit(item) for item in items]
        state = np.random.get_state()  # the extractor crops with numpy's global generator
        np.random.seed(CROP_SEED)
        try:
            out = self.feature_extractor(waves, sampling_rate=self.sample_rate, return_tensors="pt")
        finally:
            np.random.set_state(state)
        # The extractor flags one random clip of an all-short batch as "longer" (a training trick): a
        # clip's embedding would then depend on its batch. Flag exactly the clips longer than the window.
        longer = torch.tensor([[w.size > self.feature_extractor.nb_max_samples] for w in waves], device=self.device)
        return {"input_features": out["input_features"].to(device=self.device, dtype=self.dtype), "is_longer": longer}

    def embed_media(self, batch: dict[str, Tensor]) -> Tensor:
        pooled = self._model.audio_model(input_features=batch["input_features"], is_longer=batch["is_longer"])
        return self._model.audio_projection(pooled.pooler_output)

    def embed_text(self, texts: Sequence[str]) -> Tensor:
        tokens = self.tokenizer(check_texts(texts), padding=True, truncation=True, return_tensors="pt")
        pooled = self._model.text_model(
            input_ids=tokens["input_ids"].to(self.device), attention_mask=tokens["attention_mask"].to(self.device)
        )
        return self._model.text_projection(pooled.pooler_output)

    def last_affine(self) -> AffineSite:
        head = self._model.audio_projection.linear2
        return AffineSite("projection", head.weight, head.bias)

    def save(self, path: str | os.PathLike) -> None:
        """A folder with config.json + model.safetensors, the tokenizer and preprocessor_config.json."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        with quiet_progress():
            self._model.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        self.feature_extractor.save_pretrained(path)
        write_marker(path, self)


def _check_fits(config: ClapConfig, extractor: ClapFeatureExtractor) -> None:
    """HTSAT folds a T x F log-mel into a spec_size^2 image: T <= spec_size * r and F <= spec_size / r, r = spec_size // F.

    Fused models need F = 64: transformers' extractor shrinks long clips to 64 mel bins for the fusion view.
    """
    audio = config.audio_config
    if audio.enable_fusion and audio.num_mel_bins != 64:
        raise PlatonicError(f"a fused CLAP model needs 64 mel bins (the extractor's fusion path assumes them), got {audio.num_mel_bins}")
    ratio = audio.spec_size // audio.num_mel_bins
    frames = extractor.nb_max_samples // extractor.hop_length + 1
    if ratio < 1 or frames > audio.spec_size * ratio:
        raise PlatonicError(
            f"a {extractor.max_length_s} s window at hop {extractor.hop_length} gives {frames} frames x "
            f"{audio.num_mel_bins} mel bins, which does not fold into HTSAT's {audio.spec_size}^2 input "
            f"(needs mel bins <= spec_size and frames <= spec_size * (spec_size // mel bins))"
        )


def _tiny_config(audio: dict[str, Any]) -> dict[str, Any]:
    return {"audio_config": deep_merge(_TINY_AUDIO, audio), "text_config": dict(_TINY_TEXT), "projection_dim": 32,
            "features": dict(_TINY_FEATURES)}


def _make_family(name: str, checkpoint: str, fused: bool, tiny: dict[str, Any], description: str) -> FamilySpec:
    """Register one CLAP family: the loaders below, specialised to its fusion mode and tiny config."""

    def from_config(config: dict[str, Any] | None = None, tokenizer: PreTrainedTokenizerBase | None = None,
                    seed: int = 0) -> ClapEncoder:
        """Random weights from `config` = {"audio_config", "text_config", "projection_dim", "features"},
        merged over the family's tiny config; the text tower is sized to the tokenizer's vocabulary."""
        cfg = deep_merge(tiny, config or {})
        tokenizer, text = text_config_for(tokenizer, cfg["text_config"])
        # RoBERTa positions start after the padding id: the context needs two extra rows.
        text["max_position_embeddings"] = max(text["max_position_embeddings"], context_length_of(tokenizer) + 2)
        fusion = {"enable_fusion": fused, "fusion_type": "aff_2d" if fused else None}
        clap_config = ClapConfig(text_config=text, audio_config={**cfg["audio_config"], **fusion},
                                 projection_dim=cfg["projection_dim"])
        extractor = _feature_extractor({**cfg["features"], "feature_size": clap_config.audio_config.num_mel_bins}, fused)
        _check_fits(clap_config, extractor)
        return ClapEncoder(seeded(seed, lambda: ClapModel(clap_config)), tokenizer, extractor, name)

    def load(checkpoint: str | os.PathLike, dtype: torch.dtype | None = None, device: str | None = None,
             amodel: str | None = None, tmodel: str | None = None, tokenizer: str | None = None) -> DualEncoder:
        """A saved folder (or, with hub access, a hub id) holding a ClapModel, its tokenizer and extractor;
        or an original laion_clap `.pt` file (options `amodel`, `tmodel`, `tokenizer`, for `.pt` files only:
        see adapters/_laion.py)."""
        if str(checkpoint).endswith(".pt"):
            from ._laion import load_laion_checkpoint

            return load_laion_checkpoint(str(checkpoint), family=name, fused=fused, device=device, amodel=amodel,
                                         tmodel=tmodel, tokenizer=tokenizer)
        if (amodel, tmodel, tokenizer) != (None, None, None):
            raise CheckpointError(f"amodel, tmodel and tokenizer describe an original laion_clap .pt file; {checkpoint} is not one")
        source, local = resolve_checkpoint(checkpoint)
        marker = read_marker(source) if local else {}
        check_family(marker, name, source)
        if "laion_clap" in marker:
            from ._laion import load_laion_folder

            return load_laion_folder(source, family=name, fused=fused, device=device)
        try:
            with quiet_progress():
                model = ClapModel.from_pretrained(source, dtype=dtype or torch.float32)
            features = ClapFeatureExtractor.from_pretrained(source).to_dict()
        except Exception as exc:  # transformers raises OSError, ValueError, ... for missing/corrupt files
            raise CheckpointError(f"cannot load a CLAP model from {source}: {exc}") from exc
        if bool(model.config.audio_config.enable_fusion) != fused:
            kind = "fused" if model.config.audio_config.enable_fusion else "unfused"
            raise CheckpointError(f"{source} holds a {kind} CLAP model, not a {name} one")
        tokenizer = load_tokenizer(source, model.config.text_config.vocab_size)
        keep = set(ClapFeatureExtractor.__init__.__code__.co_varnames) - {"self", "kwargs", "truncation"}
        extractor = _feature_extractor({k: v for k, v in features.items() if k in keep}, fused)
        encoder = ClapEncoder(model, tokenizer, extractor, name, checkpoint=source)
        return encoder.to(device) if device else encoder

    return register_family(FamilySpec(name, "audio", checkpoint, load, from_config, description))


for _name, _checkpoint, _fused, _audio, _description in (
    ("clap-htsat-unfused", "laion/clap-htsat-unfused", False, {},
     "LAION-CLAP HTSAT-tiny + RoBERTa, unfused (630k-audioset-best)"),
    ("clap-htsat-fused", "laion/clap-htsat-fused", True,
     {"spec_size": 64, "num_mel_bins": 64},  # the extractor's fusion path assumes 64 mel bins
     "LAION-CLAP HTSAT-tiny + RoBERTa with feature fusion for long clips"),
    ("clap-general", "laion/larger_clap_general", False,
     {"depths": [1, 2], "patch_embeds_hidden_size": 24, "hidden_size": 48, "num_attention_heads": [2, 4]},
     "LAION-CLAP HTSAT-base + RoBERTa trained on general audio, music and speech"),
    ("clap-music", "laion/larger_clap_music", False,
     {"depths": [2, 1], "patch_embeds_hidden_size": 16, "hidden_size": 32, "num_attention_heads": [2, 2]},
     "LAION-CLAP HTSAT-base + RoBERTa trained on music"),
):
    _make_family(_name, _checkpoint, _fused, _tiny_config(_audio), _description)
