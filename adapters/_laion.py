"""The original LAION-CLAP `.pt` checkpoints, built with the laion_clap package's own module classes.

laion_clap is the optional extra `laion` (it pins numpy<2: install it in a separate environment).
Its CLAP ends in z = W_2 relu(W_1 h + b_1) + b_2 = `audio_projection[2]` (a projection site, with
bias); its HTSAT computes the log-mel itself from a 10 s, 48 kHz window (fused models also take the
four-view `mel_fusion` input). Its Swin blocks fuse q, k and v into one linear (`attn.qkv`), which the
LoRA routes wrap whole. Folders written by `save` hold safetensors weights and the build options.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import safetensors.torch
import torch
from torch import Tensor, nn

from platonic_sdk.data.audio import InputFormat
from platonic_sdk.errors import CheckpointError, PlatonicError
from platonic_sdk.protocol.encoder import AffineSite, DualEncoder

from ._hf import read_marker, write_marker
from ._text import check_texts, load_tokenizer

# Audio tower of each family's reference checkpoint (HTSAT-tiny: 630k-audioset; HTSAT-base: the larger ones).
AUDIO_MODELS = {"clap-htsat-unfused": "HTSAT-tiny", "clap-htsat-fused": "HTSAT-tiny",
                "clap-general": "HTSAT-base", "clap-music": "HTSAT-base"}
WEIGHTS = "laion_clap.safetensors"
CROP_SEED = 0


def _laion() -> Any:
    try:
        import laion_clap  # noqa: F401
        from laion_clap import clap_module
        from laion_clap.training import data
    except ImportError as exc:
        raise CheckpointError(
            "a laion_clap checkpoint needs the optional laion_clap package: pip install 'platonic-sdk[laion]' "
            f"(it pins numpy<2, so use a separate environment) [{exc}]"
        ) from None
    return clap_module, data


class LaionClapEncoder(DualEncoder):
    """A laion_clap CLAP model (HTSAT audio tower; transformer, RoBERTa, BERT or BART text tower)."""

    modality = "audio"

    def __init__(self, model: nn.Module, options: dict[str, Any], tokenizer: Any, family: str,
                 checkpoint: str | None = None) -> None:
        self._model = model.eval()
        self.options = dict(options)  # amodel, tmodel, fused: what create_model needs to rebuild it
        self.tokenizer = tokenizer  # None: laion_clap's bundled BPE (transformer text towers)
        self.family = family
        self.checkpoint = checkpoint
        cfg = self.audio_cfg
        self.input_format = InputFormat(int(cfg["sample_rate"]), int(cfg["clip_samples"]), crop=not self.options["fused"])

    @property
    def embed_dim(self) -> int:
        return int(self._model.audio_projection[2].out_features)

    @property
    def model(self) -> nn.Module:
        return self._model

    @property
    def media_encoder(self) -> nn.Module:
        return self._model.audio_branch

    @property
    def lora_targets(self) -> list[str]:
        return ["attn.qkv"]

    @property
    def logit_scale(self) -> float:
        """The audio-to-text logit scale, exp of laion_clap's stored `logit_scale_a` (one per direction)."""
        return float(self._model.logit_scale_a.detach().exp())

    @property
    def audio_cfg(self) -> dict[str, Any]:
        """laion_clap's audio settings (sample_rate, clip_samples, hop_size, mel_bins, ...)."""
        return dict(vars(self._model.audio_cfg))

    @property
    def sample_rate(self) -> int:
        return int(self.audio_cfg["sample_rate"])

    def preprocess(self, items: Sequence[Any]) -> dict[str, Tensor]:
        """Mono at the model's rate (48 kHz), cropped to its window unless fused (`input_format`), int16-quantised
        as laion_clap does, then its own repeat-padding (and fusion views)."""
        if len(items) == 0:
            raise PlatonicError("no audio items to preprocess")
        _, data = _laion()
        cfg = self.audio_cfg
        states = (random.getstate(), np.random.get_state())
        random.seed(CROP_SEED)
        np.random.seed(CROP_SEED)
        try:
            samples = []
            for item in items:
                wave = self.input_format.fit(item)
                wave = (np.clip(wave, -1, 1) * 32767.0).astype(np.int16).astype(np.float32) / 32767.0
                samples.append(data.get_audio_features({}, torch.from_numpy(wave), cfg["clip_samples"],
                                                       "fusion" if self.options["fused"] else "rand_trunc",
                                                       "repeatpad", cfg))
        finally:
            random.setstate(states[0])
            np.random.set_state(states[1])
        return {k: torch.stack([s[k] for s in samples]).to(self.device) for k in samples[0]}

    def embed_media(self, batch: dict[str, Tensor]) -> Tensor:
        return self._model.audio_projection(self._model.encode_audio(batch, device=self.device)["embedding"])

    def embed_text(self, texts: Sequence[str]) -> Tensor:
        texts = check_texts(texts)
        if self.tokenizer is None:
            clap_module, _ = _laion()
            tokens: Any = clap_module.tokenize(texts)
        else:
            tokens = dict(self.tokenizer(texts, padding="max_length", truncation=True, max_length=77, return_tensors="pt"))
        return self._model.encode_text(tokens, device=self.device)

    def last_affine(self) -> AffineSite:
        head = self._model.audio_projection[2]
        return AffineSite("projection", head.weight, head.bias)

    def save(self, path: str | os.PathLike) -> None:
        """A folder: safetensors weights, the build options in platonic.json, and the tokenizer if any."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().contiguous().cpu() for k, v in self._model.state_dict().items()}
        safetensors.torch.save_file(state, str(path / WEIGHTS))
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(path)
        write_marker(path, self, laion_clap=self.options)


def _build(options: dict[str, Any], state: dict[str, Tensor], where: str, device: str | None) -> nn.Module:
    clap_module, _ = _laion()
    try:
        model, _ = clap_module.create_model(options["amodel"], options["tmodel"], precision="fp32", device="cpu",
                                            enable_fusion=options["fused"], fusion_type="aff_2d")
    except Exception as exc:  # RoBERTa/BERT/BART text towers fetch their configs from the hub
        raise CheckpointError(f"laion_clap cannot build {options['amodel']} + {options['tmodel']} here: {exc}") from exc
    # The released files were saved with transformers < 4.31, whose text towers kept `embeddings.position_ids`
    # as a saved buffer; laion_clap's own loader deletes it (clap_module.factory.load_state_dict), so do we.
    keys = model.state_dict().keys()
    state = {k: v for k, v in state.items() if k in keys or not k.endswith("embeddings.position_ids")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing or unexpected:
        raise CheckpointError(f"{where} does not fit laion_clap {options}: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model.to(device) if device else model


def _text_tower(state: dict[str, Tensor]) -> str:
    """'transformer' (CLIP-like, bundled BPE) when the weights hold a token embedding, else RoBERTa (the released ones)."""
    return "transformer" if "token_embedding.weight" in state else "roberta"


def load_laion_checkpoint(path: str, family: str, fused: bool, device: str | None = None, amodel: str | None = None,
                          tmodel: str | None = None, tokenizer: str | None = None) -> LaionClapEncoder:
    """A laion_clap `.pt` checkpoint ({"state_dict": ...} or a bare state dict; read with weights_only=True).

    `amodel` defaults to the family's HTSAT size; `tmodel` is read off the weights; RoBERTa/BERT/BART
    towers need their tokenizer (`tokenizer`: a folder or hub id, default "roberta-base").
    """
    if not os.path.isfile(path):
        raise CheckpointError(f"no laion_clap checkpoint at {path}")
    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickles with code, truncated files
        raise CheckpointError(f"{path} is not a plain laion_clap state dict: {exc}") from exc
    state = raw.get("state_dict", raw) if isinstance(raw, dict) else None
    if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
        raise CheckpointError(f"{path} holds no state dict of tensors")
    state = {k.removeprefix("module."): v for k, v in state.items()}
    options = {"amodel": amodel or AUDIO_MODELS[family], "tmodel": tmodel or _text_tower(state), "fused": fused}
    return _finish(options, state, path, family, tokenizer, device)


def load_laion_folder(folder: str, family: str, fused: bool, device: str | None = None) -> LaionClapEncoder:
    """A folder written by `LaionClapEncoder.save`."""
    options = read_marker(folder)["laion_clap"]
    if bool(options["fused"]) != fused:
        raise CheckpointError(f"{folder} holds a {'fused' if options['fused'] else 'unfused'} laion_clap model, not a {family} one")
    state = safetensors.torch.load_file(str(Path(folder) / WEIGHTS))
    has_tokenizer = (Path(folder) / "tokenizer_config.json").is_file()
    return _finish(options, state, folder, family, folder if has_tokenizer else None, device)


def _finish(options: dict[str, Any], state: dict[str, Tensor], where: str, family: str, tokenizer: str | None,
            device: str | None) -> LaionClapEncoder:
    model = _build(options, state, where, device)
    tok = None
    if options["tmodel"] != "transformer":
        tok = load_tokenizer(tokenizer or "roberta-base", model.text_branch.config.vocab_size)
    return LaionClapEncoder(model, options, tok, family, checkpoint=str(where))

