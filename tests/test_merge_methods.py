"""Weight-space merging methods, each against a hand computation on small tensors (numpy loops and
eigen-decompositions, independent of the torch implementation), plus the registry's contract."""

import itertools
import math

import attrs
import numpy as np
import pytest
import torch

from platonic_sdk.errors import PlatonicError
from platonic_sdk.finetune import TaskVector, merge_methods
from platonic_sdk.finetune.merging import MergeMethod, register_merge_method
from platonic_sdk.finetune.weightspace import merge

SHAPES = {"w": (4, 3), "b": (3,), "m": (3, 6)}


def _vectors(T: int, seed: int = 0, shapes=SHAPES) -> list[TaskVector]:
    rng = np.random.default_rng(seed)
    return [TaskVector({n: torch.tensor(rng.normal(size=s), dtype=torch.float32) for n, s in shapes.items()}) for _ in range(T)]


def _np(vectors: list[TaskVector]) -> list[dict[str, np.ndarray]]:
    return [{n: d.double().numpy() for n, d in v.deltas.items()} for v in vectors]


def _close(vector: TaskVector, expected: dict[str, np.ndarray], atol: float = 1e-5) -> None:
    assert set(vector.deltas) == set(expected)
    for n, e in expected.items():
        assert vector.deltas[n].dtype == torch.float32
        np.testing.assert_allclose(vector.deltas[n].double().numpy(), e, atol=atol, err_msg=n)


# ---------------------------------------------------------------------------- hand computations
def hand_sum(vs):
    out = {}
    for n in vs[0]:
        total = np.zeros_like(vs[0][n])
        for v in vs:
            for idx in np.ndindex(total.shape):
                total[idx] += v[n][idx]
        out[n] = total
    return out


def hand_trim(v, keep):
    entries = [(abs(x), n, idx) for n, a in v.items() for idx, x in np.ndenumerate(a)]
    k = max(1, math.ceil(keep * len(entries) - 1e-9))
    threshold = sorted((e[0] for e in entries), reverse=True)[k - 1]
    return {n: np.array([[x if abs(x) >= threshold else 0.0 for x in row] for row in np.atleast_2d(a)]).reshape(a.shape)
            for n, a in v.items()}


def hand_ties(vs, keep):
    trimmed = [hand_trim(v, keep) for v in vs]
    out = {}
    for n in vs[0]:
        res = np.zeros_like(vs[0][n])
        for idx in np.ndindex(res.shape):
            values = [t[n][idx] for t in trimmed]
            elected = np.sign(sum(values))
            agreeing = [x for x in values if x != 0 and np.sign(x) == elected]
            res[idx] = sum(agreeing) / len(agreeing) if agreeing else 0.0
        out[n] = res
    return out


def inv_sqrt(G):
    lam, Q = np.linalg.eigh(G)
    return Q @ np.diag(lam ** -0.5) @ Q.T


def polar(M):
    """Orthonormal factor of M from the smaller Gram matrix (no SVD)."""
    return M @ inv_sqrt(M.T @ M) if M.shape[0] >= M.shape[1] else inv_sqrt(M @ M.T) @ M


def mean_singular_value(M):
    G = M.T @ M if M.shape[0] >= M.shape[1] else M @ M.T
    return float(np.sqrt(np.clip(np.linalg.eigvalsh(G), 0, None)).sum()) / min(M.shape)


# ---------------------------------------------------------------------------- registry
def test_registry_lists_the_five_methods_and_takes_a_new_one(monkeypatch):
    import platonic_sdk.finetune.merging as mm

    assert merge_methods() == ["task_arithmetic", "ties", "dare", "tsv", "iso_c"]
    monkeypatch.setattr(mm, "_METHODS", attrs.evolve(mm._METHODS, entries=dict(mm._METHODS)))
    register_merge_method(MergeMethod("first_only", lambda deltas: dict(deltas[0]), "the first vector"))
    vs = _vectors(2)
    assert "first_only" in merge_methods()
    _close(merge(vs, "first_only"), _np(vs)[0])
    with pytest.raises(ValueError, match="already registered"):
        register_merge_method(MergeMethod("ties", lambda deltas: deltas[0]))


def test_bad_input_names_the_problem():
    vs = _vectors(2)
    with pytest.raises(PlatonicError, match="unknown merge method 'nope'.*ties"):
        merge(vs, "nope")
    with pytest.raises(PlatonicError, match="takes \\['keep'\\], got \\['kep'\\]"):
        merge(vs, "ties", kep=0.3)
    with pytest.raises(PlatonicError, match="keep fraction must be in"):
        merge(vs, "ties", keep=0.0)
    with pytest.raises(PlatonicError, match="drop probability"):
        merge(vs, "dare", p=1.0)
    with pytest.raises(PlatonicError, match="then='mean'"):
        merge(vs, "dare", then="mean")
    with pytest.raises(PlatonicError, match="non-empty list"):
        merge([], "ties")
    other = _vectors(1, shapes={"w": (4, 3), "b": (3,)})[0]
    with pytest.raises(PlatonicError, match="different architectures"):
        merge([vs[0], other], "task_arithmetic")


# ---------------------------------------------------------------------------- methods
def test_task_arithmetic_is_the_sum():
    vs = _vectors(3)
    merged = merge(vs, "task_arithmetic")
    _close(merged, hand_sum(_np(vs)))
    assert merged.metadata["merge_method"] == "task_arithmetic" and len(merged.metadata["merged"]) == 3


def test_ties_on_a_worked_example():
    # keep 0.4 of 5 entries = 2 per vector: v1 -> [3, 0, 0, 0, -4], v2 -> [-2, 0, 0, 3, 0];
    # elected signs of the sum [1, 0, 0, 3, -4]: +, 0, 0, +, -; disjoint means: [3, 0, 0, 3, -4].
    v1 = TaskVector({"x": torch.tensor([3.0, -1.0, 0.5, 2.0, -4.0])})
    v2 = TaskVector({"x": torch.tensor([-2.0, 1.0, 0.1, 3.0, -1.0])})
    assert merge([v1, v2], "ties", keep=0.4).deltas["x"].tolist() == [3.0, 0.0, 0.0, 3.0, -4.0]


@pytest.mark.parametrize("keep", [0.2, 0.5, 1.0])
def test_ties_matches_the_hand_computation(keep):
    vs = _vectors(3, seed=1)
    _close(merge(vs, "ties", keep=keep), hand_ties(_np(vs), keep))


def test_ties_trims_over_all_tensors_together():
    # every entry of "big" outweighs every entry of "small": keeping 1/2 of 8 entries keeps "big" only
    v = TaskVector({"big": torch.tensor([5.0, -6.0, 7.0, 8.0]), "small": torch.tensor([0.1, 0.2, -0.3, 0.4])})
    merged = merge([v], "ties", keep=0.5)
    assert merged.deltas["big"].tolist() == [5.0, -6.0, 7.0, 8.0] and merged.deltas["small"].tolist() == [0.0] * 4


def test_dare_drops_rescales_and_then_merges():
    vs = _vectors(2, seed=2, shapes={"w": (40, 25), "b": (50,)})
    _close(merge(vs, "dare", p=0.0), hand_sum(_np(vs)))
    _close(merge(vs, "dare", p=0.0, then="ties", keep=0.3), hand_ties(_np(vs), 0.3))
    p = 0.6
    merged = merge(vs, "dare", p=p, seed=7)
    np_vs = _np(vs)
    # each merged entry is sum_{i in S} v_i / (1 - p) for one subset S: recover S by brute force
    kept = [{n: np.zeros(a.shape, bool) for n, a in np_vs[0].items()} for _ in vs]
    for n in np_vs[0]:
        out = merged.deltas[n].double().numpy()
        for idx in np.ndindex(out.shape):
            fits = [S for r in range(len(vs) + 1) for S in itertools.combinations(range(len(vs)), r)
                    if abs(sum(np_vs[i][n][idx] for i in S) / (1 - p) - out[idx]) < 1e-4]
            assert len(fits) == 1, (n, idx, fits)
            for i in fits[0]:
                kept[i][n][idx] = True
    for k in kept:
        fraction = np.mean(np.concatenate([m.reshape(-1) for m in k.values()]))
        assert abs(fraction - (1 - p)) < 0.05  # 1,050 entries: 4 standard deviations
    dropped = [{n: np.where(k[n], v[n] / (1 - p), 0.0) for n in v} for v, k in zip(np_vs, kept)]
    _close(merge(vs, "dare", p=p, seed=7, then="ties", keep=0.5), hand_ties(dropped, 0.5))
    assert torch.equal(merge(vs, "dare", p=p, seed=7).deltas["w"], merged.deltas["w"])
    assert not torch.equal(merge(vs, "dare", p=p, seed=8).deltas["w"], merged.deltas["w"])


@pytest.mark.parametrize("T", [2, 3])
def test_tsv_matches_the_hand_computation(T):
    vs = _vectors(T, seed=3, shapes={"w": (7, 6), "b": (6,), "m": (4, 9)})
    np_vs = _np(vs)
    expected = {"b": sum(v["b"] for v in np_vs) / T}
    for n in ("w", "m"):
        k = min(np_vs[0][n].shape) // T
        parts = [np.linalg.svd(v[n], full_matrices=False) for v in np_vs]
        U = np.concatenate([u[:, :k] for u, _, _ in parts], 1)
        S = np.concatenate([s[:k] for _, s, _ in parts])
        V = np.concatenate([vt[:k].T for _, _, vt in parts], 1)
        expected[n] = polar(U) @ np.diag(S) @ polar(V).T
    _close(merge(vs, "tsv"), expected)


def test_tsv_keeps_already_orthogonal_tasks_as_their_sum():
    e = torch.eye(4)
    v1 = TaskVector({"w": 3.0 * torch.outer(e[0], e[1]) + 1.0 * torch.outer(e[1], e[2])})
    v2 = TaskVector({"w": 2.0 * torch.outer(e[2], e[0]) + 0.5 * torch.outer(e[3], e[3])})
    # T = 2 on 4x4: each task keeps its top 2 triplets (all of them); the bases are already orthonormal
    _close(merge([v1, v2], "tsv"), {"w": (v1.deltas["w"] + v2.deltas["w"]).double().numpy()})


def test_iso_c_matches_the_hand_computation():
    vs = _vectors(3, seed=4)
    total = hand_sum(_np(vs))
    expected = {n: (mean_singular_value(M) * polar(M) if M.ndim == 2 else M) for n, M in total.items()}
    _close(merge(vs, "iso_c"), expected)
    # diag(3, 1) has singular values 3 and 1: Iso-C gives 2 I
    v = TaskVector({"d": torch.diag(torch.tensor([2.0, 1.0]))})
    u = TaskVector({"d": torch.diag(torch.tensor([1.0, 0.0]))})
    _close(merge([v, u], "iso_c"), {"d": 2.0 * np.eye(2)})


def _orthonormal(n: int, k: int, seed: int) -> np.ndarray:
    return np.linalg.qr(np.random.default_rng(seed).normal(size=(n, k)))[0]


def test_low_rank_vectors_ignore_rounding_noise_in_their_null_space():
    # rank-2 LoRA-like updates on 8x6 matrices, plus float32-level noise: the null space is noise
    U1, V1, U2, V2 = _orthonormal(8, 2, 1), _orthonormal(6, 2, 2), _orthonormal(8, 2, 3), _orthonormal(6, 2, 4)
    clean = [U1 @ np.diag([3.0, 1.0]) @ V1.T, U2 @ np.diag([2.0, 0.5]) @ V2.T]
    noise = [1e-8 * np.random.default_rng(9 + i).normal(size=(8, 6)) for i in range(2)]
    def vectors(parts):
        return [TaskVector({"w": torch.tensor(p, dtype=torch.float64)}) for p in parts]
    noisy = [c + e for c, e in zip(clean, noise)]
    # Iso-C by hand: the sum has rank 4; its 4 singular values are replaced by their mean
    M = clean[0] + clean[1]
    U, S, Vt = np.linalg.svd(M)
    expected = S[:4].mean() * U[:, :4] @ Vt[:4]
    for parts in (clean, noisy):
        np.testing.assert_allclose(merge(vectors(parts), "iso_c").deltas["w"].numpy(), expected, atol=1e-6)
    # TSV-M by hand: T = 2, k = 3 per task, but each task has rank 2: its two triplets only
    U = np.concatenate([U1, U2], 1)
    V = np.concatenate([V1, V2], 1)
    expected = polar(U) @ np.diag([3.0, 1.0, 2.0, 0.5]) @ polar(V).T
    for parts in (clean, noisy):
        np.testing.assert_allclose(merge(vectors(parts), "tsv").deltas["w"].numpy(), expected, atol=1e-6)
    zero = TaskVector({"w": torch.zeros(8, 6, dtype=torch.float64)})
    assert torch.equal(merge([zero, zero], "iso_c").deltas["w"], zero.deltas["w"])
    assert torch.equal(merge([zero, zero], "tsv").deltas["w"], zero.deltas["w"])
