"""A tiny real dual encoder for the speed tests: a small conv tower, a byte-bag text tower, either site kind.

The image tower ends in a projection (z = W_p h) or in a residual head (z = W h + fc2(gelu(fc1(h))));
the text tower embeds bytes with an EmbeddingBag and a linear map. Random weights from a seed.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from platonic_sdk.io import save_tensors
from platonic_sdk.protocol.encoder import AffineSite, DualEncoder
from platonic_sdk.tasks import Split, Task


class _Media(nn.Module):
    def __init__(self, hidden: int, dim: int, head: str):
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2), nn.GELU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(32, hidden), nn.GELU()
        )
        self.head = head
        self.proj = nn.Linear(hidden, dim, bias=False)
        if head == "residual_head":
            self.fc1 = nn.Linear(hidden, 2 * hidden)
            self.fc2 = nn.Linear(2 * hidden, dim)

    def forward(self, x: Tensor) -> Tensor:
        h = self.trunk(x)
        z = self.proj(h)
        return z + self.fc2(nn.functional.gelu(self.fc1(h))) if self.head == "residual_head" else z


class _Model(nn.Module):
    def __init__(self, hidden: int, dim: int, head: str):
        super().__init__()
        self.media = _Media(hidden, dim, head)
        self.text = nn.EmbeddingBag(256, 2 * dim)
        self.text_proj = nn.Linear(2 * dim, dim)


class TinyEncoder(DualEncoder):
    """family "tiny": 16 x 16 uint8 RGB arrays and short strings, embedding width `dim`."""

    modality = "image"
    family = "tiny"

    def __init__(self, dim: int = 12, hidden: int = 20, head: str = "projection", seed: int = 0):
        torch.manual_seed(seed)
        self._model = _Model(hidden, dim, head).eval()
        self._dim = dim

    @property
    def logit_scale(self) -> float:
        """A CLIP-like temperature (the prediction-space descriptors read it)."""
        return 100.0

    @property
    def embed_dim(self) -> int:
        return self._dim

    @property
    def model(self) -> nn.Module:
        return self._model

    @property
    def media_encoder(self) -> nn.Module:
        return self._model.media

    @property
    def lora_targets(self) -> list[str]:
        return ["trunk.4"]

    def preprocess(self, items: Sequence[Any]) -> Tensor:
        batch = torch.as_tensor(np.stack([np.asarray(i) for i in items])).permute(0, 3, 1, 2)
        return (batch.to(device=self.device, dtype=torch.float32) / 127.5 - 1.0).to(self.dtype)

    def embed_media(self, batch: Tensor) -> Tensor:
        return self._model.media(batch)

    def embed_text(self, texts: Sequence[str]) -> Tensor:
        ids = [torch.tensor(list(t.encode()), dtype=torch.long) for t in texts]
        offsets = torch.tensor([0] + [len(i) for i in ids[:-1]]).cumsum(0)
        bag = self._model.text(torch.cat(ids).to(self.device), offsets.to(self.device))
        return self._model.text_proj(bag)

    def last_affine(self) -> AffineSite:
        media = self._model.media
        if media.head == "residual_head":
            return AffineSite("residual_head", media.fc2.weight, media.fc2.bias, module=media.fc2)
        return AffineSite("projection", media.proj.weight)

    def save(self, path: str) -> None:
        save_tensors(path, self._model.state_dict(), "tiny_encoder", {"dim": self._dim})


def tiny_task(n_train: int = 48, n_test: int = 40, classes: int = 4, seed: int = 0) -> Task:
    """Random 16 x 16 images whose class shifts the colour mean, so a tower can tell classes apart."""
    rng = np.random.default_rng(seed)

    def split(n: int) -> Split:
        labels = rng.integers(0, classes, n)
        images = [np.clip(rng.normal(60 * c, 40, (16, 16, 3)), 0, 255).astype(np.uint8) for c in labels]
        return Split(images, labels)

    names = ["red", "green", "blue", "grey", "pink", "teal"][:classes]
    return Task("tiny", names, split(n_train), split(n_test), ("a photo of {}.", "a {} picture."))
