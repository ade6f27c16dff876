"""Batched bank solves: one Gram eigendecomposition per side and grid, every descriptor in two products.

For F (P x q) and G (M x d), X*(U) = L U R with L = (F^T F + mu_a I)^{-1} F^T (q x P) and
R = G (G^T G + mu_b I)^{-1} (M x d). Each ridge pseudo-inverse comes from the eigendecomposition of
the smaller Gram of its matrix (m^T m = V diag(s^2) V^T, or m m^T through m^T (m m^T + mu I)^{-1}),
in float64, once per grid; a stack of B descriptors then costs one GEMM (L [U_1 ... U_B]) and one
batched product with R. Results equal `linalg.ridge_solver` (same mu = relative * mean(s^2)).
"""

from __future__ import annotations

from typing import Sequence

import attrs
import torch
from torch import Tensor

from ..errors import ShapeError, check_finite
from ..linalg import _ridge_inverse

__all__ = ["GridFactors", "ridge_pinv", "factorise", "solve_bank"]

# Past this condition number of (Gram + mu I) the squared-Gram route could lose more than ~1e-11
# relative accuracy (error ~ eps * cond), so that side is factorised by an SVD instead.
MAX_GRAM_CONDITION = 1e5


def ridge_pinv(m: Tensor, relative: float) -> Tensor:
    """(m^T m + mu I)^{-1} m^T in float64, mu = relative * mean(sigma(m)^2), from the smaller Gram.

    The mean runs over the min(rows, cols) singular values, so mu = relative * trace(Gram) / min(rows, cols).
    Falls back to an SVD of m when mu = 0 or (Gram + mu I) is too ill-conditioned for the squared route.
    """
    if m.ndim != 2 or 0 in m.shape:
        raise ShapeError(f"ridge_pinv needs a non-empty matrix, got shape {tuple(m.shape)}")
    m = m.to(torch.float64)
    wide = m.shape[1] > m.shape[0]
    gram = m @ m.T if wide else m.T @ m
    values, vectors = torch.linalg.eigh(gram)
    values = values.clamp_min(0)
    mu = relative * values.sum() / min(m.shape)
    if mu <= 0 or (values[-1] + mu) > MAX_GRAM_CONDITION * (values[0] + mu):
        right, left = _ridge_inverse(m, relative)  # the SVD route of linalg: right @ left^T
        return right @ left.T
    inverse = (vectors / (values + mu)) @ vectors.T  # (Gram + mu I)^{-1}
    return m.T @ inverse if wide else inverse @ m.T


@attrs.frozen(eq=False)
class GridFactors:
    """A target's cached solve on one grid: L = ridge pinv of F (q x P), R = ridge pinv of G transposed (M x d)."""

    left: Tensor
    right: Tensor
    dtype: torch.dtype

    @property
    def grid_shape(self) -> tuple[int, int]:
        """(P, M): the shape a descriptor must have."""
        return self.left.shape[1], self.right.shape[0]

    @property
    def operator_shape(self) -> tuple[int, int]:
        """(d, q): the shape of each operator A = X*^T."""
        return self.right.shape[1], self.left.shape[0]

    @property
    def device(self) -> torch.device:
        return self.left.device


def factorise(F: Tensor, G: Tensor, ridge_a: float = 1e-2, ridge_b: float = 1e-6) -> GridFactors:
    """Factor the two-sided ridge solve of site rows F (P x q) and landmarks G (M x d) on F's device."""
    if F.ndim != 2 or G.ndim != 2:
        raise ShapeError(f"F and G must be matrices, got shapes {tuple(F.shape)} and {tuple(G.shape)}")
    for name, val in (("ridge_a", ridge_a), ("ridge_b", ridge_b)):
        if not (val >= 0 and val != float("inf")):
            raise ValueError(f"{name} must be a finite non-negative number, got {val!r}")
    check_finite(F, "F")
    check_finite(G, "G")
    left = ridge_pinv(F, ridge_a)
    right = ridge_pinv(G.to(F.device), ridge_b).T
    return GridFactors(left, right, F.dtype)


def solve_bank(factors: GridFactors, descriptors: Tensor | Sequence[Tensor]) -> Tensor:
    """Operators A_b = (L U_b R)^T (B x d x q) of a stack of B descriptors (B x P x M) on one grid.

    All descriptors are solved together: L [U_1 ... U_B] as one GEMM, then one batched product with R;
    float64 on the factors' device, returned in F's dtype.
    """
    U = descriptors if isinstance(descriptors, Tensor) else torch.stack(list(descriptors))
    if U.ndim == 2:
        raise ShapeError("solve_bank takes a stack of descriptors (B x P x M); use U[None] for one")
    P, M = factors.grid_shape
    if U.ndim != 3 or U.shape[1:] != (P, M):
        raise ShapeError(f"descriptors have shape {tuple(U.shape)}, but the grid is {P} probes x {M} prompts (B x {P} x {M})")
    check_finite(U, "descriptors")
    B = U.shape[0]
    U = U.to(device=factors.device, dtype=torch.float64)
    stacked = U.transpose(0, 1).reshape(P, B * M)  # [U_1 ... U_B]
    core = (factors.left @ stacked).reshape(-1, B, M).transpose(0, 1)  # B x q x M
    X = core @ factors.right  # B x q x d
    return X.transpose(1, 2).to(factors.dtype)
