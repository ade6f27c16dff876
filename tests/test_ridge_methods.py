"""The Gram route and stacked solves of linalg equal the SVD route and a brute-force Kronecker lstsq."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from platonic_sdk.errors import NonFiniteError, ShapeError
from platonic_sdk.linalg import ridge_pinv, ridge_solver, unit_rows


def factorise(F, G, ridge_a=1e-2, ridge_b=1e-6):
    return ridge_solver(F, G, ridge_a, ridge_b, method="gram")


def embeddings(n: int, d: int, seed: int, shared: float = 2.0) -> torch.Tensor:
    """Unit rows with a dominant shared direction, like real image/text embeddings (float64)."""
    gen = torch.Generator().manual_seed(seed)
    common = torch.randn(d, generator=gen, dtype=torch.float64)
    return unit_rows(torch.randn(n, d, generator=gen, dtype=torch.float64) + shared * common / common.norm() * d**0.5 / 4)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize(
    "P,q,M,d",
    [
        (90, 24, 3, 24),  # tall F, projection site (q = d)
        (12, 40, 4, 32),  # wide F: more width than probes
        (60, 17, 2, 16),  # residual head: q = h + 1 differs from d
        (45, 6, 9, 5),  # more landmarks than width: G is tall
    ],
)
def test_matches_ridge_solver(P: int, q: int, M: int, d: int) -> None:
    F = embeddings(P, q, 0)
    G = embeddings(M, d, 1)
    U = torch.randn(5, P, M, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * 0.1
    reference = ridge_solver(F, G)
    factors = factorise(F, G)
    assert factors.grid_shape == (P, M) and factors.operator_shape == (d, q)
    ops = factors.many(U)
    assert ops.shape == (5, d, q) and ops.dtype == torch.float64
    for b in range(5):
        assert rel(ops[b], reference(U[b])) < 1e-9


def test_matches_bruteforce_lstsq() -> None:
    """||F^ X G^^T - U^||^2 with F^ = [F; sqrt(mu_a) I], G^ = [G; sqrt(mu_b) I] is the ridge objective."""
    rng = np.random.default_rng(3)
    P, q, M, d = 7, 4, 3, 5
    F, G, U = rng.normal(size=(P, q)), rng.normal(size=(M, d)), rng.normal(size=(P, M))
    ridge_a, ridge_b = 0.3, 0.05
    mu_a = ridge_a * np.mean(np.linalg.svd(F, compute_uv=False) ** 2)
    mu_b = ridge_b * np.mean(np.linalg.svd(G, compute_uv=False) ** 2)
    F_hat = np.vstack([F, np.sqrt(mu_a) * np.eye(q)])
    G_hat = np.vstack([G, np.sqrt(mu_b) * np.eye(d)])
    U_hat = np.zeros((P + q, M + d))
    U_hat[:P, :M] = U
    # vec(F^ X G^^T) = (G^ kron F^) vec(X), column-major vec
    x, *_ = np.linalg.lstsq(np.kron(G_hat, F_hat), U_hat.reshape(-1, order="F"), rcond=None)
    X = x.reshape(q, d, order="F")
    ops = factorise(torch.from_numpy(F), torch.from_numpy(G), ridge_a, ridge_b).many(torch.from_numpy(U)[None])
    assert rel(ops[0], torch.from_numpy(X.T)) < 1e-9


def test_ill_conditioned_side_still_exact() -> None:
    """Two near-duplicate landmarks at a tiny ridge: the Gram route alone would lose digits."""
    F = embeddings(50, 12, 4)
    G = embeddings(4, 10, 5)
    G[3] = unit_rows(G[2] + 1e-7 * torch.randn(10, generator=torch.Generator().manual_seed(6), dtype=torch.float64))
    U = torch.randn(3, 50, 4, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    reference = ridge_solver(F, G, 1e-2, 1e-12)
    ops = factorise(F, G, 1e-2, 1e-12).many(U)
    for b in range(3):
        assert rel(ops[b], reference(U[b])) < 1e-9
    # the squared route on its own is measurably worse here, so the SVD fallback is what keeps it exact
    gram = G.T @ G
    mu = 1e-12 * torch.trace(gram) / 4
    naive = torch.linalg.solve(gram + mu * torch.eye(10, dtype=torch.float64), G.T)
    assert rel(naive, ridge_pinv(G, 1e-12, "gram").dense()) > 1e-9


def test_zero_ridge_is_the_pseudo_inverse() -> None:
    m = embeddings(9, 5, 8)
    wide = embeddings(4, 11, 9)
    for method in ("svd", "gram"):
        assert rel(ridge_pinv(m, 0.0, method).dense(), torch.linalg.pinv(m)) < 1e-9
        assert rel(ridge_pinv(wide, 0.0, method).dense(), torch.linalg.pinv(wide)) < 1e-9


def test_stacked_solve_keeps_the_features_dtype() -> None:
    F, G = embeddings(30, 8, 10).float(), embeddings(3, 8, 11).float()
    descriptors = [torch.randn(30, 3, generator=torch.Generator().manual_seed(s)) for s in range(3)]
    ops = factorise(F, G).many(torch.stack(descriptors))
    assert ops.dtype == torch.float32 and ops.shape == (3, 8, 8)
    reference = ridge_solver(F, G)
    for U, A in zip(descriptors, ops):
        assert rel(A.double(), reference(U).double()) < 1e-6  # float32 output rounding only


def test_bad_inputs_raise_clear_errors() -> None:
    factors = factorise(embeddings(20, 6, 12), embeddings(3, 6, 13))
    with pytest.raises(ShapeError, match="20 probes x 3 prompts"):
        factors.many(torch.zeros(2, 20, 4, dtype=torch.float64))
    with pytest.raises(ShapeError, match="20 probes x 3 prompts"):
        factors.many(torch.zeros(0, 20, 3, dtype=torch.float64))
    with pytest.raises(ShapeError, match="20 probes x 3 prompts"):
        factors.many(torch.zeros(20, 3, dtype=torch.float64))
    bad = torch.zeros(1, 20, 3, dtype=torch.float64)
    bad[0, 1, 1] = float("nan")
    with pytest.raises(NonFiniteError):
        factors.many(bad)
    with pytest.raises(ValueError, match="ridge_a"):
        factorise(embeddings(20, 6, 12), embeddings(3, 6, 13), ridge_a=-1.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu() -> None:
    F, G = embeddings(200, 64, 14), embeddings(7, 48, 15)
    U = torch.randn(6, 200, 7, generator=torch.Generator().manual_seed(16), dtype=torch.float64)
    cpu = factorise(F, G).many(U)
    gpu = factorise(F.cuda(), G.cuda()).many(U.cuda())
    assert gpu.device.type == "cuda"
    assert rel(gpu.cpu(), cpu) < 1e-9
