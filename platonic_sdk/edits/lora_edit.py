"""LoRA edits: LoRA factors per module of a target's media tower, folded into its weights as
W <- W + strength * (lora_alpha / r) B A on apply and restored bit for bit on remove; also read and written
as peft adapter folders (`peft_files.py`), so that `peft.PeftModel.from_pretrained` loads them on the
native model.
"""

from __future__ import annotations

import numbers
import os
from typing import TYPE_CHECKING, Any, Sequence

from torch import Tensor

from ..errors import CheckpointError, PlatonicError, ShapeError, check_finite, check_real, check_strength
from ..protocol.binding import Target
from ..protocol.encoder import DualEncoder
from ..protocol.stack import Update
from .edit import Edit

if TYPE_CHECKING:  # peft_files imports peft (seconds): loaded when an adapter folder is read or written
    from peft import PeftModel

    from .peft_files import Adapter


class LoraEdit(Edit):
    """LoRA factors (A: r x in, B: out x r) per module of the media tower, applied as a merged weight delta."""

    kind = "lora_edit"

    def __init__(
        self,
        factors: dict[str, tuple[Tensor, Tensor]],
        rank: int,
        lora_alpha: float,
        strength: float = 1.0,
        meta: dict[str, Any] | None = None,
        losses: Sequence[float] = (),
        target: Target | None = None,
    ):
        super().__init__(target)
        if not factors:
            raise PlatonicError("a LoRA edit needs at least one adapted module")
        for name, (A, B) in factors.items():
            check_real(A, f"LoRA A of {name!r}")
            check_real(B, f"LoRA B of {name!r}")
            if A.ndim != 2 or B.ndim != 2 or A.shape[0] != B.shape[1]:
                raise ShapeError(f"LoRA factors of {name!r} do not chain: A {tuple(A.shape)}, B {tuple(B.shape)}")
            check_finite(A, f"LoRA A of {name!r}")
            check_finite(B, f"LoRA B of {name!r}")
        self.factors = {n: (A.detach().cpu(), B.detach().cpu()) for n, (A, B) in factors.items()}
        if isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 1:
            raise PlatonicError(f"a LoRA rank is a positive integer, got {rank!r}")
        self.rank = int(rank)
        self.lora_alpha = check_strength(lora_alpha, "lora_alpha")
        self.strength = check_strength(strength, "strength")
        self.meta = dict(meta or {})
        self.losses = tuple(float(v) for v in losses)

    def scaled(self, strength: float) -> "LoraEdit":
        """The same factors at another strength (the delta scales linearly)."""
        return LoraEdit(self.factors, self.rank, self.lora_alpha, strength, self.meta, self.losses, self.target)

    def deltas(self) -> dict[str, Tensor]:
        """Weight change per module: strength * (lora_alpha / r) B A, in float64."""
        scale = self.strength * self.lora_alpha / self.rank
        return {n: scale * (B.double() @ A.double()) for n, (A, B) in self.factors.items()}

    def _weights(self, encoder: DualEncoder) -> dict[str, Tensor]:
        """The `weight` of each adapted module in the encoder's media tower, checked against the factors."""
        tower = encoder.media_encoder
        out = {}
        for name, (A, B) in self.factors.items():
            try:
                weight = tower.get_submodule(name).weight
            except AttributeError:
                raise PlatonicError(f"{encoder.family}: the media tower has no module {name!r} with a weight") from None
            if tuple(weight.shape) != (B.shape[0], A.shape[1]):
                raise ShapeError(f"{name!r}: weight {tuple(weight.shape)} does not match the LoRA product {(B.shape[0], A.shape[1])}")
            out[name] = weight
        return out

    def _plan(self, encoder: DualEncoder) -> tuple[dict[str, Tensor], Update]:
        weights = self._weights(encoder)
        deltas = self.deltas()

        def update(values: dict[str, Tensor]) -> dict[str, Tensor]:
            return {n: (w.double() + deltas[n].to(w.device)).to(w.dtype) for n, w in values.items()}

        return weights, update

    def tensors(self) -> dict[str, Tensor]:
        out = {}
        for n, (A, B) in self.factors.items():
            out[f"{n}.lora_A"] = A
            out[f"{n}.lora_B"] = B
        return out

    def metadata(self) -> dict[str, Any]:
        return {"rank": self.rank, "lora_alpha": self.lora_alpha, "strength": self.strength, "info": self.meta, "losses": list(self.losses)}

    @classmethod
    def from_file(cls, tensors: dict[str, Tensor], meta: dict[str, Any]) -> "LoraEdit":
        names = sorted({k.rsplit(".", 1)[0] for k in tensors})
        missing = [n for n in names if f"{n}.lora_A" not in tensors or f"{n}.lora_B" not in tensors]
        if missing or "rank" not in meta or "lora_alpha" not in meta:
            raise PlatonicError(f"LoRA edit file is incomplete (factors missing for {missing[:3]}, or no rank/lora_alpha)")
        factors = {n: (tensors[f"{n}.lora_A"], tensors[f"{n}.lora_B"]) for n in names}
        return cls(factors, meta["rank"], meta["lora_alpha"], meta.get("strength", 1.0), meta.get("info"), meta.get("losses", ()))

    def save_pretrained(self, folder: str | os.PathLike, encoder: DualEncoder | None = None) -> None:
        """Write a peft LoRA folder for the native model: `PeftModel.from_pretrained(native_model, folder)` then
        computes this edit (full module names: the media tower's path in the model + the factor's name;
        lora_alpha = strength * alpha, so peft's (lora_alpha / r) B A is the delta that `apply` folds in).

        `encoder` gives the tower's path and the base checkpoint; without it, the encoder the edit was fitted
        on (recorded by `fit_lora`). For open_clip families, whose native attention is a fused in_proj, the
        portable form is the edited checkpoint instead (the SDK splits q/k/v to adapt them).
        """
        from .peft_files import Adapter, write_adapter

        if encoder is not None:
            self._weights(encoder)  # the factors fit this encoder
            prefix, family, checkpoint = media_prefix(encoder), encoder.family, encoder.checkpoint
        elif "media_prefix" in self.meta:
            prefix, family, checkpoint = self.meta["media_prefix"], self.meta.get("target_family"), self.meta.get("target_checkpoint")
        else:
            raise PlatonicError("this LoRA edit does not record the encoder it was fitted on; pass encoder= to save_pretrained")
        if checkpoint and os.path.isdir(checkpoint):  # a local folder: recorded so that any working directory finds it
            checkpoint = os.path.abspath(checkpoint)
        record = {"kind": self.kind, "family": family, "media_prefix": prefix, **self.metadata()}
        factors = {_full_name(prefix, n): f for n, f in self.factors.items()}
        write_adapter(folder, Adapter(factors, self.rank, self.strength * self.lora_alpha, checkpoint, record))

    @classmethod
    def from_pretrained(
        cls, source: str | os.PathLike | PeftModel, encoder: DualEncoder | None = None, *, allow_other_base: bool = False
    ) -> "LoraEdit":
        """A LoRA edit from a peft adapter (a folder written here or by peft, or a live PeftModel) on `encoder`.

        Refused, with nothing changed: an adapter for another family or base checkpoint (`allow_other_base`
        accepts a base recorded under another name, e.g. a hub id whose local copy `encoder` was loaded
        from), or one that adapts modules outside the media tower or absent from it, or of other shapes.
        `encoder` may be left out for folders that `save_pretrained` wrote (they record the tower's path).
        """
        from peft import PeftModel

        from .peft_files import adapter_of, read_adapter

        adapter = adapter_of(source) if isinstance(source, PeftModel) else read_adapter(source)
        where = type(source).__name__ if isinstance(source, PeftModel) else str(source)
        record = adapter.record
        if encoder is not None:
            _check_base(adapter, encoder, where, allow_other_base)
            prefix = media_prefix(encoder)
        elif "media_prefix" in record:
            prefix = record["media_prefix"]
        else:
            raise PlatonicError(f"{where}: pass the encoder the adapter was trained on (encoder=), to find its media tower")
        outside = [n for n in adapter.factors if not _within(prefix, n)]
        if outside:
            raise PlatonicError(
                f"{where} adapts {len(outside)} module(s) outside the media tower {prefix!r} (e.g. {outside[:2]}); "
                "a LoRA edit changes the media tower only"
            )
        factors = {n[len(prefix) + 1 :] if prefix else n: f for n, f in adapter.factors.items()}
        lora_alpha, strength = adapter.lora_alpha, 1.0
        if "strength" in record and record["strength"] * record["lora_alpha"] == lora_alpha:  # written by save_pretrained
            lora_alpha, strength = record["lora_alpha"], record["strength"]
        meta = record.get("info") or {
            "target_family": encoder.family if encoder else None,
            "target_checkpoint": encoder.checkpoint if encoder else adapter.base_model,
            "source": "peft adapter", "adapter": where,
        }
        edit = cls(factors, adapter.rank, lora_alpha, strength, {**meta, "media_prefix": prefix}, record.get("losses", ()))
        if encoder is not None:
            edit._weights(encoder)  # every module exists in the media tower with the factors' shape
        return edit

    def __repr__(self) -> str:
        return f"LoraEdit({len(self.factors)} modules, rank={self.rank}, strength={self.strength}, applied={self.applied})"


def media_prefix(encoder: DualEncoder) -> str:
    """The media tower's module path inside `encoder.model` ("" when the tower is the whole model)."""
    for name, module in encoder.model.named_modules():
        if module is encoder.media_encoder:
            return name
    raise PlatonicError(f"{encoder.family}: the media tower is not a submodule of the model")


def _full_name(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _within(prefix: str, name: str) -> bool:
    return not prefix or name.startswith(prefix + ".")


def _same_checkpoint(a: str, b: str) -> bool:
    """One name, or two paths of one folder."""
    return a == b or (os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b))


def _check_base(adapter: Adapter, encoder: DualEncoder, where: str, allow_other_base: bool) -> None:
    """Refuse an adapter recorded for another family, or (unless allowed) another base checkpoint."""
    family = adapter.record.get("family")
    if family is not None and family != encoder.family:
        raise PlatonicError(f"{where} is an adapter of a {family!r} model, not of {encoder.family!r}")
    base, own = adapter.base_model, encoder.checkpoint
    if base and own and not allow_other_base and not _same_checkpoint(base, own):
        raise CheckpointError(
            f"{where} is an adapter of {base!r}, but the encoder was loaded from {own!r}; if that is a copy of "
            "the same weights, pass allow_other_base=True (CLI: --allow-other-base)"
        )
