"""Weight-space merging methods as plug-ins: T task vectors on the same tensors -> one merged vector.

`weightspace.merge(vectors, method, **params)` returns tau_merged; the merged model is theta_pre + c * tau_merged
with c chosen on validation (evaluate/selection.py). A new method is one function
`fn(deltas, **params) -> deltas` (a list of {name: float64 tensor}, one per task) plus a
`register_merge_method` call. "Matrix" below means a 2-D tensor; everything is computed in float64
and returned in the vectors' dtype.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import attrs
import torch
from torch import Tensor

from ..errors import PlatonicError
from ..named_registry import NamedRegistry

Deltas = dict[str, Tensor]
MergeFn = Callable[..., Deltas]


@attrs.frozen
class MergeMethod:
    """One merging method: `fn(deltas, **params)` maps the per-task deltas to the merged deltas."""

    name: str
    fn: MergeFn
    description: str = ""


_METHODS: NamedRegistry[MergeMethod] = NamedRegistry("merge method", taken_error=ValueError)


def register_merge_method(method: MergeMethod, *, replace: bool = False) -> MergeMethod:
    """Make `method.name` usable through `merge`."""
    return _METHODS.register(method.name, method, replace=replace)


def merge_methods() -> list[str]:
    """Names of the registered merging methods, in registration order."""
    return _METHODS.names()


def merge_method(name: str) -> MergeMethod:
    """The registered method `name`, or PlatonicError listing the known ones."""
    return _METHODS.lookup(name)


# ---------------------------------------------------------------------------- methods
def task_arithmetic(deltas: Sequence[Deltas]) -> Deltas:
    """sum_t tau_t."""
    return {n: sum(d[n] for d in deltas) for n in deltas[0]}


def _fraction(value: float, what: str, low_open: bool) -> float:
    value = float(value)
    ok = (0 < value <= 1) if low_open else (0 <= value < 1)
    if not ok:
        raise PlatonicError(f"{what} must be in {'(0, 1]' if low_open else '[0, 1)'}, got {value}")
    return value


def trim(delta: Deltas, keep: float) -> Deltas:
    """Zero all but the ceil(keep * N) largest-magnitude entries of the whole vector (N entries over
    all its tensors together; entries tied with the smallest kept magnitude are kept too)."""
    flat = torch.cat([d.abs().reshape(-1) for d in delta.values()])
    k = max(1, math.ceil(keep * flat.numel() - 1e-9))
    threshold = torch.kthvalue(flat.cpu(), flat.numel() - k + 1).values.item()
    return {n: torch.where(d.abs() >= threshold, d, torch.zeros_like(d)) for n, d in delta.items()}


def ties(deltas: Sequence[Deltas], keep: float = 0.2) -> Deltas:
    """TIES: trim each vector to its top `keep` fraction; elect s = sign(sum_t trimmed_t) per entry;
    average the trimmed entries whose sign is s (0 where none is)."""
    keep = _fraction(keep, "TIES keep fraction", low_open=True)
    trimmed = [trim(d, keep) for d in deltas]
    out = {}
    for n in deltas[0]:
        stack = torch.stack([t[n] for t in trimmed])
        elected = torch.sign(stack.sum(0))
        agree = (torch.sign(stack) == elected) & (stack != 0)
        count = agree.sum(0)
        out[n] = torch.where(count > 0, (stack * agree).sum(0) / count.clamp(min=1), torch.zeros_like(stack[0]))
    return out


def dare(deltas: Sequence[Deltas], p: float = 0.5, seed: int = 0, then: str = "task_arithmetic", keep: float = 0.2) -> Deltas:
    """DARE: drop each entry with probability p (seeded), rescale the rest by 1 / (1 - p), then merge
    by task arithmetic or by TIES (`then="ties"`, with its `keep`)."""
    p = _fraction(p, "DARE drop probability", low_open=False)
    if then not in ("task_arithmetic", "ties"):
        raise PlatonicError(f"DARE merges by 'task_arithmetic' or 'ties' afterwards, got then={then!r}")
    generator = torch.Generator().manual_seed(int(seed))
    dropped = []
    for d in deltas:
        masks = {n: torch.rand(t.shape, generator=generator, dtype=torch.float64) >= p for n, t in d.items()}
        dropped.append({n: t * masks[n].to(t.device) / (1.0 - p) for n, t in d.items()})
    return ties(dropped, keep) if then == "ties" else task_arithmetic(dropped)


RANK_RTOL = torch.finfo(torch.float32).eps  # numerical rank: sigma > sigma_max * max(m, n) * RANK_RTOL


def _svd(M: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Reduced SVD of M truncated to its numerical rank. The singular vectors of (numerically) zero
    singular values span an arbitrary basis of the null space, fixed by rounding noise (a rank-r LoRA
    update has min(m, n) - r of them): nothing may depend on them."""
    U, S, Vt = torch.linalg.svd(M, full_matrices=False)
    keep = int((S > S[0] * max(M.shape) * RANK_RTOL).sum()) if S.numel() and S[0] > 0 else 0
    return U[:, :keep], S[:keep], Vt[:keep]


def _polar(M: Tensor) -> Tensor:
    """The nearest matrix with orthonormal columns (or rows) to M: P Q^T for M = P D Q^T."""
    P, _, Qt = torch.linalg.svd(M, full_matrices=False)
    return P @ Qt


def tsv(deltas: Sequence[Deltas]) -> Deltas:
    """TSV-M: per matrix, each task's top k = max(1, floor(min(m, n) / T)) singular triplets (of its
    numerical rank: `_svd`); stack U = [U_1 .. U_T], S, V = [V_1 .. V_T]; return polar(U) diag(S)
    polar(V)^T. Other tensors: the mean over tasks (as the authors do)."""
    T = len(deltas)
    out = {}
    for n, first in deltas[0].items():
        if first.ndim != 2:
            out[n] = sum(d[n] for d in deltas) / T
            continue
        k = max(1, min(first.shape) // T)
        Us, Ss, Vs = [], [], []
        for d in deltas:
            U, S, Vt = _svd(d[n])
            Us.append(U[:, :k])
            Ss.append(S[:k])
            Vs.append(Vt[:k].T)
        S = torch.cat(Ss)
        out[n] = _polar(torch.cat(Us, 1)) @ torch.diag(S) @ _polar(torch.cat(Vs, 1)).T if S.numel() else torch.zeros_like(first)
    return out


def iso_c(deltas: Sequence[Deltas]) -> Deltas:
    """Iso-C: per matrix, M = sum_t tau_t = U diag(sigma) V^T -> mean(sigma) U V^T over M's numerical
    rank (`_svd`: all min(m, n) singular values of a full-rank M); other tensors: the sum."""
    out = task_arithmetic(deltas)
    for n, M in out.items():
        if M.ndim == 2:
            U, S, Vt = _svd(M)
            out[n] = S.mean() * (U @ Vt) if S.numel() else torch.zeros_like(M)
    return out


for _method in (
    MergeMethod("task_arithmetic", task_arithmetic, "task arithmetic (the sum)"),
    MergeMethod("ties", ties, "TIES (trim, elect sign, disjoint mean)"),
    MergeMethod("dare", dare, "DARE (random drop and rescale, then sum)"),
    MergeMethod("tsv", tsv, "TSV-M (task singular vectors, orthogonalised)"),
    MergeMethod("iso_c", iso_c, "Iso-C (isotropic spectrum of the sum)"),
):
    register_merge_method(_method)
