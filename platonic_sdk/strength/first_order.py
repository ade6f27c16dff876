"""What the least-squares strength rules share: the target's first-order change of its probe-prompt
affinities per unit strength on each grid, and the objective's per-grid weights."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from ..linalg import first_order_change
from . import ProbeGrid


def unit_change(A: Tensor, grid: ProbeGrid) -> Tensor:
    """dU = d/dc <normalize(z + c A s), g> at c = 0 (P x M, float64): the realised change per unit strength."""
    S, Z, G = (m.detach().cpu().double() for m in (grid.site_inputs, grid.raw_embeddings, grid.landmarks))
    return first_order_change(S, Z, A.detach().cpu().double(), G)


def weighted_inner(grids: Sequence[ProbeGrid], left: Sequence[Tensor], right: Sequence[Tensor]) -> float:
    """sum_k (1/M_k) <left_k, right_k>: the transfer objective's weighting of grids (docs/method.md sec. 3)."""
    return float(sum(torch.sum(a * b) / g.landmarks.shape[0] for g, a, b in zip(grids, left, right)))


def targets(grids: Sequence[ProbeGrid]) -> list[Tensor]:
    """Each task grid's descriptor in float64."""
    return [g.target.detach().cpu().double() for g in grids]


def fitted(A: Tensor, task: Sequence[ProbeGrid], others: Sequence[ProbeGrid]) -> float:
    """argmin_c>=0 of sum_T w ||c dU - U||^2 + sum_O w ||c dU||^2 = max(0, sum_T w <dU, U> / (sum_T w ||dU||^2 +
    sum_O w ||dU||^2)), 0 when the edit moves nothing; w = 1/M per grid. `others` empty: the task grids alone."""
    changes = [unit_change(A, g) for g in task]
    off = [unit_change(A, g) for g in others]
    energy = weighted_inner(task, changes, changes) + weighted_inner(others, off, off)
    return max(0.0, weighted_inner(task, changes, targets(task)) / energy) if energy > 0 else 0.0
