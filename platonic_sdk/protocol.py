"""The one interface every model family implements: a dual encoder with a foldable last affine map.

The core (descriptors, transfer, evaluation) talks to models only through `DualEncoder` and
`AffineSite`; it never branches on a family or a modality.
"""

from __future__ import annotations

import abc
from typing import Any, Literal, Sequence

import attrs
import torch
from torch import Tensor, nn

from .errors import NotAffineError, ShapeError

SiteKind = Literal["projection", "residual_head"]


@attrs.define(eq=False)
class AffineSite:
    """The affine map that produces (or last adds into) the joint embedding z.

    Every edit is z -> z + alpha * A s, where s is the site input column:
    - ``projection``: s = z itself (A is d x d), folded as W_p <- (I + alpha A) W_p, b_p likewise;
    - ``residual_head``: s = [u; 1] with u the input of the head's last linear (A is d x (h + 1)),
      folded as W_2 += alpha A[:, :h], b_2 += alpha A[:, h].

    ``layout`` says how `weight` is stored: "out_in" (nn.Linear, z = W h) or "in_out" (z = h @ W).
    ``module`` is the nn.Module whose forward input is u (residual heads only).
    """

    kind: SiteKind
    weight: nn.Parameter
    bias: nn.Parameter | None = None
    layout: Literal["out_in", "in_out"] = "out_in"
    module: nn.Module | None = None

    def __attrs_post_init__(self) -> None:
        if self.kind not in ("projection", "residual_head"):
            raise NotAffineError(f"unknown affine site kind {self.kind!r}")
        if not isinstance(self.weight, torch.Tensor) or self.weight.ndim != 2:
            raise NotAffineError("the last-affine site needs a 2-D weight tensor")
        if self.kind == "residual_head" and (self.module is None or self.bias is None):
            raise NotAffineError("a residual-head site needs the head's last nn.Linear (with bias) as `module`")
        if self.bias is not None and self.bias.shape != (self.out_dim,):
            raise NotAffineError(f"bias of shape {tuple(self.bias.shape)} does not match output width {self.out_dim}")

    @property
    def out_dim(self) -> int:
        """Width d of the joint embedding that the site produces."""
        return self.weight.shape[0] if self.layout == "out_in" else self.weight.shape[1]

    @property
    def in_dim(self) -> int:
        """Width of the site input s (d for a projection, h + 1 for a residual head)."""
        if self.kind == "projection":
            return self.out_dim
        return (self.weight.shape[1] if self.layout == "out_in" else self.weight.shape[0]) + 1

    def tensors(self) -> dict[str, Tensor]:
        """The tensors an edit writes to (for snapshots and exact restores)."""
        out = {"weight": self.weight}
        if self.bias is not None:
            out["bias"] = self.bias
        return out

    def deltas(self, A: Tensor, alpha: float) -> dict[str, Tensor]:
        """Weight changes that realise z -> z + alpha A s, in the stored layout, computed in float64."""
        if A.shape != (self.out_dim, self.in_dim):
            raise ShapeError(
                f"operator of shape {tuple(A.shape)} does not fit this {self.kind} site "
                f"(needs {self.out_dim} x {self.in_dim})"
            )
        A64 = alpha * A.detach().to(device=self.weight.device, dtype=torch.float64)
        W64 = self.weight.detach().to(torch.float64)
        out: dict[str, Tensor] = {}
        if self.kind == "projection":
            out["weight"] = A64 @ W64 if self.layout == "out_in" else W64 @ A64.T
            if self.bias is not None:
                out["bias"] = A64 @ self.bias.detach().to(torch.float64)
        else:
            dW, db = A64[:, :-1], A64[:, -1]
            out["weight"] = dW if self.layout == "out_in" else dW.T
            out["bias"] = db
        return out

    @torch.no_grad()
    def fold(self, A: Tensor, alpha: float) -> None:
        """Write z -> z + alpha A s into the site's weights (in place)."""
        deltas = self.deltas(A, alpha)
        for name, tensor in self.tensors().items():
            tensor.copy_((tensor.detach().to(torch.float64) + deltas[name]).to(tensor.dtype))

    def site_inputs(self, encoder: "DualEncoder", batch: Any) -> tuple[Tensor, Tensor]:
        """One forward pass: (s, z), the site input rows and the unnormalised embeddings."""
        if self.kind == "projection":
            z = encoder.embed_media(batch)
            return z, z
        captured: list[Tensor] = []

        def grab(_module: nn.Module, args: tuple[Tensor, ...]) -> None:
            captured.append(args[0])

        handle = self.module.register_forward_pre_hook(grab)
        try:
            z = encoder.embed_media(batch)
        finally:
            handle.remove()
        if not captured:
            raise NotAffineError("the residual head's last linear was not called during the forward pass")
        u = captured[-1]
        u = u.reshape(z.shape[0], -1, u.shape[-1])[:, 0]  # attention-pool heads keep one probe token
        ones = torch.ones(u.shape[0], 1, dtype=u.dtype, device=u.device)
        return torch.cat([u, ones], dim=1), z


class DualEncoder(abc.ABC):
    """A media encoder f and a text encoder g ending in embeddings of width `embed_dim`.

    Adapters implement the abstract members; everything else in the SDK is written against them.
    """

    modality: str
    family: str
    checkpoint: str | None = None

    @property
    @abc.abstractmethod
    def embed_dim(self) -> int:
        """Width d of the joint embedding space."""

    @property
    @abc.abstractmethod
    def model(self) -> nn.Module:
        """The whole underlying model (media and text towers, temperatures)."""

    @property
    @abc.abstractmethod
    def media_encoder(self) -> nn.Module:
        """The media tower (the module the LoRA routes wrap)."""

    @property
    @abc.abstractmethod
    def lora_targets(self) -> list[str]:
        """Module-name suffixes of the media tower's attention query and value projections."""

    @abc.abstractmethod
    def preprocess(self, items: Sequence[Any]) -> Any:
        """Raw items (PIL images, or waveforms) to a model batch on this encoder's device."""

    @abc.abstractmethod
    def embed_media(self, batch: Any) -> Tensor:
        """Unnormalised media embeddings z (n x d)."""

    @abc.abstractmethod
    def embed_text(self, texts: Sequence[str]) -> Tensor:
        """Unnormalised text embeddings (n x d)."""

    @abc.abstractmethod
    def last_affine(self) -> AffineSite:
        """Handle on the affine map that produces the joint embedding."""

    @abc.abstractmethod
    def save(self, path: str) -> None:
        """Write a checkpoint folder that this family's loader reads back."""

    def encode_media(self, batch: Any) -> Tensor:
        """Unit-norm media embeddings f(x)."""
        return nn.functional.normalize(self.embed_media(batch), dim=-1)

    def encode_text(self, texts: Sequence[str]) -> Tensor:
        """Unit-norm text embeddings g(p)."""
        return nn.functional.normalize(self.embed_text(texts), dim=-1)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def to(self, device: str | torch.device) -> "DualEncoder":
        self.model.to(device)
        return self

    def eval(self) -> "DualEncoder":
        self.model.eval()
        return self

    def __repr__(self) -> str:
        return f"<{type(self).__name__} family={self.family} modality={self.modality} d={self.embed_dim}>"
