"""The one interface every model family implements: a dual encoder with a foldable last affine map.

The core (descriptors, transfer, evaluation) talks to models only through `DualEncoder` and
`AffineSite`; it never branches on a family or a modality.
"""

from __future__ import annotations

import abc
import json
import os
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

import attrs
import torch
from torch import Tensor, nn

from ..errors import CheckpointError, NonFiniteError, NotAffineError, ShapeError, check_finite
from ..io import MARKER
from . import stack

SiteKind = Literal["projection", "residual_head"]
CLIP_LOGIT_SCALE = 1 / 0.07  # CLIP's initial logit scale (its temperature 0.07), learned from there in pretraining
MAX_LOGIT_SCALE = 100.0  # CLIP's cap on the learned scale


def read_marker(folder: str | os.PathLike) -> dict[str, Any]:
    """The SDK's `platonic.json` of a folder ({} when the folder was not written by this SDK)."""
    path = Path(folder) / MARKER
    if not path.is_file():
        return {}
    try:
        marker = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"corrupt {path}: {exc}") from exc
    if not isinstance(marker, dict) or not isinstance(marker.get("folded_edits", []), list):
        raise CheckpointError(f"corrupt {path}: not a JSON object with a list of folded edits")
    return marker


@attrs.define(eq=False)
class AffineSite:
    """The affine map that produces (or last adds into) the joint embedding z.

    Every edit is z -> z + c A s at strength c, where s is the site input column:
    - ``projection``: s = z itself (A is d x d), folded as W_p <- (I + c A) W_p, b_p likewise;
    - ``residual_head``: s = [u; 1] with u the input of the head's last linear (A is d x (h + 1)),
      folded as W_2 += c A[:, :h], b_2 += c A[:, h].

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

    def check_operator(self, A: Tensor) -> None:
        """Raise ShapeError unless A (d x q) fits this site."""
        if tuple(A.shape) != (self.out_dim, self.in_dim):
            raise ShapeError(
                f"operator of shape {tuple(A.shape)} does not fit this {self.kind} site "
                f"(needs {self.out_dim} x {self.in_dim})"
            )

    def folded(self, A: Tensor, strength: float) -> Callable[[dict[str, Tensor]], dict[str, Tensor]]:
        """The pure update of this site's tensors for z -> z + strength A s (what an edit stack replays)."""
        self.check_operator(A)
        kind, layout = self.kind, self.layout

        def update(values: dict[str, Tensor]) -> dict[str, Tensor]:
            deltas = fold_deltas(kind, layout, A, strength, values)
            return {n: (v.to(torch.float64) + deltas[n]).to(v.dtype) for n, v in values.items()}

        return update

    @torch.no_grad()
    def fold(self, A: Tensor, strength: float) -> None:
        """Write z -> z + strength A s into the site's weights (in place)."""
        tensors = self.tensors()
        for name, value in self.folded(A, strength)({n: t.detach() for n, t in tensors.items()}).items():
            tensors[name].copy_(value)

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


def fold_deltas(kind: SiteKind, layout: str, A: Tensor, strength: float, values: dict[str, Tensor]) -> dict[str, Tensor]:
    """Float64 changes of a site's `values` ("weight", "bias") for z -> z + c A s, c = `strength`.

    projection: dW = c A W (out_in) or W (c A)^T (in_out), db = c A b;
    residual head: dW = c A[:, :h] (transposed for in_out), db = c A[:, h].
    """
    weight = values["weight"]
    A64 = strength * A.detach().to(device=weight.device, dtype=torch.float64)
    if kind == "projection":
        W64 = weight.detach().to(torch.float64)
        out = {"weight": A64 @ W64 if layout == "out_in" else W64 @ A64.T}
        if "bias" in values:
            out["bias"] = A64 @ values["bias"].detach().to(torch.float64)
        return out
    dW = A64[:, :-1]
    return {"weight": dW if layout == "out_in" else dW.T, "bias": A64[:, -1]}


class DualEncoder(abc.ABC):
    """A media encoder f and a text encoder g ending in embeddings of width `embed_dim`.

    Adapters implement the abstract members; everything else in the SDK is written against them.
    """

    modality: str
    family: str
    checkpoint: str | None = None
    # edits folded into the checkpoint this encoder was loaded from (its platonic.json), oldest first
    folded_edits: tuple[dict[str, Any], ...] = ()

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
        """Raw items (PIL images, or waveforms) to a model batch on this encoder's device: tensors (or
        mappings / tuples of them) whose first dimension is the item, each item's rows made from that item
        alone (`accel.cat_batches` / `batch_rows` join and index batches; the LoRA route preprocesses once)."""

    @property
    def preprocessing_signature(self) -> str | None:
        """What `preprocess` depends on, for the on-disk feature cache's keys, where that is a fixed function named
        by its settings (a frozen trunk's architecture and weights): a set is then keyed by this string instead of
        the bytes of two preprocessed items, which a network's last bits make depend on batch size and thread count.
        None (the default): the bytes."""
        return None

    @abc.abstractmethod
    def embed_media(self, batch: Any) -> Tensor:
        """Unnormalised media embeddings z (n x d)."""

    @abc.abstractmethod
    def embed_text(self, texts: Sequence[str]) -> Tensor:
        """Unnormalised text embeddings (n x d)."""

    @property
    def logit_scale(self) -> float:
        """The scale s of the zero-shot logits s <f, g>: the softmax temperature over a grid's prompts in the
        descriptor spaces that read probabilities (spaces whose `needs_logit_scale` is set: `blend`,
        `probability`, `confidence`). Default: exp of the model's scalar `logit_scale` parameter where it has one (CLIP's
        convention: the log is stored), capped at `MAX_LOGIT_SCALE` as CLIP's training caps it; else CLIP's
        initial 1/0.07 (`CLIP_LOGIT_SCALE`), the scale a contrastive model starts from. Override it where the
        model keeps its scale elsewhere (CLAP: one per direction), or was trained at another fixed scale."""
        stored = getattr(self.model, "logit_scale", None)
        if isinstance(stored, Tensor) and stored.numel() == 1:
            return float(stored.detach().float().exp().clamp(max=MAX_LOGIT_SCALE))
        return CLIP_LOGIT_SCALE

    @abc.abstractmethod
    def last_affine(self) -> AffineSite:
        """Handle on the affine map that produces the joint embedding."""

    @abc.abstractmethod
    def save(self, path: str) -> None:
        """Write a checkpoint folder that this family's loader reads back."""

    def edit_record(self) -> list[dict[str, Any]]:
        """What a checkpoint saved now has folded in: the loaded checkpoint's edits, then the applied ones."""
        return [*self.folded_edits, *(handle.record() for handle in stack.applied(self.model))]

    def check_finite(self) -> None:
        """Raise NonFiniteError naming the first parameter with NaN/inf, or buffer with NaN (masks may hold -inf)."""
        for name, t in self.model.named_parameters():
            check_finite(t.detach(), f"{self.family} weight {name!r}")
        for name, t in self.model.named_buffers():
            if t.is_floating_point() and bool(t.isnan().any()):
                raise NonFiniteError(f"{self.family} buffer {name!r} contains NaN")

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
