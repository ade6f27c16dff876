"""LoRA route (METHOD sec. 5): fit LoRA on the target's media tower so its UTDs match a composition.

With f_E the edited target, f_pre the unedited one and landmarks g from the frozen text tower,

    L(E) = mean over probes x of (1 / M_x) sum_j (<f_E(x), g_j> - <f_pre(x), g_j> - c U[x, j])^2

where each probe belongs to one term's grid (M_x prompts; c U is that grid's summed target). With
`ridge_b` > 0 each probe also pays (mu_b / M_x) ||f_E(x) - f_pre(x)||^2, mu_b = ridge_b * mean(sigma(G)^2):
the closed form's landmark ridge (its mu_b ||F X||^2 term) carried over, so both routes shrink the same
poorly separated landmark directions (off by default, as in the paper). LoRA B starts at zero, so step 0
is the unedited model. The result is a `LoraEdit`: the LoRA factors, folded
into the weights as W <- W + strength * (alpha / r) B A on apply and restored bit for bit on remove.
"""

from __future__ import annotations

import copy
import numbers
import os
from typing import Any, Sequence

import attrs
import torch
from peft import PeftModel
from peft.tuners.lora import LoraLayer
from torch import Tensor, nn

from ..accel import autocast
from ..descriptor import UTD, Composition
from ..binding import Target
from ..errors import CheckpointError, GridMismatchError, PlatonicError, ShapeError, check_finite, check_real, check_strength
from ..features import encode_items, landmarks
from ..finetune.lora_layers import ADAPTER, inject_lora
from ..finetune.loop import non_negative, positive, seeded, total_steps, train
from ..finetune.orthoreg import OrthoReg, lora_updates
from ..linalg import relative_ridge
from ..protocol import DualEncoder
from ..stack import Update
from ..tasks import Grid
from .edit import Edit
from .peft_files import Adapter, adapter_of, read_adapter, write_adapter


@attrs.frozen
class LoraRouteConfig:
    """LoRA-route recipe; defaults are the paper's (METHOD sec. 5)."""

    rank: int = attrs.field(default=16, validator=positive)
    lora_alpha: float = attrs.field(default=32.0, validator=positive)
    lr: float = attrs.field(default=3e-4, validator=positive)
    weight_decay: float = attrs.field(default=1e-4, validator=non_negative)
    batch_size: int = attrs.field(default=64, validator=positive)
    epochs: int = attrs.field(default=20, validator=positive)
    max_steps: int | None = attrs.field(default=540, validator=attrs.validators.optional(positive))
    seed: int = 0
    ridge_b: float = attrs.field(default=0.0, validator=non_negative)
    orthoreg: OrthoReg = attrs.field(factory=OrthoReg)

    def describe(self) -> dict[str, Any]:
        """JSON-ready record of the recipe."""
        return {**attrs.asdict(self, recurse=False), "orthoreg": self.orthoreg.describe()}


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
        """Weight change per module: strength * (alpha / r) B A, in float64."""
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
            raise PlatonicError(f"LoRA edit file is incomplete (factors missing for {missing[:3]}, or no rank/alpha)")
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
        if encoder is not None:
            self._weights(encoder)  # the factors fit this encoder
            prefix, family, checkpoint = media_prefix(encoder), encoder.family, encoder.checkpoint
        elif "media_prefix" in self.meta:
            prefix, family, checkpoint = self.meta["media_prefix"], self.meta.get("target_family"), self.meta.get("target_checkpoint")
        else:
            raise PlatonicError("this LoRA edit does not record the encoder it was fitted on; pass encoder= to save_pretrained")
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
        alpha, strength = adapter.lora_alpha, 1.0
        if "strength" in record and record["strength"] * record["lora_alpha"] == alpha:  # written by save_pretrained
            alpha, strength = record["lora_alpha"], record["strength"]
        meta = record.get("info") or {
            "target_family": encoder.family if encoder else None,
            "target_checkpoint": encoder.checkpoint if encoder else adapter.base_model,
            "source": "peft adapter", "adapter": where,
        }
        edit = cls(factors, adapter.rank, alpha, strength, {**meta, "media_prefix": prefix}, record.get("losses", ()))
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


@attrs.frozen(eq=False)
class _GridTarget:
    """One grid of the objective: items, landmarks G, unedited embeddings f_pre, the target c U, ridge mu_b."""

    grid: Grid
    G: Tensor
    f_pre: Tensor
    target: Tensor
    mu_b: float


def _grid_targets(
    target: DualEncoder, composition: Composition, grids: Sequence[Grid], batch_size: int, ridge_b: float
) -> list[_GridTarget]:
    by_id = {g.identity: g for g in grids}
    out = []
    for grid_id, (task, U) in composition.by_grid().items():
        if grid_id not in by_id:
            raise GridMismatchError(f"no grid given for the {task!r} term (grid {grid_id}); pass the task's Grid")
        grid = by_id[grid_id]
        if grid.shape != tuple(U.shape):
            raise ShapeError(f"grid {grid_id} is {grid.shape}, but its descriptor is {tuple(U.shape)}")
        G = landmarks(target, grid.prompts)
        with autocast(target.device):  # the precision of training, so that step 0 changes nothing
            f_pre = encode_items(target, grid.items, batch_size)
        out.append(_GridTarget(grid, G.clone(), f_pre.float().clone(), U.float(), float(relative_ridge(G, ridge_b))))
    return out


def fit_lora(
    target: DualEncoder,
    descriptor: UTD | Composition,
    grids: Sequence[Grid],
    config: LoraRouteConfig | None = None,
    progress: bool = True,
) -> LoraEdit:
    """Fit LoRA on a copy of `target`'s media tower to realise `descriptor` (all terms jointly); `target` is untouched."""
    config = config or LoraRouteConfig()
    composition = Composition.of(descriptor)
    parts = _grid_targets(target, composition, grids, config.batch_size, config.ridge_b)
    pool = [(k, i) for k, part in enumerate(parts) for i in range(part.grid.shape[0])]
    model = copy.deepcopy(target)
    model.eval()
    model.model.requires_grad_(False)
    device = model.device
    tower = model.media_encoder
    on_device = [attrs.evolve(p, G=p.G.to(device), f_pre=p.f_pre.to(device), target=p.target.to(device)) for p in parts]
    steps = total_steps(len(pool), config.batch_size, config.epochs, config.max_steps)

    def loss_fn(ids: Tensor) -> Tensor:
        chosen = [pool[i] for i in ids.tolist()]
        batch = model.preprocess([parts[k].grid.items[i] for k, i in chosen])
        with autocast(device):
            f = model.encode_media(batch).float()
        per_probe = []
        for k, part in enumerate(on_device):
            rows = [j for j, (kk, _) in enumerate(chosen) if kk == k]
            if rows:
                probes = torch.tensor([chosen[j][1] for j in rows], device=device)
                moved = f[rows] - part.f_pre[probes]
                misfit = (moved @ part.G.T - part.target[probes]).square().sum(dim=1)
                per_probe.append((misfit + part.mu_b * moved.square().sum(dim=1)) / part.G.shape[0])
        loss = torch.cat(per_probe).mean()
        return loss + config.orthoreg(lora_updates(tower)) if config.orthoreg.active else loss

    with seeded(config.seed, device):
        inject_lora(tower, model.lora_targets, config.rank, config.lora_alpha)  # on the copy, dropped after
        _factors(tower)  # fails fast on adapted layers that are not plain linear maps
        params = [p for p in tower.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
        desc = f"LoRA route on {target.family}"
        losses = train(loss_fn, optimizer, len(pool), config.batch_size, steps, config.seed, scheduler, desc, progress)
    meta = {
        "target_family": target.family,
        "target_checkpoint": target.checkpoint,
        "media_prefix": media_prefix(target),
        "terms": [{"task": t.utd.task, "grid_id": t.utd.grid_id, "coef": t.coef, "provenance": t.utd.provenance} for t in composition],
        "steps": steps,
        **config.describe(),
    }
    edit = LoraEdit(_factors(tower), config.rank, config.lora_alpha, 1.0, meta, losses)
    edit.target = Target.of_encoder(target, edit._weights(target))  # bound to the unedited target
    return edit


def _factors(tower: nn.Module) -> dict[str, tuple[Tensor, Tensor]]:
    """(A, B) of every peft LoRA layer in `tower`, by module name (only plain linear layers are supported)."""
    out = {}
    for name, layer in tower.named_modules():
        if isinstance(layer, LoraLayer):
            base = layer.get_base_layer()
            if not isinstance(base, nn.Linear):
                raise PlatonicError(f"LoRA route: {name!r} is a {type(base).__name__}; only nn.Linear targets are supported")
            out[name] = (layer.lora_A[ADAPTER].weight.detach().float().clone(), layer.lora_B[ADAPTER].weight.detach().float().clone())
    return out
