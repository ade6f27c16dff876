"""The alignment baseline (docs/method.md sec. 16): align the two embedding spaces on the probes, carry
the source's fine-tuning change through the map, and fold the least-squares operator on the target's site.

This is the representation-alignment answer to "why not just align the two embedding spaces?"
(latent-space translation; the Procrustes step of TransMiter and Theseus), not the paper's method: no
descriptor, no landmarks and no labels enter. For one term (source, task) on a target, on the task's grid:

    X_s, X_t   unit-norm probe embeddings of the unedited source and target (P x d_s, P x d_t)
    Delta      f_ft - f_pre: the source fine-tune's change of its probe embeddings (P x d_s)
    R          procrustes_map(X_s, X_t): semi-orthogonal, from the SVD of the centred cross-covariance
               (method "alignment"), or lstsq_map(X_s, X_t): least squares on the centred rows ("alignment_lstsq")
    A          argmin ||F_t A^T - Delta R||^2 + mu_a ||A||^2, F_t = S_t / ||z_t|| the closed form's solve rows
               (site inputs over the embedding norm; [u; 1] / ||z|| on residual heads), mu_a = ridge_a mean(sigma(F_t)^2)

and the cell folds sign * sum of its terms' A at the cell's strength, as the closed form does. At first
order F_t A^T is the change of the target's unit embeddings, so the edit asks the target to move each probe
as the mapped source moved it (times the strength).
"""

from __future__ import annotations

from typing import Callable

from torch import Tensor

from ...linalg import lstsq_map, procrustes_map, ridge_lstsq, unit_rows
from ...protocol.encoder import DualEncoder
from ..plan.settings import CellSettings
from .cells import Cell, folded
from .workspace import Workspace

MAPS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"procrustes": procrustes_map, "lstsq": lstsq_map}


def carried_change(X_s: Tensor, X_t: Tensor, change: Tensor, how: str = "procrustes") -> Tensor:
    """The source's change of its probe embeddings (P x d_s) carried into the target's space (P x d_t) by
    the map fitted from X_s to X_t (`how`: "procrustes" or "lstsq"); a change maps by the map's linear part."""
    try:
        fit = MAPS[how]
    except KeyError:
        raise ValueError(f"unknown alignment map {how!r}; the maps are {', '.join(MAPS)}") from None
    R = fit(X_s.double(), X_t.double())
    return change.double() @ R


def alignment_operator(ws: Workspace, target: str, source: str, task: str, how: str = "procrustes") -> Tensor | None:
    """The target's site operator carrying `source`'s fine-tuning change of `task`'s probe embeddings
    (module docstring), computed once per workspace (Workspace.memo); None when the source's fine-tuned model is
    not available (a stored descriptor)."""
    return ws.memo(("alignment", target, source, task, how), lambda: _solved(ws, target, source, task, how))


def _solved(ws: Workspace, target: str, source: str, task: str, how: str) -> Tensor | None:
    if not isinstance(ws.finetuned.get((source, task)), DualEncoder):
        return None
    src, tgt = ws.grid_state(source, task), ws.grid_state(target, task)
    X_s = unit_rows(src.raw_embeddings.detach().cpu().double())
    X_t = unit_rows(tgt.raw_embeddings.detach().cpu().double())
    change = ws.finetuned_rows(source, task, task).detach().cpu().double() - X_s
    F = tgt.solve_rows.detach().cpu()
    return ridge_lstsq(F, carried_change(X_s, X_t, change, how).to(F.dtype), ws.ridge_a)


def alignment(how: str = "procrustes") -> Callable[[Workspace, Cell, CellSettings], "dict[str, float] | None"]:
    """The cell method: sign * sum of the terms' alignment operators folded at the cell's strength."""
    MAPS[how]  # noqa: B018  (an unknown map fails at registration)

    def fn(ws: Workspace, cell: Cell, settings: CellSettings) -> dict[str, float] | None:
        ops = [alignment_operator(ws, cell.target, s, t, how) for s, t in zip(cell.sources, cell.tasks)]
        if any(op is None for op in ops):
            return None
        return folded(ws, cell, settings, ops)

    return fn
