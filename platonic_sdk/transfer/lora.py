"""LoRA route (docs/method.md sec. 5): fit LoRA on the target's media tower so its UTDs match a composition.

With f_E the edited target, f_pre the unedited one and landmarks g from the frozen text tower,

    L(E) = mean over probes x of (1 / M_x) sum_j (<f_E(x), g_j> - <f_pre(x), g_j> - c U[x, j])^2

where each probe belongs to one term's grid (M_x prompts; c U is that grid's summed target). With
`ridge_b` > 0 each probe also pays (mu_b / M_x) ||f_E(x) - f_pre(x)||^2, mu_b = ridge_b * mean(sigma(G)^2):
the closed form's landmark ridge (its mu_b ||F X||^2 term) carried over, so both routes shrink the same
poorly separated landmark directions (off by default, as in the paper). LoRA B starts at zero, so step 0
is the unedited model. The result is a `LoraEdit`: the LoRA factors, folded
into the weights as W <- W + strength * (lora_alpha / r) B A on apply and restored bit for bit on remove.

The recipe: `lora_recipe(checkpoint, given)` is the one rule, for `fit_lora` without a config and for
`platonic edit --route lora` alike: a member of a world's zoo gets the world's recipe (its zoo's
manifest, `zoo_settings`: the tuned lr and epochs, the world's landmark ridge), any other model
`LoraRouteConfig`'s defaults (the paper's); the fields the user gives win.
"""

from __future__ import annotations

import copy
import difflib
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import attrs
import torch
from torch import Tensor, nn

from ..descriptor import UTD, Composition
from ..edits.lora_edit import LoraEdit, media_prefix
from ..encoding.accel import Prepared, autocast, autocasts, batch_nbytes, batch_rows, cat_batches, map_tensors
from ..encoding.features import encode_items, landmarks
from ..errors import GridMismatchError, PlatonicError, ShapeError
from ..io import MARKER
from ..items import join
from ..linalg import relative_ridge
from ..protocol.binding import Target
from ..protocol.encoder import DualEncoder
from ..tasks import Grid, anchor_grids
from ..training.loop import non_negative, positive, total_steps, train
from ..training.lora_layers import ADAPTER, inject_lora
from ..training.orthoreg import OrthoReg, lora_updates
from ..zoo_settings import member_settings


@attrs.frozen
class LoraRouteConfig:
    """LoRA-route recipe; defaults are the paper's (docs/method.md sec. 5). `lora_recipe` gives a member of a
    world's zoo its world's recipe instead."""

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


def lora_recipe(checkpoint: str | os.PathLike | None, given: Mapping[str, Any] | None = None) -> tuple[LoraRouteConfig, str]:
    """(the LoRA route's recipe for the model of `checkpoint`, why): the fields in `given` (LoraRouteConfig
    fields; an unknown one is refused) win; the others are the world's recipe when the checkpoint is a
    member of a world's zoo (zoo_settings.member_settings), else LoraRouteConfig's defaults (the paper's)."""
    given, fields = dict(given or {}), list(attrs.fields_dict(LoraRouteConfig))
    for key in given:
        if key not in fields:
            near = difflib.get_close_matches(key, fields, n=1)
            raise TypeError(f"lora_recipe: unknown LoraRouteConfig field {key!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
                            + f"; known: {', '.join(fields)}")
    world = member_settings(checkpoint)
    if world is not None:
        base, origin = dict(world.lora), f"the {world.world} world's LoRA recipe (recorded in the member's folder)"
        unknown = sorted(set(base) - set(fields))
        if unknown:
            raise PlatonicError(f"{Path(checkpoint) / MARKER}: the `world` record's lora holds {unknown}, not LoraRouteConfig fields")
    else:
        base, origin = {}, "LoraRouteConfig's defaults (the paper's; not a member of a world's zoo)"
    shown = [k for k in given if k != "seed"]
    why = origin + (f", with {', '.join(shown)} given" if shown else "")
    return LoraRouteConfig(**{**base, **given}), why


@attrs.frozen(eq=False)
class _GridTarget:
    """One grid of the objective: items, landmarks G, unedited embeddings f_pre, the target c U, ridge mu_b."""

    grid: Grid
    G: Tensor
    f_pre: Tensor
    target: Tensor
    mu_b: float


Encoded = Mapping[str, tuple[Tensor, Tensor]]  # grid identity -> (unedited unit embeddings f_pre, landmarks G)


def _grid_target(target: DualEncoder, grid: Grid, G: Tensor, U: Tensor, batch_size: int, ridge_b: float, f_pre: Tensor | None) -> _GridTarget:
    if f_pre is None:
        with autocast(target.device):  # the precision of training, so that step 0 changes nothing
            f_pre = encode_items(target, grid.items, batch_size)
    return _GridTarget(grid, G.clone(), f_pre.float().clone(), U, float(relative_ridge(G, ridge_b)))


def _grid_targets(
    target: DualEncoder, composition: Composition, grids: Sequence[Grid], batch_size: int, ridge_b: float,
    anchors: tuple[Grid, ...] = (), encoded: Encoded | None = None,
) -> list[_GridTarget]:
    """The objective's grids: each term's with its summed target c U, then each (distinct) anchor's with
    target 0 on every anchor's prompts (the closed form's anchor term). `encoded` grids are not encoded
    again where autocast leaves the forward's precision as it is (off CUDA): their rows are what
    encoding them here would give."""
    known = {} if autocasts(target.device) else dict(encoded or {})
    f_pre = lambda grid: known[grid.identity][0] if grid.identity in known else None  # noqa: E731
    G = lambda grid: known[grid.identity][1] if grid.identity in known else landmarks(target, grid.prompts)  # noqa: E731
    by_id = {g.identity: g for g in grids}
    out = []
    for grid_id, (task, U) in composition.by_grid().items():
        if grid_id not in by_id:
            raise GridMismatchError(f"no grid given for the {task!r} term (grid {grid_id}); pass the task's Grid")
        grid = by_id[grid_id]
        if grid.shape != tuple(U.shape):
            raise ShapeError(f"grid {grid_id} is {grid.shape}, but its descriptor is {tuple(U.shape)}")
        out.append(_grid_target(target, grid, G(grid), U.float(), batch_size, ridge_b, f_pre(grid)))
    if anchors:
        held = torch.cat([G(a) for a in anchors])  # every anchor's prompts
        out += [_grid_target(target, a, held, torch.zeros(a.shape[0], held.shape[0]), batch_size, ridge_b, f_pre(a)) for a in anchors]
    return out


POOL_BYTES = 1 << 30  # preprocess the probe pool once when its model batch fits in this much memory


def _preprocessed_pool(model: DualEncoder, sets: Sequence[Sequence[Any]], batch_size: int) -> Any | None:
    """The model batch of every probe item of `sets`, in pool order, on the model's device: the kept batches
    of `accel.Prepared` sets, else preprocessed here once (`preprocess` works item by item, so its rows are
    what each training step's own preprocessing would give); None when over `POOL_BYTES`."""
    if all(isinstance(s, Prepared) and s.kept() for s in sets):
        return map_tensors(lambda t: t.to(model.device), cat_batches([s.rows(0, len(s)) for s in sets]))
    items = join(sets)
    chunks = (model.preprocess([items[j] for j in range(i, min(i + batch_size, len(items)))]) for i in range(0, len(items), batch_size))
    first = next(chunks)
    if batch_nbytes(first) / min(batch_size, len(items)) * len(items) > POOL_BYTES:
        return None
    return cat_batches([first, *chunks])


def fit_lora(
    target: DualEncoder,
    descriptor: UTD | Composition,
    grids: Sequence[Grid],
    config: LoraRouteConfig | None = None,
    progress: bool = True,
    anchors: Sequence[Grid] = (),
    encoded: Encoded | None = None,
) -> LoraEdit:
    """Fit LoRA on a copy of `target`'s media tower to realise `descriptor` (all terms jointly); `target` is untouched.

    `anchors` are grids whose probes must not move: they join the objective with a zero target on the
    prompts of every anchor (plus the landmark ridge), as the closed form's anchors do. They join the
    batches without lengthening the fit: its steps are counted over the terms' probes.
    Grids whose items are `accel.Prepared` are not preprocessed again; `encoded` maps grid identities to
    the target's unedited unit embeddings and landmarks of that grid (an `OperatorBank`'s grid state holds
    them), which are then not encoded again (off CUDA, where autocast changes nothing).
    `config` None: the recipe of `lora_recipe(target.checkpoint)` (a zoo member's world's, else the paper's)."""
    config = config or lora_recipe(target.checkpoint)[0]
    composition = Composition.of(descriptor)
    anchors = anchor_grids(composition.by_grid(), anchors)
    parts = _grid_targets(target, composition, grids, config.batch_size, config.ridge_b, anchors, encoded)
    pool = [(k, i) for k, part in enumerate(parts) for i in range(part.grid.shape[0])]
    model = copy.deepcopy(target)
    model.eval()
    model.model.requires_grad_(False)
    device = model.device
    tower = model.media_encoder
    on_device = [attrs.evolve(p, G=p.G.to(device), f_pre=p.f_pre.to(device), target=p.target.to(device)) for p in parts]
    # an epoch is a pass over the terms' probes: anchors join the batches without lengthening the fit
    term_probes = sum(part.grid.shape[0] for part in parts[: len(parts) - len(anchors)])
    steps = total_steps(term_probes, config.batch_size, config.epochs, config.max_steps)

    inputs = _preprocessed_pool(model, [part.grid.items for part in parts], config.batch_size)

    def loss_fn(ids: Tensor) -> Tensor:
        chosen = [pool[i] for i in ids.tolist()]
        if inputs is None:
            batch = model.preprocess([parts[k].grid.items[i] for k, i in chosen])
        else:
            batch = batch_rows(inputs, ids)
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

    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):  # peft's own draws: the global generator is left as it was
        inject_lora(tower, model.lora_targets, config.rank, config.lora_alpha)  # on the copy, dropped after
    _factors(tower)  # fails fast on adapted layers that are not plain linear maps
    _draw_lora_a(tower, torch.Generator().manual_seed(config.seed))  # the fit's own generator (train shuffles with another)
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
        "anchors": [{"task": a.task, "grid_id": a.identity} for a in anchors],
        "steps": steps,
        **config.describe(),
    }
    edit = LoraEdit(_factors(tower), config.rank, config.lora_alpha, 1.0, meta, losses)
    edit.target = Target.of_encoder(target, edit._weights(target))  # bound to the unedited target
    return edit


def _draw_lora_a(tower: nn.Module, generator: torch.Generator) -> None:
    """Draw LoRA A of every adapted layer of `tower` from `generator`, by peft's rule (kaiming-uniform, a = sqrt(5):
    U(-1 / sqrt(fan_in), 1 / sqrt(fan_in))), on the CPU: a fit's start depends on its seed alone, not on torch's
    global generator, the process or the device. B stays zero."""
    from peft.tuners.lora import LoraLayer

    with torch.no_grad():
        for layer in tower.modules():
            if isinstance(layer, LoraLayer):
                weight = layer.lora_A[ADAPTER].weight
                weight.copy_(nn.init.kaiming_uniform_(torch.empty(weight.shape), a=math.sqrt(5), generator=generator))


def _factors(tower: nn.Module) -> dict[str, tuple[Tensor, Tensor]]:
    """(A, B) of every peft LoRA layer in `tower`, by module name (only plain linear layers are supported)."""
    from peft.tuners.lora import LoraLayer

    out = {}
    for name, layer in tower.named_modules():
        if isinstance(layer, LoraLayer):
            base = layer.get_base_layer()
            if not isinstance(base, nn.Linear):
                raise PlatonicError(f"LoRA route: {name!r} is a {type(base).__name__}; only nn.Linear targets are supported")
            out[name] = (layer.lora_A[ADAPTER].weight.detach().float().clone(), layer.lora_B[ADAPTER].weight.detach().float().clone())
    return out
