"""Batched bank solves: one Gram eigendecomposition per side and grid, every descriptor in a few products.

For F (P x q) and G (M x d), X*(U) = pinv_a(F) U pinv_b(G)^T with the ridge pseudo-inverse
pinv_mu(m) = (m^T m + mu I)^{-1} m^T. Each comes from the eigendecomposition of the smaller Gram of
its matrix (m^T m = V diag(s^2) V^T, or m m^T through m^T (m m^T + mu I)^{-1}) in float64, once per
grid, and is kept factored (outer @ inner^T), so a stack of B descriptors costs one GEMM with
[U_1 ... U_B] and three batched products. Results equal `linalg.ridge_solver` (same mu = relative * mean(s^2)).
"""

from __future__ import annotations

from typing import Sequence

import attrs
import torch
from torch import Tensor

from ..errors import ShapeError, check_finite
from ..linalg import _ridge_inverse

__all__ = ["RidgePinv", "GridFactors", "ridge_pinv", "factorise", "solve_bank"]

# Past this condition number of (Gram + mu I) the squared-Gram route could lose more than ~1e-11
# relative accuracy (error ~ eps * cond), so that side is factorised by an SVD instead.
MAX_GRAM_CONDITION = 1e5


@attrs.frozen(eq=False)
class RidgePinv:
    """A ridge pseudo-inverse of m (rows x cols) kept factored: pinv = outer @ inner^T (cols x r, rows x r)."""

    outer: Tensor
    inner: Tensor

    def dense(self) -> Tensor:
        """The cols x rows matrix (m^T m + mu I)^{-1} m^T."""
        return self.outer @ self.inner.T


def ridge_pinv(m: Tensor, relative: float) -> RidgePinv:
    """(m^T m + mu I)^{-1} m^T in float64, mu = relative * mean(sigma(m)^2), from the smaller Gram.

    The mean runs over the min(rows, cols) singular values: mu = relative * trace(Gram) / min(rows, cols).
    Tall m: outer = (m^T m + mu I)^{-1}, inner = m; wide m: outer = m^T, inner = (m m^T + mu I)^{-1}.
    Falls back to the SVD of m (outer = V diag(s / (s^2 + mu)), inner = U) when mu = 0 or the
    regularised Gram is too ill-conditioned for the squared route.
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
        return RidgePinv(*_ridge_inverse(m, relative))  # the SVD route of linalg
    inverse = (vectors / (values + mu)) @ vectors.T  # (Gram + mu I)^{-1}
    return RidgePinv(m.T, inverse) if wide else RidgePinv(inverse, m)


@attrs.frozen(eq=False)
class GridFactors:
    """A target's cached solve on one grid: the ridge pseudo-inverses of F (left) and G (right)."""

    left: RidgePinv
    right: RidgePinv
    dtype: torch.dtype

    @property
    def grid_shape(self) -> tuple[int, int]:
        """(P, M): the shape a descriptor must have."""
        return self.left.inner.shape[0], self.right.inner.shape[0]

    @property
    def operator_shape(self) -> tuple[int, int]:
        """(d, q): the shape of each operator A = X*^T."""
        return self.right.outer.shape[0], self.left.outer.shape[0]

    @property
    def device(self) -> torch.device:
        return self.left.outer.device


def factorise(F: Tensor, G: Tensor, ridge_a: float = 1e-2, ridge_b: float = 1e-6) -> GridFactors:
    """Factor the two-sided ridge solve of site rows F (P x q) and landmarks G (M x d) on F's device."""
    if F.ndim != 2 or G.ndim != 2:
        raise ShapeError(f"F and G must be matrices, got shapes {tuple(F.shape)} and {tuple(G.shape)}")
    for name, val in (("ridge_a", ridge_a), ("ridge_b", ridge_b)):
        if not (val >= 0 and val != float("inf")):
            raise ValueError(f"{name} must be a finite non-negative number, got {val!r}")
    check_finite(F, "F")
    check_finite(G, "G")
    return GridFactors(ridge_pinv(F, ridge_a), ridge_pinv(G.to(F.device), ridge_b), F.dtype)


def solve_bank(factors: GridFactors, descriptors: Tensor | Sequence[Tensor]) -> Tensor:
    """Operators A_b = X*(U_b)^T (B x d x q) of a stack of B descriptors (B x P x M) on one grid.

    With pinv(F) = Lo Li^T and pinv(G) = Ro Ri^T: X_b = Lo (Li^T U_b Ri) Ro^T, where Li^T [U_1 ... U_B]
    is one GEMM and the rest are batched products; float64 on the factors' device, returned in F's dtype.
    """
    U = descriptors if isinstance(descriptors, Tensor) or not len(descriptors) else torch.stack(list(descriptors))
    if len(U) == 0:
        raise ShapeError("solve_bank got no descriptors")
    if U.ndim == 2:
        raise ShapeError("solve_bank takes a stack of descriptors (B x P x M); use U[None] for one")
    P, M = factors.grid_shape
    if U.ndim != 3 or U.shape[1:] != (P, M):
        raise ShapeError(f"descriptors have shape {tuple(U.shape)}, but the grid is {P} probes x {M} prompts (B x {P} x {M})")
    check_finite(U, "descriptors")
    B = U.shape[0]
    left, right = factors.left, factors.right
    stacked = U.to(device=factors.device, dtype=torch.float64).transpose(0, 1).reshape(P, B * M)  # [U_1 ... U_B]
    core = (left.inner.T @ stacked).reshape(-1, B, M).transpose(0, 1) @ right.inner  # B x r_F x r_G
    X = (left.outer @ core) @ right.outer.T  # B x q x d
    return X.transpose(1, 2).to(factors.dtype)
