"""Closed-form route: one ridge factorisation per (target, grid), one operator per descriptor.

For a target with site rows F = S / ||z|| (S = z for projections, [u; 1] for residual heads) and
landmarks G, the operator of a descriptor U is A = X*(U)^T with
X* = (F^T F + mu_a I)^{-1} F^T U G (G^T G + mu_b I)^{-1}; a composition realises as sum_l c_l A(U_l).
Anchors (grids whose probes must not move) add ||F_o X G_o^T||^2 + mu_o ||F_o X||^2 to a term's objective,
F_o the anchors' probe rows and G_o their landmarks, each stacked: every anchor probe pays its affinity
change with the anchors' prompts, as in the LoRA route. The solve stays exact (linalg.AnchoredSolver).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Mapping, Sequence

import attrs
import torch
from torch import Tensor

from ..descriptor import UTD, Composition
from ..edits.edit import OperatorEdit
from ..encoding.features import landmarks, site_features
from ..errors import GridMismatchError, PlatonicError, check_strength
from ..linalg import AnchoredSolver, RidgeSolver, anchored_solver, edited_embeddings, ridge_solver, unit_rows
from ..protocol.binding import Target
from ..protocol.encoder import DualEncoder
from ..ridge import ridge_rule
from ..strength import AUTO, ProbeGrid, fixed_or_rule, strength_rule
from ..tasks import Grid, anchor_grids
from .saved_bank import SavedBank


@attrs.frozen(eq=False)
class GridState:
    """A target's cached view of one probe grid: site inputs s, raw embeddings z, landmarks g (rows), and its solver."""

    grid: Grid
    site_inputs: Tensor
    raw_embeddings: Tensor
    landmarks: Tensor
    solve: RidgeSolver

    @property
    def solve_rows(self) -> Tensor:
        """Solve rows: site inputs over the embedding norm, s / ||z||."""
        return self.site_inputs / self.raw_embeddings.norm(dim=1, keepdim=True)

    def achieved(self, A: Tensor, strength: float) -> Tensor:
        """Exact UTD of the edit `strength` A folded (no forward pass) on this grid: <f_E, g> - <f, g>."""
        f_edit = unit_rows(edited_embeddings(self.site_inputs, self.raw_embeddings, A, strength))
        return (f_edit - unit_rows(self.raw_embeddings)) @ self.landmarks.T


class OperatorBank:
    """Operators of one target for any number of source descriptors, on any number of grids."""

    def __init__(self, target: DualEncoder, ridge_a: float | None = None, ridge_b: float | None = None, batch_size: int = 64,
                 progress: bool = False):
        """`ridge_a` / `ridge_b` None: the rule's (ridge.ridge_rule: the world's ridge for a member of a world's
        zoo, else the paper's); `ridge_why` says which."""
        self.target = target
        self.ridge_a, self.ridge_b, self.ridge_why = ridge_rule(getattr(target, "checkpoint", None), ridge_a, ridge_b)
        self.batch_size = batch_size
        self.progress = progress
        target.check_finite()
        site = target.last_affine()
        self.site_kind = site.kind
        self.binding = Target.of_encoder(target, site.tensors())  # edits bind to the target's base weights
        self._grids: dict[str, GridState] = {}
        self._anchored: dict[tuple[str, tuple[str, ...]], AnchoredSolver] = {}

    def add_grid(self, grid: Grid) -> GridState:
        """Encode the grid's probes and prompts on the target once and factorise its solve."""
        key = grid.identity
        if key not in self._grids:
            S, Z = site_features(self.target, grid.items, self.batch_size, self.progress, cache=True)
            G = landmarks(self.target, grid.prompts)
            F = (S / Z.norm(dim=1, keepdim=True)).to(self.target.device)  # solves run where the target is
            solver = ridge_solver(F, G.to(F.device), self.ridge_a, self.ridge_b, method="gram")
            self._grids[key] = GridState(grid, S, Z, G, solver)
        return self._grids[key]

    def state(self, grid_id: str) -> GridState:
        """The cached state of a grid added with `add_grid`."""
        try:
            return self._grids[grid_id]
        except KeyError:
            raise GridMismatchError(f"grid {grid_id} was not added to this bank; call bank.add_grid(grid) first") from None

    @property
    def grids(self) -> dict[str, GridState]:
        return dict(self._grids)

    def _anchored_solve(self, grid_id: str, anchors: tuple[Grid, ...]) -> RidgeSolver | AnchoredSolver:
        """The solve of grid `grid_id` holding the distinct `anchors`' probes (cached); none: the grid's own solve."""
        own = self.state(grid_id)
        if not anchors:
            return own.solve
        key = (grid_id, tuple(a.identity for a in anchors))
        if key not in self._anchored:
            held = [self.add_grid(a) for a in anchors]
            device = self.target.device
            self._anchored[key] = anchored_solver(own.solve_rows.to(device), own.landmarks.to(device),
                                                  torch.cat([h.solve_rows.to(device) for h in held]),
                                                  torch.cat([h.landmarks.to(device) for h in held]), self.ridge_a, self.ridge_b)
        return self._anchored[key]

    def operator(self, descriptor: UTD | Composition, centre: bool = False, anchors: Sequence[Grid] = ()) -> Tensor:
        """A = sum_l c_l X*(U_l)^T: one solve per grid, since the solve is linear in U.

        `centre` solves for the row-centred descriptors (UTD.centred) instead of the raw ones; `anchors`
        are grids whose probes must not move (their readout on the anchors' prompts is held, see the module docstring)."""
        composition = Composition.of(descriptor)
        composition = composition.centred() if centre else composition
        terms = composition.by_grid()
        anchors = anchor_grids(terms, anchors)
        total: Tensor | None = None
        for grid_id, (_, target) in terms.items():
            A = self._anchored_solve(grid_id, anchors)(target).cpu()
            total = A if total is None else total + A
        if total is None:
            raise GridMismatchError("an empty composition has no operator")
        return total

    def operators(self, descriptors: Sequence[UTD], centre: bool = False, anchors: Sequence[Grid] = ()) -> Tensor:
        """Operators of many descriptors (B x d x q, input order): one stacked solve per grid
        (`centre`: of their row-centred versions; `anchors`: as in `operator`)."""
        if not descriptors:
            raise GridMismatchError("no descriptors to solve")
        descriptors = [d.centred() for d in descriptors] if centre else descriptors
        by_grid: dict[str, list[int]] = {}
        for i, utd in enumerate(descriptors):
            by_grid.setdefault(utd.grid_id, []).append(i)
        anchors = anchor_grids(by_grid, anchors)
        out: Tensor | None = None
        for grid_id, ids in by_grid.items():
            ops = self._anchored_solve(grid_id, anchors).many(torch.stack([descriptors[i].matrix for i in ids])).cpu()
            if out is None:
                out = torch.empty(len(descriptors), *ops.shape[1:], dtype=ops.dtype)
            out[ids] = ops
        return out

    def probe_grid(self, grid_id: str, target: Tensor | None = None) -> ProbeGrid:
        """What a strength rule reads of an added grid: its site inputs, raw embeddings and landmarks, and
        `target`, the descriptor an edit should realise there (None: a grid whose probes should not move)."""
        state = self.state(grid_id)
        return ProbeGrid(state.site_inputs, state.raw_embeddings, state.landmarks, target)

    def chosen_strength(self, descriptor: UTD | Composition, operator: Tensor, rule: str = AUTO, centre: bool = False,
                        others: Sequence[Grid] | None = None) -> float:
        """The strength at which `rule` (strength.strength_rule; "auto": the default rule) folds `operator` as
        the edit of `descriptor`: it reads the descriptor on its grids (row-centred with `centre`, as the
        operator was solved) and the unlabelled probes of `others` (None: every other grid added to this bank)."""
        composition = Composition.of(descriptor)
        terms = (composition.centred() if centre else composition).by_grid()
        task = [self.probe_grid(grid_id, target) for grid_id, (_, target) in terms.items()]
        states = [self.add_grid(g) for g in others] if others is not None else list(self._grids.values())
        held = [self.probe_grid(s.grid.identity) for s in states if s.grid.identity not in terms]
        chosen = strength_rule(rule)
        value = check_strength(chosen.choose(operator, task, held), f"the strength chosen by rule {rule!r}")
        if chosen.reads_others and not held:
            warnings.warn(f"strength rule {chosen.name} weighs what the edit does to the bank's other grids, and none was given: it "
                          "chose the strength from the edit's own grids alone, which can overshoot; add the grids of tasks the edit "
                          "should leave alone (OperatorBank.add_grid; platonic edit: --task) or give a number", stacklevel=3)
        return value

    def edit(self, descriptor: UTD | Composition, strength: float | str = 0.5, centre: bool = False, anchors: Sequence[Grid] = (),
             meta: Mapping[str, Any] | None = None) -> OperatorEdit:
        """A deployable edit folding `descriptor`'s operator at `strength` (`centre`: of its row-centred terms;
        `anchors`: grids whose probes must not move; `meta`: free metadata stored with the edit).

        `strength` is a number, or a strength rule that chooses it from the target, the descriptor and the
        probes of this bank's other grids (`"auto"`: the default rule, strength.DEFAULT_STRENGTH_RULE;
        or a rule's name; `chosen_strength`). The edit's meta then records `strength_rule`: the rule, the
        strength it chose and the grids it read. The default rule weighs what the edit does to the other grids'
        probes: add the grids of tasks the edit should leave alone first; on a bank holding only the edit's
        grids it is the task-only fit, which overshoots (docs/method.md sec. 17). The default 0.5 is fixed
        for that reason, where experiments, which hold every transfer task's grid, default to "auto"."""
        chosen = fixed_or_rule(strength)
        composition = Composition.of(descriptor)
        anchors = anchor_grids(composition.by_grid(), anchors)
        info = {
            "target_family": self.target.family,
            "target_checkpoint": self.target.checkpoint,
            "ridge_a": self.ridge_a,
            "ridge_b": self.ridge_b,
            "ridge_why": self.ridge_why,
            "centred": bool(centre),
            "anchors": [{"task": a.task, "grid_id": a.identity} for a in anchors],
            "space": composition.space,
            "terms": [{"task": t.utd.task, "grid_id": t.utd.grid_id, "coef": t.coef, "provenance": t.utd.provenance} for t in composition],
        }
        taken = sorted(set(meta or {}) & {*info, "strength_rule"})
        if taken:
            raise PlatonicError(f"meta keys {', '.join(map(repr, taken))} are recorded by the bank itself; name them otherwise")
        info = {**(meta or {}), **info}
        A = self.operator(composition, centre, anchors)
        if isinstance(chosen, str):
            value = self.chosen_strength(composition, A, chosen, centre)
            read = [{"task": s.grid.task, "grid_id": gid} for gid, s in self._grids.items()]
            info["strength_rule"] = {"rule": chosen, "strength": value, "grids": read}
            chosen = value
        return OperatorEdit(A, chosen, self.site_kind, info, self.binding)

    def objective(self, composition: Composition, A: Tensor, strength: float) -> float:
        """Transfer loss L(E) of docs/method.md sec. 3 for the folded edit (`strength` A), measured on the cached grids."""
        achieved = {gid: self.state(gid).achieved(A, strength) for gid in composition.by_grid()}
        return composition.objective(achieved)

    def save(self, path: str | os.PathLike, descriptors: Mapping[str, UTD]) -> SavedBank:
        """Write the operators of the named descriptors (their grids added first) to a bank file, which
        `OperatorBank.load` reads back without the model (saved_bank.py: the format); returns what it wrote."""
        saved = SavedBank(
            {label: self.operator(utd) for label, utd in descriptors.items()},
            {label: {"task": utd.task, "grid_id": utd.grid_id, "provenance": utd.provenance, "space": utd.space}
             for label, utd in descriptors.items()},
            self.site_kind, self.ridge_a, self.ridge_b, self.target.family, self.target.checkpoint, self.binding, self.ridge_why,
        )
        saved.save(path)
        return saved

    @staticmethod
    def load(path: str | os.PathLike) -> SavedBank:
        """A bank file written by `save`: its operators by label, and `edit(terms, strength)` over them."""
        return SavedBank.load(path)
