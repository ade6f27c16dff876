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
from ..encoding.accel import plain
from ..encoding.features import landmarks, site_features
from ..items import identities, take
from ..errors import GridMismatchError, PlatonicError, check_strength
from ..data.keep import KeepSet
from ..linalg import AnchoredSolver, RidgeSolver, anchored_solver, edited_embeddings, ridge_solver, unit_rows
from ..protocol.binding import Target
from ..protocol.encoder import DualEncoder
from ..ridge import ridge_rule
from ..strength import AUTO, ProbeGrid, fixed_or_rule, strength_rule
from ..strength.budget import DEFAULT_BUDGET, DEFAULT_CONFIDENCE, KeptChoice, check_budget, fewest_items, kept_strength, z_score
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
        self._keep_views: dict[str, ProbeGrid] = {}

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

    def keep_view(self, keep: KeepSet) -> ProbeGrid:
        """What a strength rule reads of a keep set on the target (once per set): site inputs, raw embeddings and
        landmarks of its items and prompts, and its labels (None: unlabelled). The probes of an added grid among its
        items are read from the grid's state, not encoded again."""
        if keep.content not in self._keep_views:
            S, Z = self._encoded(keep.items)
            labels = None if keep.labels is None else torch.as_tensor(keep.labels)
            self._keep_views[keep.content] = ProbeGrid(S, Z, landmarks(self.target, keep.prompts), labels=labels)
        return self._keep_views[keep.content]

    def _encoded(self, items: Sequence[Any]) -> tuple[Tensor, Tensor]:
        """(S, Z) of `items` on the target: an added grid's probes among them (the same item objects, as a task's
        train split and the grid drawn from it hold) are read from its state; the rest are encoded once."""
        rows = {key: (state, r) for state in self._grids.values() for r, key in enumerate(identities(plain(state.grid.items)))}
        found = [rows.get(key) for key in identities(plain(items))]
        rest = [i for i, f in enumerate(found) if f is None]
        if len(rest) == len(items):
            return site_features(self.target, items, self.batch_size, self.progress, cache=True)
        first = next(f[0] for f in found if f is not None)
        S = first.site_inputs.new_empty(len(items), first.site_inputs.shape[1])
        Z = first.raw_embeddings.new_empty(len(items), first.raw_embeddings.shape[1])
        if rest:
            S[rest], Z[rest] = site_features(self.target, take(plain(items), rest), self.batch_size, self.progress, cache=True)
        for i, f in enumerate(found):
            if f is not None:
                S[i], Z[i] = f[0].site_inputs[f[1]], f[0].raw_embeddings[f[1]]
        return S, Z

    def _keep_sets(self, composition: Composition, terms: Mapping[str, Any], others: Sequence[Grid] | None,
              keep: Sequence[KeepSet] | None) -> tuple[list[KeepSet], list[ProbeGrid]]:
        """The keep sets of an edit and their views: `keep`, checked; None: the grids of `others` (None: the bank's)
        outside the edit's own grids. A grid added to the bank is read from its state."""
        if keep is None:
            states = [self.add_grid(g) for g in others] if others is not None else list(self._grids.values())
            states = [s for s in states if s.grid.identity not in terms]
            return [KeepSet.from_grid(s.grid) for s in states], [self.probe_grid(s.grid.identity) for s in states]
        kept = list(keep)
        wrong = [type(k).__name__ for k in kept if not isinstance(k, KeepSet)]
        if wrong:
            raise PlatonicError(f"keep= takes KeepSets (KeepSet.from_task, .from_split, .from_grid), got {', '.join(wrong)}")
        own = sorted({k.name for k in kept} & {t.utd.task for t in composition})
        if own:
            raise PlatonicError(f"keep set(s) {', '.join(map(repr, own))} name a task the edit transfers; keep what it must leave alone")
        added = {(s.grid.content, s.grid.prompts): gid for gid, s in self._grids.items()}
        views = [self.probe_grid(added[k.items_content, k.prompts]) if (k.items_content, k.prompts) in added else self.keep_view(k)
                 for k in kept]
        return kept, views

    def strength_choice(self, descriptor: UTD | Composition, operator: Tensor, rule: str = AUTO, centre: bool = False,
                        others: Sequence[Grid] | None = None, keep: Sequence[KeepSet] | None = None, budget: float | None = None,
                        confidence: float | None = None) -> tuple[float, dict[str, Any]]:
        """(strength, record) at which `rule` folds `operator` as the edit of `descriptor` (read on its grids, row-centred
        with `centre` as the operator was solved), and what the edit file records of it.

        What the edit must leave alone: `keep` (KeepSet: labelled eval sets of other tasks, or grids); None: the
        unlabelled probes of `others` (None: every other grid added to this bank). `rule` "auto" spends `budget` accuracy
        points (DEFAULT_BUDGET) at `confidence` (DEFAULT_CONFIDENCE) on the labelled keep sets (strength.budget.kept_strength;
        docs/method.md sec. 18) and reads the rest as DEFAULT_STRENGTH_RULE does; a named rule reads every keep set's items
        as unlabelled probes."""
        given_budget, given_confidence = budget, confidence
        budget = DEFAULT_BUDGET if budget is None else check_budget(budget)
        confidence = DEFAULT_CONFIDENCE if confidence is None else confidence
        z_score(confidence)
        composition = Composition.of(descriptor)
        terms = (composition.centred() if centre else composition).by_grid()
        task = [self.probe_grid(grid_id, target) for grid_id, (_, target) in terms.items()]
        kept, views = self._keep_sets(composition, terms, others, keep)
        spends = rule == AUTO and any(k.labelled for k in kept)
        if not spends and (given_budget is not None or given_confidence is not None):
            raise PlatonicError("budget= and confidence= are spent on labelled keep sets by strength='auto'; "
                                + ("keep= holds none (KeepSet.from_task / from_split)" if rule == AUTO else f"rule {rule!r} reads no labels"))
        chosen = strength_rule(rule)
        if spends:
            need = fewest_items(budget, confidence)
            small = [k for k in kept if k.labelled and len(k) < need]
            if small:
                warnings.warn(f"keep set(s) {', '.join(f'{k.name!r} ({len(k)} items)' for k in small)}: too few labelled items for one "
                              f"flipped item to read within {budget:g} points at {confidence:.0%} confidence (that takes {need}); read "
                              "without their labels, as a grid's probes are", stacklevel=3)
            addition = all(t.coef > 0 for t in composition)
            picked = kept_strength(operator, task, views, budget, confidence, chosen.choose, addition)
        else:
            picked = KeptChoice(chosen.choose(operator, task, [attrs.evolve(v, labels=None) for v in views]), "held sets", (None,) * len(kept))
        value = check_strength(picked.strength, f"the strength chosen by rule {rule!r}")
        if chosen.reads_others and not kept:
            warnings.warn(f"nothing to keep: strength={rule!r} chose the strength from the edit's own grids alone (the task-only fit), "
                          "which can overshoot; pass keep=[...] (KeepSet.from_task: labelled eval sets of your other tasks, or "
                          "KeepSet.from_grid), add the grids of tasks the edit should leave alone (OperatorBank.add_grid), or give a "
                          "number", stacklevel=3)
        record = {"rule": rule, "label_free_rule": chosen.name, "strength": value,
                  "kept": [{**k.record(), **({} if r is None else {"drop": r.drop, "bound": r.bound})} for k, r in zip(kept, picked.readings)]}
        if spends:
            record.update(budget=budget, confidence=confidence, stopped_by=picked.stopped_by)
        return value, record

    def chosen_strength(self, descriptor: UTD | Composition, operator: Tensor, rule: str = AUTO, centre: bool = False,
                        others: Sequence[Grid] | None = None, keep: Sequence[KeepSet] | None = None, budget: float | None = None,
                        confidence: float | None = None) -> float:
        """The strength of `strength_choice` alone."""
        return self.strength_choice(descriptor, operator, rule, centre, others, keep, budget, confidence)[0]

    def edit(self, descriptor: UTD | Composition, strength: float | str = AUTO, centre: bool = False, anchors: Sequence[Grid] = (),
             meta: Mapping[str, Any] | None = None, *, keep: Sequence[KeepSet] | None = None, budget: float | None = None,
             confidence: float | None = None) -> OperatorEdit:
        """A deployable edit folding `descriptor`'s operator at `strength` (`centre`: of its row-centred terms;
        `anchors`: grids whose probes must not move; `meta`: free metadata stored with the edit).

        `strength` is a number, or a strength rule that chooses it (`strength_choice`): "auto" (the default, as in
        experiments) reads what the edit must leave alone, `keep` (KeepSet.from_task / .from_split: labelled eval sets
        of other tasks, on which it spends `budget` accuracy points at `confidence`; KeepSet.from_grid: unlabelled
        probes), or without `keep` the probes of this bank's other grids (docs/method.md sec. 17 and 18); a rule's name
        runs that rule. The edit's meta then records `strength_rule`: the rule, the strength, what was kept and, with
        labels, the budget, the confidence and each kept set's drop estimate and bound. With nothing to keep the rule
        is the task-only fit, which overshoots, and says so; `strength=0.5` is the fixed strength of versions before."""
        chosen = fixed_or_rule(strength)
        if not isinstance(chosen, str) and (keep is not None or budget is not None or confidence is not None):
            raise PlatonicError(f"keep=, budget= and confidence= are read by a strength rule (strength='auto'); strength={strength!r} is fixed")
        composition = Composition.of(descriptor)
        anchors = anchor_grids(composition.by_grid(), anchors)
        info = {
            "target_family": self.target.family,
            "target_checkpoint": self.binding.checkpoint,
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
            chosen, info["strength_rule"] = self.strength_choice(composition, A, AUTO if strength == AUTO else chosen, centre,
                                                                 keep=keep, budget=budget, confidence=confidence)
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
            self.site_kind, self.ridge_a, self.ridge_b, self.target.family, self.binding.checkpoint, self.binding, self.ridge_why,
        )
        saved.save(path)
        return saved

    @staticmethod
    def load(path: str | os.PathLike) -> SavedBank:
        """A bank file written by `save`: its operators by label, and `edit(terms, strength)` over them."""
        return SavedBank.load(path)
