"""What the prediction spaces share (docs/method.md sec. 15): the zero-shot head's logits s <f_i, g_j> on a grid's
M classes, the shape check of probe rows against landmarks, and the scale convention: a descriptor is scaled
to the Frobenius norm of the affinity UTD of the same change on the same grid."""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import ShapeError
from ..linalg import unit_rows, utd


def logits(f: Tensor, g: Tensor, logit_scale: float) -> Tensor:
    """s <f_i, g_j> on unit rows, in float64 (the zero-shot head's logits over the grid's M classes)."""
    if not (float(logit_scale) > 0 and float(logit_scale) != float("inf")):
        raise ValueError(f"the logit scale must be a finite positive number, got {logit_scale!r}")
    return float(logit_scale) * (unit_rows(f.double()) @ unit_rows(g.double()).T)


def check_rows(f: Tensor, g: Tensor, what: str = "f") -> None:
    """ShapeError unless f is P x d and g M x d (M >= 1)."""
    if f.ndim != 2 or g.ndim != 2 or g.shape[1] != f.shape[1] or 0 in g.shape:
        raise ShapeError(f"{what} must be P x d and g M x d (M >= 1), got {tuple(f.shape)} and {tuple(g.shape)}")


def norm_matched(matrix: Tensor, reference: Tensor) -> Tensor:
    """`matrix` scaled to the Frobenius norm of `reference`: D ||R||_F / ||D||_F (a zero matrix stays zero)."""
    norm = matrix.double().norm()
    if norm == 0:
        return torch.zeros_like(matrix)
    return (matrix.double() * (reference.double().norm() / norm)).to(matrix.dtype)


def matched_to_utd(matrix: Tensor, f_pre: Tensor, f_ft: Tensor, g: Tensor) -> Tensor:
    """`matrix` scaled to ||U||_F, U = utd(f_pre, f_ft, g) the affinity UTD of the same change on the same
    grid, in U's dtype."""
    U = utd(f_pre, f_ft, g)
    return norm_matched(matrix, U).to(U.dtype)
