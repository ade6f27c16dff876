"""Pure tensor math of the method: descriptors, the two-sided ridge solve, OrthoReg, similarity.

Nothing here knows about models, files or families; every function takes and returns tensors.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from .errors import ShapeError, check_finite

__all__ = [
    "utd",
    "ridge_solver",
    "ridge_operator",
    "head_update",
    "orthoreg_penalty",
    "descriptor_cosine",
    "unit_rows",
    "edited_embeddings",
    "first_order_change",
]


def unit_rows(x: Tensor) -> Tensor:
    """Rows scaled to unit L2 norm: x_i / ||x_i||."""
    return torch.nn.functional.normalize(x, dim=-1)


def utd(f_pre: Tensor, f_ft: Tensor, g: Tensor) -> Tensor:
    """Universal Task Descriptor: UTD[i, j] = <f_ft_i, g_j> - <f_pre_i, g_j> on unit-norm rows (P x M)."""
    if f_pre.ndim != 2 or f_ft.shape != f_pre.shape:
        raise ShapeError(f"f_pre and f_ft must be matching P x d matrices, got {tuple(f_pre.shape)} and {tuple(f_ft.shape)}")
    if g.ndim != 2 or g.shape[1] != f_pre.shape[1]:
        raise ShapeError(f"g must be M x d with d={f_pre.shape[1]}, got {tuple(g.shape)}")
    g = unit_rows(g)
    return (unit_rows(f_ft) - unit_rows(f_pre)) @ g.T


def _ridge_inverse(m: Tensor, relative: float) -> tuple[Tensor, Tensor]:
    """Thin SVD m = U S V^T, returned as (V diag(s/(s^2+mu)), U) with mu = relative * mean(s^2).

    V diag(s/(s^2+mu)) U^T equals (m^T m + mu I)^{-1} m^T, the ridge pseudo-inverse of m.
    """
    u, s, vh = torch.linalg.svd(m.to(torch.float64), full_matrices=False)
    mu = relative * (s.square().mean() if s.numel() else torch.zeros((), dtype=s.dtype))
    shrink = s / (s.square() + mu) if mu > 0 else torch.where(s > 0, 1.0 / s.clamp_min(1e-300), 0.0)
    return vh.T * shrink, u


def ridge_solver(F: Tensor, G: Tensor, ridge_a: float = 1e-2, ridge_b: float = 1e-6) -> Callable[[Tensor], Tensor]:
    """Factorise F (P x q) and G (M x d) once; return U (P x M) -> A = X*^T (d x q).

    X* = argmin ||F X G^T - U||^2 + mu_b ||F X||^2 + mu_a ||X G^T||^2 + mu_a mu_b ||X||^2
       = (F^T F + mu_a I)^{-1} F^T U G (G^T G + mu_b I)^{-1},
    with mu_a = ridge_a * mean(sigma(F)^2) and mu_b = ridge_b * mean(sigma(G)^2). Solved in float64,
    returned in F's dtype. When F holds the target's embeddings, A acts on them as f -> f + A f.
    """
    if F.ndim != 2 or G.ndim != 2:
        raise ShapeError(f"F and G must be matrices, got shapes {tuple(F.shape)} and {tuple(G.shape)}")
    for name, val in (("ridge_a", ridge_a), ("ridge_b", ridge_b)):
        if not (val >= 0 and val == val and val != float("inf")):
            raise ValueError(f"{name} must be a finite non-negative number, got {val!r}")
    check_finite(F, "F")
    check_finite(G, "G")
    left_v, left_u = _ridge_inverse(F, ridge_a)  # (F^T F + mu_a)^-1 F^T = left_v @ left_u^T
    right_v, right_u = _ridge_inverse(G, ridge_b)  # G (G^T G + mu_b)^-1 = right_u @ right_v^T
    out_dtype, P, M = F.dtype, F.shape[0], G.shape[0]

    def solve(U: Tensor) -> Tensor:
        if U.shape != (P, M):
            raise ShapeError(f"descriptor has shape {tuple(U.shape)}, but the grid is {P} probes x {M} prompts")
        check_finite(U, "descriptor")
        core = left_u.T @ U.to(device=left_u.device, dtype=torch.float64) @ right_u  # r_F x r_G
        X = left_v @ core @ right_v.T  # q x d
        return X.T.to(out_dtype)

    return solve


def ridge_operator(F: Tensor, G: Tensor, U: Tensor, ridge_a: float = 1e-2, ridge_b: float = 1e-6) -> Tensor:
    """One-shot two-sided ridge solve: the d x d operator A with f -> f + A f (see ridge_solver)."""
    return ridge_solver(F, G, ridge_a, ridge_b)(U)


def head_update(H: Tensor, G: Tensor, U: Tensor, ridge_a: float = 1e-2, ridge_b: float = 1e-6) -> tuple[Tensor, Tensor]:
    """Residual-head solve: rows of H are [u; 1] / ||z||; returns (dW_2, db_2) for the head's last affine.

    The first-order affinity change of W_2 += dW, b_2 += db is H [dW^T; db^T] G^T, fitted to U by
    the same two-sided ridge problem as ridge_solver with F replaced by H.
    """
    A = ridge_operator(H, G, U, ridge_a, ridge_b)  # d x (h + 1)
    return A[:, :-1], A[:, -1]


def orthoreg_penalty(delta: Tensor, squared: bool = False) -> Tensor:
    """OrthoReg: ||Gram(delta) - I||_F with Gram the smaller of delta delta^T, delta^T delta (squared optional)."""
    if delta.ndim != 2:
        raise ShapeError(f"orthoreg_penalty needs a 2-D update, got shape {tuple(delta.shape)}")
    gram = delta @ delta.T if delta.shape[0] <= delta.shape[1] else delta.T @ delta
    diff = gram - torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
    sq = diff.square().sum()
    # sqrt has an infinite derivative at 0; the penalty's true gradient is finite there, so guard it.
    return sq if squared else torch.sqrt(sq.clamp_min(torch.finfo(sq.dtype).tiny))


def descriptor_cosine(a: Tensor, b: Tensor) -> float:
    """Cosine between two flattened descriptors of the same shape."""
    if a.shape != b.shape:
        raise ShapeError(f"descriptors on different grids cannot be compared: {tuple(a.shape)} vs {tuple(b.shape)}")
    a64, b64 = a.reshape(-1).double(), b.reshape(-1).double()
    denom = a64.norm() * b64.norm()
    return float(a64 @ b64 / denom) if denom > 0 else 0.0


def edited_embeddings(S: Tensor, Z: Tensor, A: Tensor, alpha: float) -> Tensor:
    """Exact raw embeddings after folding z -> z + alpha A s at the last affine site: Z + alpha S A^T."""
    if S.shape[0] != Z.shape[0] or A.shape != (Z.shape[1], S.shape[1]):
        raise ShapeError(f"operator {tuple(A.shape)} does not fit site inputs {tuple(S.shape)} and embeddings {tuple(Z.shape)}")
    return Z + alpha * (S @ A.to(S.dtype).T)


def first_order_change(S: Tensor, Z: Tensor, A: Tensor, G: Tensor) -> Tensor:
    """d/d alpha of <normalize(z + alpha A s), g> at alpha = 0, per probe and landmark (P x M).

    With D = (S A^T) / ||z|| and f = z / ||z||: D G^T - (rowsum(D * f)) (f G^T). The solve fits only
    the first term (METHOD sec. 4); the second is the renormalisation's radial correction.
    """
    norms = Z.norm(dim=1, keepdim=True)
    D = (S @ A.to(S.dtype).T) / norms
    f = Z / norms
    G = unit_rows(G)
    return D @ G.T - (D * f).sum(1, keepdim=True) * (f @ G.T)
