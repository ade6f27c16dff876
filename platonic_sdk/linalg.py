"""Pure tensor math of the method: descriptors, the two-sided ridge solve, OrthoReg, similarity.

Nothing here knows about models, files or families; every function takes and returns tensors.
"""

from __future__ import annotations

import attrs
import torch
from torch import Tensor

from .errors import ShapeError, check_finite
from .ridge import RIDGE_A, RIDGE_B

__all__ = [
    "utd",
    "RidgePinv",
    "RidgeSolver",
    "ridge_pinv",
    "ridge_solver",
    "ridge_operator",
    "head_update",
    "orthoreg_penalty",
    "descriptor_cosine",
    "unit_rows",
    "edited_embeddings",
    "first_order_change",
    "procrustes_map",
    "lstsq_map",
    "ridge_lstsq",
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


# Past this condition number of (Gram + mu I) the squared-Gram route could lose more than ~1e-11
# relative accuracy (error ~ eps * cond), so that side is factorised by an SVD instead.
MAX_GRAM_CONDITION = 1e5


@attrs.frozen(eq=False)
class RidgePinv:
    """A ridge pseudo-inverse (m^T m + mu I)^{-1} m^T kept factored as outer @ inner^T (cols x r, rows x r)."""

    outer: Tensor
    inner: Tensor

    def dense(self) -> Tensor:
        """The cols x rows matrix (m^T m + mu I)^{-1} m^T."""
        return self.outer @ self.inner.T


def relative_ridge(m: Tensor, relative: float) -> Tensor:
    """mu = relative * mean(sigma(m)^2) over min(rows, cols) singular values = relative * ||m||_F^2 / min(rows, cols)."""
    return relative * m.double().square().sum() / min(m.shape)


def ridge_pinv(m: Tensor, relative: float, method: str = "svd") -> RidgePinv:
    """(m^T m + mu I)^{-1} m^T in float64 with mu = relative * mean(sigma(m)^2) over min(rows, cols) values.

    "svd": thin SVD m = U S V^T, outer = V diag(s / (s^2 + mu)), inner = U.
    "gram": eigendecomposition of the smaller Gram (tall: outer = (m^T m + mu I)^{-1}, inner = m; wide:
    outer = m^T, inner = (m m^T + mu I)^{-1}); falls back to "svd" when mu = 0 or the regularised Gram's
    condition number exceeds MAX_GRAM_CONDITION.
    """
    if m.ndim != 2 or 0 in m.shape:
        raise ShapeError(f"a ridge pseudo-inverse needs a non-empty matrix, got shape {tuple(m.shape)}")
    if method not in ("svd", "gram"):
        raise ValueError(f"unknown ridge method {method!r} (use 'svd' or 'gram')")
    m = m.to(torch.float64)
    if method == "gram":
        wide = m.shape[1] > m.shape[0]
        values, vectors = torch.linalg.eigh(m @ m.T if wide else m.T @ m)
        values = values.clamp_min(0)
        mu = relative_ridge(m, relative)
        if mu > 0 and (values[-1] + mu) <= MAX_GRAM_CONDITION * (values[0] + mu):
            inverse = (vectors / (values + mu)) @ vectors.T  # (Gram + mu I)^{-1}
            return RidgePinv(m.T, inverse) if wide else RidgePinv(inverse, m)
    u, s, vh = torch.linalg.svd(m, full_matrices=False)
    mu = relative_ridge(m, relative)
    shrink = s / (s.square() + mu) if mu > 0 else torch.where(s > 0, 1.0 / s.clamp_min(1e-300), 0.0)
    return RidgePinv(vh.T * shrink, u)


def _check_stack(descriptors: Tensor, P: int, M: int) -> None:
    """Refuse a descriptor stack that is not a non-empty, finite B x P x M tensor."""
    if descriptors.ndim != 3 or descriptors.shape[1:] != (P, M) or descriptors.shape[0] == 0:
        raise ShapeError(f"descriptors have shape {tuple(descriptors.shape)}, but the grid is {P} probes x {M} prompts")
    check_finite(descriptors, "descriptor")


@attrs.frozen(eq=False)
class RidgeSolver:
    """The factored two-sided ridge solve of one (F, G): U -> A = X*(U)^T, for one descriptor or a stack.

    X*(U) = pinv_a(F) U pinv_b(G)^T = Fo (Fi^T U Gi) Go^T, computed in float64 on the factors' device
    and returned in F's dtype.
    """

    left: RidgePinv
    right: RidgePinv
    dtype: torch.dtype

    @property
    def grid_shape(self) -> tuple[int, int]:
        """(P, M): the shape every descriptor must have."""
        return self.left.inner.shape[0], self.right.inner.shape[0]

    @property
    def operator_shape(self) -> tuple[int, int]:
        """(d, q): the shape of each operator."""
        return self.right.outer.shape[0], self.left.outer.shape[0]

    @property
    def device(self) -> torch.device:
        return self.left.outer.device

    def many(self, descriptors: Tensor) -> Tensor:
        """Operators (B x d x q) of a stack of B descriptors (B x P x M): one GEMM plus batched products."""
        P, M = self.grid_shape
        _check_stack(descriptors, P, M)
        B = descriptors.shape[0]
        U = descriptors.to(device=self.device, dtype=torch.float64)
        stacked = U.transpose(0, 1).reshape(P, B * M)  # [U_1 ... U_B]
        core = (self.left.inner.T @ stacked).reshape(-1, B, M).transpose(0, 1) @ self.right.inner
        X = (self.left.outer @ core) @ self.right.outer.T  # B x q x d
        return X.transpose(1, 2).to(self.dtype)

    def __call__(self, U: Tensor) -> Tensor:
        """The operator A = X*(U)^T (d x q) of one descriptor U (P x M)."""
        if U.shape != self.grid_shape:
            P, M = self.grid_shape
            raise ShapeError(f"descriptor has shape {tuple(U.shape)}, but the grid is {P} probes x {M} prompts")
        return self.many(U[None])[0]


def ridge_solver(F: Tensor, G: Tensor, ridge_a: float = RIDGE_A, ridge_b: float = RIDGE_B, method: str = "svd") -> RidgeSolver:
    """Factorise F (P x q) and G (M x d) once; return U (P x M) -> A = X*^T (d x q).

    X* = argmin ||F X G^T - U||^2 + mu_b ||F X||^2 + mu_a ||X G^T||^2 + mu_a mu_b ||X||^2
       = (F^T F + mu_a I)^{-1} F^T U G (G^T G + mu_b I)^{-1},
    with mu_a = ridge_a * mean(sigma(F)^2) and mu_b = ridge_b * mean(sigma(G)^2). Solved in float64 on
    F's device (`method` "svd" or the faster "gram", see ridge_pinv), returned in F's dtype. When F holds
    the target's embeddings, A acts on them as f -> f + A f.
    """
    if F.ndim != 2 or G.ndim != 2:
        raise ShapeError(f"F and G must be matrices, got shapes {tuple(F.shape)} and {tuple(G.shape)}")
    for name, val in (("ridge_a", ridge_a), ("ridge_b", ridge_b)):
        if not (val >= 0 and val != float("inf")):
            raise ValueError(f"{name} must be a finite non-negative number, got {val!r}")
    check_finite(F, "F")
    check_finite(G, "G")
    return RidgeSolver(ridge_pinv(F, ridge_a, method), ridge_pinv(G.to(F.device), ridge_b, method), F.dtype)


def _inverse_sqrt(m: Tensor) -> Tensor:
    """m^{-1/2} of a symmetric positive semi-definite matrix (its null space maps to 0)."""
    values, vectors = torch.linalg.eigh(m)
    keep = values > values.max().clamp_min(0) * 1e-12
    return (vectors[:, keep] / values[keep].sqrt()) @ vectors[:, keep].T


@attrs.frozen(eq=False)
class AnchoredSolver:
    """The two-sided ridge solve of (F, G) holding anchor probes F_o on the anchors' landmarks G_o:

    X* = argmin ||F X G^T - U||^2 + mu_b ||F X||^2 + mu_a ||X G^T||^2 + mu_a mu_b ||X||^2
                + ||F_o X G_o^T||^2 + mu_o ||F_o X||^2,
    F_o the anchors' probe rows stacked, G_o their landmarks stacked, mu_o = ridge_b * mean(sigma(G_o)^2).
    Normal equation: L X R + a X b = F^T U G with L = F^T F + mu_a I, R = G^T G + mu_b I, a = F_o^T F_o,
    b = G_o^T G_o + mu_o I. With X = L^{-1/2} Y R^{-1/2} it reads Y + a~ Y b~ = L^{-1/2} F^T U G R^{-1/2};
    in the eigenbases of a~ = P diag(l) P^T and b~ = Q diag(s) Q^T it is diagonal: (P^T Y Q)_ij (1 + l_i s_j)
    = (P^T C~ Q)_ij. Exact, in float64, two eigendecompositions per (grid, anchors).
    """

    F: Tensor
    G: Tensor
    left: Tensor  # P^T L^{-1/2}  (q x q)
    right: Tensor  # R^{-1/2} Q  (d x d)
    gain: Tensor  # 1 / (1 + l_i s_j)  (q x d)
    dtype: torch.dtype

    @property
    def grid_shape(self) -> tuple[int, int]:
        return self.F.shape[0], self.G.shape[0]

    def many(self, descriptors: Tensor) -> Tensor:
        """Operators (B x d x q) of a stack of descriptors (B x P x M)."""
        P, M = self.grid_shape
        _check_stack(descriptors, P, M)
        C = self.F.T @ descriptors.to(device=self.F.device, dtype=torch.float64) @ self.G  # F^T U G, B x q x d
        X = self.left.T @ ((self.left @ C @ self.right) * self.gain) @ self.right.T
        return X.transpose(1, 2).to(self.dtype)

    def __call__(self, U: Tensor) -> Tensor:
        """The operator A = X*(U)^T (d x q) of one descriptor U (P x M)."""
        return self.many(U[None])[0]


def anchored_solver(F: Tensor, G: Tensor, F_o: Tensor, G_o: Tensor, ridge_a: float = RIDGE_A,
                    ridge_b: float = RIDGE_B) -> AnchoredSolver:
    """Factorise the solve of (F, G) with anchor rows F_o held on landmarks G_o (AnchoredSolver), ridges
    relative as in ridge_solver."""
    for name, m in (("F", F), ("G", G), ("anchor rows", F_o), ("anchor landmarks", G_o)):
        if m.ndim != 2 or 0 in m.shape:
            raise ShapeError(f"{name} must be a non-empty matrix, got shape {tuple(m.shape)}")
        check_finite(m, name)
    if F_o.shape[1] != F.shape[1] or G_o.shape[1] != G.shape[1]:
        raise ShapeError(f"anchors have widths {F_o.shape[1]} and {G_o.shape[1]}, F and G {F.shape[1]} and {G.shape[1]}")
    F64, G64, Fo, Go = (m.to(device=F.device, dtype=torch.float64) for m in (F, G, F_o, G_o))
    eye_q = torch.eye(F.shape[1], dtype=torch.float64, device=F.device)
    eye_d = torch.eye(G.shape[1], dtype=torch.float64, device=F.device)
    L_isqrt = _inverse_sqrt(F64.T @ F64 + relative_ridge(F64, ridge_a) * eye_q)
    R_isqrt = _inverse_sqrt(G64.T @ G64 + relative_ridge(G64, ridge_b) * eye_d)
    l, P = torch.linalg.eigh(L_isqrt @ (Fo.T @ Fo) @ L_isqrt)
    s, Q = torch.linalg.eigh(R_isqrt @ (Go.T @ Go + relative_ridge(Go, ridge_b) * eye_d) @ R_isqrt)
    gain = 1.0 / (1.0 + l.clamp_min(0)[:, None] * s.clamp_min(0)[None, :])
    return AnchoredSolver(F64, G64, P.T @ L_isqrt, R_isqrt @ Q, gain, F.dtype)


def ridge_operator(F: Tensor, G: Tensor, U: Tensor, ridge_a: float = RIDGE_A, ridge_b: float = RIDGE_B) -> Tensor:
    """One-shot two-sided ridge solve: the d x q operator A with f -> f + A f (see ridge_solver)."""
    return ridge_solver(F, G, ridge_a, ridge_b)(U)


def head_update(H: Tensor, G: Tensor, U: Tensor, ridge_a: float = RIDGE_A, ridge_b: float = RIDGE_B) -> tuple[Tensor, Tensor]:
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


def edited_embeddings(S: Tensor, Z: Tensor, A: Tensor, strength: float) -> Tensor:
    """Exact raw embeddings after folding z -> z + c A s (c = `strength`) at the last affine site: Z + c S A^T."""
    if S.shape[0] != Z.shape[0] or A.shape != (Z.shape[1], S.shape[1]):
        raise ShapeError(f"operator {tuple(A.shape)} does not fit site inputs {tuple(S.shape)} and embeddings {tuple(Z.shape)}")
    return Z + strength * (S @ A.to(S.dtype).T)


def first_order_change(S: Tensor, Z: Tensor, A: Tensor, G: Tensor) -> Tensor:
    """d/dc of <normalize(z + c A s), g> at strength c = 0, per probe and landmark (P x M).

    With D = (S A^T) / ||z|| and f = z / ||z||: D G^T - (rowsum(D * f)) (f G^T). The solve fits only
    the first term (docs/method.md sec. 4); the second is the renormalisation's radial correction.
    """
    norms = Z.norm(dim=1, keepdim=True)
    D = (S @ A.to(S.dtype).T) / norms
    f = Z / norms
    G = unit_rows(G)
    return D @ G.T - (D * f).sum(1, keepdim=True) * (f @ G.T)


# ------------------------------------------------------------------ the alignment baseline (docs/method.md sec. 16)
def _centred64(x: Tensor) -> Tensor:
    x = x.detach().to(torch.float64)
    return x - x.mean(dim=0, keepdim=True)


def _check_pair(X_s: Tensor, X_t: Tensor) -> None:
    if X_s.ndim != 2 or X_t.ndim != 2 or X_s.shape[0] != X_t.shape[0] or X_s.shape[0] < 2:
        raise ShapeError(f"a map between embedding spaces needs two P x d matrices of the same P >= 2 rows, "
                         f"got {tuple(X_s.shape)} and {tuple(X_t.shape)}")
    check_finite(X_s, "source embeddings")
    check_finite(X_t, "target embeddings")


def procrustes_map(X_s: Tensor, X_t: Tensor) -> Tensor:
    """Orthogonal Procrustes between widths: R = U V^T (d_s x d_t) from the thin SVD U S V^T of the centred
    cross-covariance C = (X_s - mean)^T (X_t - mean), the semi-orthogonal map (R R^T = I or R^T R = I) that
    maximises tr(R^T C). For d_s <= d_t it minimises ||(X_s - mean) R - (X_t - mean)||_F exactly; for
    d_s > d_t, where ||X_s R|| depends on R, it is the usual closed-form choice. Where the probes do not
    determine it (C of rank r < min(d_s, d_t), e.g. fewer probes than width), R = U_r V_r^T over the singular
    values above 1e-10 of the largest: a partial isometry, zero off the probes' span, instead of an
    arbitrary completion. Float64, in X_s's dtype."""
    _check_pair(X_s, X_t)
    u, s, vh = torch.linalg.svd(_centred64(X_s).T @ _centred64(X_t), full_matrices=False)
    keep = s > s[0] * 1e-10 if len(s) and s[0] > 0 else torch.zeros_like(s, dtype=torch.bool)
    return (u[:, keep] @ vh[keep]).to(X_s.dtype)


def lstsq_map(X_s: Tensor, X_t: Tensor) -> Tensor:
    """The least-squares R (d_s x d_t) minimising ||(X_s - mean) R - (X_t - mean)||_F (the minimum-norm
    one when the centred rows do not determine it). Float64, returned in X_s's dtype."""
    _check_pair(X_s, X_t)
    return (torch.linalg.pinv(_centred64(X_s)) @ _centred64(X_t)).to(X_s.dtype)


def ridge_lstsq(F: Tensor, target: Tensor, ridge_a: float = RIDGE_A) -> Tensor:
    """The operator A (d x q) minimising ||F A^T - T||_F^2 + mu_a ||A||_F^2, mu_a = ridge_a * mean(sigma(F)^2)
    (the closed form's left ridge): A^T = (F^T F + mu_a I)^{-1} F^T T, for rows F (P x q) and target
    changes T (P x d). Float64 on F's device, returned in F's dtype."""
    if F.ndim != 2 or target.ndim != 2 or target.shape[0] != F.shape[0]:
        raise ShapeError(f"F must be P x q and the target P x d, got {tuple(F.shape)} and {tuple(target.shape)}")
    if not (ridge_a >= 0 and ridge_a != float("inf")):
        raise ValueError(f"ridge_a must be a finite non-negative number, got {ridge_a!r}")
    check_finite(F, "F")
    check_finite(target, "target change")
    pinv = ridge_pinv(F, ridge_a)
    return (pinv.dense() @ target.to(device=F.device, dtype=torch.float64)).T.to(F.dtype)
