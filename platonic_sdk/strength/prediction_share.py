"""The strength whose share of changed task predictions matches the descriptor's (candidate (b) of
docs/method.md sec. 17):

    q    = share of the task grids' probes i with argmax_j (a_i + U_i)[j] != argmax_j a_i[j]
    q(c) = share of them with argmax_j <normalize(z_i + c A s_i), g_j> != argmax_j a_i[j]
    c    = the least c in GRID with q(c) >= q (0 when q = 0; where no c reaches q, the first c of the largest q(c))

a_i = <z_i / ||z_i||, g_j> the target's unedited affinities, U the descriptor on the probe's grid, the
edit exact (no first-order step). Only the task grids' unlabelled probes are read.
"""

from __future__ import annotations

from typing import Sequence

from torch import Tensor

from ..linalg import edited_embeddings, unit_rows
from . import ProbeGrid, StrengthRule, register_strength_rule

GRID = tuple(k / 64 for k in range(1, 257))  # the strengths searched: 1/64, 2/64, ..., 4


def _predictions(S: Tensor, Z: Tensor, A: Tensor, G: Tensor, c: float) -> Tensor:
    return (unit_rows(edited_embeddings(S, Z, A, c)) @ G.T).argmax(dim=1)


def prediction_share(A: Tensor, task: Sequence[ProbeGrid], others: Sequence[ProbeGrid]) -> float:
    """The least strength on GRID whose share of changed task predictions reaches the share U implies; `others` are not read."""
    views = [tuple(m.detach().cpu().double() for m in (g.site_inputs, g.raw_embeddings, unit_rows(g.landmarks), g.target)) for g in task]
    A = A.detach().cpu().double()
    before = [(unit_rows(Z) @ G.T).argmax(dim=1) for _, Z, G, _ in views]
    implied = [((unit_rows(Z) @ G.T) + U).argmax(dim=1) for _, Z, G, U in views]
    probes = sum(len(b) for b in before)
    wanted = sum(int((i != b).sum()) for i, b in zip(implied, before)) / probes
    if wanted == 0:
        return 0.0
    shares = [sum(int((_predictions(S, Z, A, G, c) != b).sum()) for (S, Z, G, _), b in zip(views, before)) / probes for c in GRID]
    reached = [c for c, share in zip(GRID, shares) if share >= wanted]
    return reached[0] if reached else GRID[max(range(len(GRID)), key=lambda k: (shares[k], -k))]


register_strength_rule(StrengthRule("prediction_share", prediction_share,
                                    "the share of changed task predictions matches the share the descriptor implies", reads_others=False))
