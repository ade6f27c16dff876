"""Resemblyzer's speaker encoder as a frozen audio trunk: our own forward pass on its shipped weights.

The `resemblyzer` package (Apache-2.0) ships `pretrained.pt`, a 3-layer LSTM trained for speaker
verification (GE2E). Its own code needs librosa and webrtcvad; this module needs neither: it reads the
weight file and runs the same network, checked against `resemblyzer.VoiceEncoder` in tests/test_audio_trunks.py.

    x (16 kHz mono, volume raised to -30 dBFS when quieter, zero-padded to 1.6 s)
      -> mel power spectrogram M (25 ms Hann window, 10 ms hop, 40 Slaney mel bands, as librosa's
         melspectrogram that resemblyzer calls), first 160 frames
      -> LSTM(40 -> 256, 3 layers): outputs o_t, final state h_T
      -> e = relu(W h_T + b) / |relu(W h_T + b)|           (resemblyzer's speaker embedding, 256)

Trunk features (the head's input): [e; mean_t o_t over the frames that hold the clip] (512): the speaker
embedding and the time-averaged last-layer state, which keeps more of what is said than e alone.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor, nn

from platonic_sdk.errors import CheckpointError

RATE = 16_000
WINDOW, HOP, BANDS = 400, 160, 40  # 25 ms, 10 ms, resemblyzer's hparams
PARTIAL_FRAMES = 160  # 1.6 s: resemblyzer's partial utterance
HIDDEN = 256
TARGET_DBFS = -30.0
INT16_MAX = 2**15 - 1
PACKAGE = "resemblyzer"
WEIGHTS = "pretrained.pt"


def weights_file(package: str = PACKAGE) -> Path:
    """The package's `pretrained.pt`, found without importing the package (its import needs librosa)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        raise CheckpointError(f"the speaker-encoder trunk's weights come from the {package} package: "
                              f"pip install --no-deps {package}==0.1.4 (see the README's set-up commands)")
    return Path(spec.origin).parent / WEIGHTS


def raise_volume(samples: Tensor) -> Tensor:
    """resemblyzer's normalize_volume(wav, -30, increase_only=True): a clip quieter than -30 dBFS (RMS, int16
    scale) is scaled up to it; a louder one is left alone."""
    rms = torch.sqrt(torch.mean((samples * INT16_MAX) ** 2, dim=-1, keepdim=True))
    change = TARGET_DBFS - 20 * torch.log10(rms.clamp(min=1e-12) / INT16_MAX)
    return torch.where(change > 0, samples * 10 ** (change / 20), samples)


class MelFrames(nn.Module):
    """Mel power spectrogram as librosa.feature.melspectrogram(y, sr=16000, n_fft=400, hop_length=160, n_mels=40)
    computes it: centred frames zero-padded at the ends, periodic Hann window, |STFT|^2, Slaney mel filters."""

    def __init__(self) -> None:
        super().__init__()
        import torchaudio

        self.mel = torchaudio.transforms.MelSpectrogram(
            sample_rate=RATE, n_fft=WINDOW, hop_length=HOP, n_mels=BANDS, power=2.0, center=True, pad_mode="constant",
            norm="slaney", mel_scale="slaney", f_min=0.0, f_max=RATE / 2)

    def forward(self, samples: Tensor) -> Tensor:
        """(n, samples) -> (n, frames, 40)."""
        return self.mel(samples).transpose(1, 2)


class SpeakerLSTM(nn.Module):
    """The network of resemblyzer's VoiceEncoder (its `lstm` and `linear` under the same names)."""

    def __init__(self, hidden: int = HIDDEN, layers: int = 3, bands: int = BANDS) -> None:
        super().__init__()
        self.lstm = nn.LSTM(bands, hidden, layers, batch_first=True)
        self.linear = nn.Linear(hidden, hidden)

    def forward(self, mels: Tensor) -> tuple[Tensor, Tensor]:
        """(n, frames, 40) -> (speaker embedding e (n, 256), last-layer outputs o (n, frames, 256))."""
        out, (h, _) = self.lstm(mels)
        e = torch.relu(self.linear(h[-1]))
        return e / torch.norm(e, dim=1, keepdim=True), out


class VoiceTrunk(nn.Module):
    """Clip -> [speaker embedding; mean last-layer state] (2 x hidden). `weights`: "package" (resemblyzer's
    pretrained.pt) or "random" (seeded, for tests; `hidden` and `layers` then size it)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__()
        self.config = dict(config)
        weights = self.config.get("weights", "package")
        hidden = int(self.config.get("hidden", HIDDEN)) if weights == "random" else HIDDEN
        self.front = MelFrames()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.config.get("seed", 0)))
            self.net = SpeakerLSTM(hidden, int(self.config.get("layers", 3)) if weights == "random" else 3)
        if weights == "package":
            state = torch.load(weights_file(), map_location="cpu", weights_only=True)["model_state"]
            state = {k: v for k, v in state.items() if not k.startswith("similarity_")}  # GE2E's loss scale, not the network
            missing, unexpected = self.net.load_state_dict(state, strict=False)
            if missing or unexpected:
                raise CheckpointError(f"{WEIGHTS} does not fit the speaker LSTM: missing {missing}, unexpected {unexpected}")
        elif weights != "random":
            raise CheckpointError(f"unknown voice trunk weights {weights!r} (use 'package' or 'random')")
        self.requires_grad_(False)
        self.eval()

    @property
    def width(self) -> int:
        return 2 * self.net.linear.out_features

    def mels(self, samples: Tensor) -> Tensor:
        """The encoder's input for clips of up to 1.6 s (n, samples at 16 kHz): volume raised, zero-padded to 1.6 s
        as resemblyzer's embed_utterance pads a short utterance, its first 160 mel frames."""
        span = PARTIAL_FRAMES * HOP
        x = raise_volume(samples)[:, :span]
        x = nn.functional.pad(x, (0, span - x.shape[1]))
        return self.front(x)[:, :PARTIAL_FRAMES]

    def forward(self, samples: Tensor, lengths: Tensor | None = None) -> Tensor:
        """(n, samples) 16 kHz clips (`lengths`: each clip's samples before padding) -> (n, 2 x hidden)."""
        e, out = self.net(self.mels(samples))
        n = samples.shape[1] if lengths is None else lengths
        frames = torch.clamp(torch.as_tensor(n) // HOP + 1, 1, PARTIAL_FRAMES).reshape(-1, 1)
        mask = (torch.arange(out.shape[1]).reshape(1, -1) < frames).to(out.dtype).unsqueeze(-1)
        return torch.cat([e, (out * mask).sum(1) / mask.sum(1)], dim=1)


def clip_lengths(clips: list[np.ndarray]) -> Tensor:
    return torch.tensor([len(c) for c in clips])
