"""A strength that spends a budget of accuracy points on labelled keep sets (docs/method.md sec. 18).

A labelled keep set is n items with labels y, seen by the target as site inputs S, raw embeddings Z and landmarks G.
Folded at strength c, the edit predicts argmax_j (a_ij + c b_ij) with a = Z G^T, b = S (A^T G^T) (G unit rows:
normalising z + c A s moves no argmax), so every strength's predictions are exact without a forward pass. At c,
n_down items turn from right to wrong and n_up from wrong to right; the drop in points and its one-sided upper bound
at confidence q (Bonett and Price's adjusted Wald interval for a difference of paired proportions, z = Phi^-1(q)):

    p_d = (n_down + 1) / (n + 2),   p_u = (n_up + 1) / (n + 2)
    drop(c)  = 100 (p_d - p_u)
    bound(c) = drop(c) + 100 z sqrt((p_d + p_u - (p_d - p_u)^2) / (n + 2))

The pseudo-counts keep the bound honest where nothing flipped. A set too small for one flipped item to read within
the budget (`fewest_items`) would stop an edit at its first flip whatever its drop; it is read without its labels, as a
grid's probes are (`kept_strength`). The strength is the last one of `strengths` before the first at which
any kept set's bound exceeds the budget, never past `cap`. Stopping at the first crossing, not at the last strength
under the budget, is what the confidence rests on: for a drop that grows with c past the budget at c_B, stopping past
a strength c' > c_B needs the bound to read under the budget at that one fixed c', which happens with probability at
most 1 - q; so with confidence q the drop on each kept set is at most the budget.
"""

from __future__ import annotations

import functools
import weakref
from statistics import NormalDist
from typing import Callable, Sequence

import attrs
import torch
from torch import Tensor

from ..errors import PlatonicError, check_strength
from ..linalg import unit_rows
from . import DEFAULT_BUDGET, DEFAULT_CONFIDENCE, ProbeGrid, RuleFn  # noqa: F401  (the defaults: re-exported)
from .first_order import fitted

STEP = 1 / 64  # the strengths searched: 0, STEP, 2 STEP, ..., SEARCH_END
SEARCH_END = 4.0
SEARCH = tuple(k * STEP for k in range(round(SEARCH_END / STEP) + 1))
_CHUNK = 1 << 22  # logits held at once (strengths x items x classes)
_UNEDITED: "weakref.WeakKeyDictionary[ProbeGrid, tuple[Tensor, Tensor, Tensor, Tensor]]" = weakref.WeakKeyDictionary()
_LABELLED: "weakref.WeakKeyDictionary[ProbeGrid, tuple[Tensor, Tensor, Tensor, Tensor, Tensor]]" = weakref.WeakKeyDictionary()
_INF = torch.tensor(torch.inf, dtype=torch.float64)


def z_score(confidence: float) -> float:
    """z = Phi^-1(confidence), the one-sided normal quantile; confidence strictly between 0.5 and 1."""
    q = check_strength(confidence, "confidence")
    if not 0.5 < q < 1.0:
        raise PlatonicError(f"confidence is a probability between 0.5 and 1 (e.g. 0.84), got {confidence!r}")
    return NormalDist().inv_cdf(q)


def check_budget(budget: float) -> float:
    """`budget` as a positive number of accuracy points, or PlatonicError."""
    points = check_strength(budget, "budget")
    if points <= 0:
        raise PlatonicError(f"budget is the accuracy points a kept set may lose, a positive number; got {budget!r}")
    return points


@functools.lru_cache(maxsize=64)
def fewest_items(budget: float, confidence: float) -> int:
    """The fewest labelled items n whose bound reads one flipped item (n_down = 1, n_up = 0) within `budget` points."""
    budget, z = check_budget(budget), z_score(confidence)
    one = torch.ones(1, dtype=torch.long)
    over = lambda n: float(drop_bound(one, 0 * one, n, z)[1]) > budget  # noqa: E731  decreasing in n
    high = 1
    while over(high):
        high *= 2
    low = high // 2  # over(low) holds, or low is 0
    while high - low > 1:
        low, high = (low, (low + high) // 2) if not over((low + high) // 2) else ((low + high) // 2, high)
    return high


def logits(view: ProbeGrid, A: Tensor) -> tuple[Tensor, Tensor]:
    """(a, b), n x M each, float64: the keep set's logits folded at strength c are a + c b, a = Z G^T and b = S (A^T G^T)
    (G unit rows; associated to cost n q M, not n q d). Classes whose landmarks are the same row get the first one's
    columns, so that they tie exactly (as they do in exact arithmetic) whatever order the products summed in. `a` is
    kept per keep set: every edit a rule weighs on it reads the same one."""
    return _logits(view, A.detach().cpu().double().T)


def _logits(view: ProbeGrid, A_t: Tensor) -> tuple[Tensor, Tensor]:
    """`logits` from A_t = A^T in float64 (converted once per edit, whatever the number of keep sets)."""
    S, a, G, first = _unedited(view)
    return a, (S @ (A_t @ G.T))[:, first]


def _unedited(view: ProbeGrid) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(S, a, G, first) of a keep set, kept per set: its site inputs and unedited logits a in float64, its unit landmarks
    and, per class, the first class whose landmark is the same row (whose columns it takes)."""
    if view not in _UNEDITED:
        G = unit_rows(view.landmarks.detach().cpu().double())
        _, group = torch.unique(G, dim=0, return_inverse=True)  # the first class of each group of equal rows stands for it
        first = torch.full((int(group.max()) + 1,), len(G)).scatter_reduce(0, group, torch.arange(len(G)), "amin")[group]
        _UNEDITED[view] = (view.site_inputs.detach().cpu().double(), (view.raw_embeddings.detach().cpu().double() @ G.T)[:, first], G, first)
    return _UNEDITED[view]


def predictions(view: ProbeGrid, A: Tensor, strengths: Sequence[float]) -> Tensor:
    """Predicted class of every item (C x n, long) at each strength: argmax_j (a_ij + c b_ij) (`logits`), in float64."""
    a, b = logits(view, A)
    c = torch.as_tensor(strengths, dtype=torch.float64)
    block = max(1, _CHUNK // max(1, a.numel()))
    return torch.cat([(a + c[i:i + block, None, None] * b).argmax(dim=2) for i in range(0, len(c), block)])


def right_range(view: ProbeGrid, A_t: Tensor, strengths: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(right at 0, first, stop) per item of the labelled keep set: the item is right at strengths[k] (ascending) for
    first <= k < stop, right meaning argmax_j (a_ij + c b_ij) is its label y (A_t: A^T in float64). Each other class j
    asks (a_iy - a_ij) + c (b_iy - b_ij) > 0 (>= for j after y: argmax takes the first of tied classes), a half-line in
    c: from t = -da/db up when db > 0, up to t when db < 0, always or never when db = 0; a strict end is the next
    float64 past t. Their intersection, an interval of c, is found once in O(n M), and its ends among the strengths by
    bisection, instead of an argmax over M classes at every strength. What reads only a and y is kept per keep set."""
    y, a_less, before, blocks, right = _labelled(view)
    b = _logits(view, A_t)[1]  # the same bits as `predictions`: the same ties
    db = b.gather(1, y) - b
    t = a_less / torch.where(db != 0, db, 1.0)  # -da / db
    lo = torch.where(db > 0, torch.where(before, t.nextafter(_INF), t), -_INF).amax(dim=1)
    hi = torch.where(db < 0, torch.where(before, t.nextafter(-_INF), t), _INF).amin(dim=1)
    first, stop = torch.searchsorted(strengths, lo), torch.searchsorted(strengths, hi, right=True)  # c >= lo, c <= hi
    feasible = ~((db == 0) & blocks).any(dim=1)
    return right, first, torch.where(feasible, torch.maximum(stop, first), first)  # an empty range where none is right


def _labelled(view: ProbeGrid) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """What `right_range` reads of a labelled keep set whatever the edit (kept per set): labels y (n x 1), a_ij - a_iy,
    the classes before y, the classes that make an item wrong at every strength when the edit moves them as it moves y
    (da <= 0 before y, da < 0 after it) and the items right unedited."""
    if view not in _LABELLED:
        a = _unedited(view)[1]
        y = torch.as_tensor(view.labels, dtype=torch.long).reshape(-1, 1)
        a_less = a - a.gather(1, y)
        before = torch.arange(a.shape[1]).reshape(1, -1) < y
        _LABELLED[view] = (y, a_less, before, torch.where(before, a_less >= 0, a_less > 0), a.argmax(dim=1) == y.reshape(-1))
    return _LABELLED[view]


def flips(views: Sequence[ProbeGrid], A: Tensor, strengths: Sequence[float]) -> tuple[Tensor, Tensor]:
    """(n_down, n_up), K sets x C strengths each: per labelled keep set, its items right unedited and wrong at c, and
    wrong unedited and right at c; exact, from each item's range of strengths where it is right (`right_range`),
    counted with a difference array, one product per keep set whatever the number of strengths."""
    if any(view.labels is None for view in views):
        raise PlatonicError("a keep set without labels has no accuracy to lose; flips reads labelled keep sets")
    c = torch.as_tensor(strengths, dtype=torch.float64)
    order = torch.argsort(c, stable=True)
    A_t, ascending = A.detach().cpu().double().T, c[order].contiguous()  # A^T once per edit, whatever the number of sets
    before, first, stop = (torch.cat(part) for part in zip(*(right_range(view, A_t, ascending) for view in views)))
    sizes = torch.tensor([len(view.labels) for view in views])
    group = 2 * torch.repeat_interleave(torch.arange(len(views)), sizes) + before.long()  # per set: wrong, right at 0
    edges = torch.zeros(2 * len(views), len(c) + 1, dtype=torch.long)
    edges.index_put_((group, first), torch.ones_like(group), accumulate=True)
    edges.index_put_((group, stop), -torch.ones_like(group), accumulate=True)
    right = torch.empty(2 * len(views), len(c), dtype=torch.long)
    right[:, order] = edges.cumsum(dim=1)[:, :-1]  # items right at each strength, per set and reading at 0
    at_zero = c == 0  # unedited: nothing flips (the argmax itself, whatever the intervals' rounding says)
    down = torch.where(at_zero, 0, torch.bincount(group[before] // 2, minlength=len(views)).reshape(-1, 1) - right[1::2])
    return down, torch.where(at_zero, 0, right[0::2])


def drop_bound(down: Tensor, up: Tensor, n: int | Tensor, z: float) -> tuple[Tensor, Tensor]:
    """(drop, bound) in points per strength from the flip counts of n items (module docstring); n may be a tensor
    that broadcasts against the counts (K x 1: K sets' sizes)."""
    p_d, p_u = (down.double() + 1) / (n + 2), (up.double() + 1) / (n + 2)
    drop = p_d - p_u
    spread = torch.sqrt((p_d + p_u - drop ** 2).clamp_min(0) / (n + 2))
    return 100 * drop, 100 * (drop + z * spread)


def first_crossing(bounds: Tensor, budget: float) -> int:
    """Index of the last strength before the first whose bound (K sets x C strengths) exceeds `budget` in any set;
    the last index when none does, -1 when the first strength already does."""
    over = (bounds > budget).any(dim=0).nonzero()
    return int(over[0]) - 1 if len(over) else bounds.shape[1] - 1


@attrs.frozen
class KeptReading:
    """One labelled keep set at the chosen strength: the drop's estimate and its upper bound, in points."""

    drop: float
    bound: float


@attrs.frozen
class BudgetChoice:
    """The strength the budget rule chose, what stopped it ("budget": a kept set's bound; "cap"; "search end": the
    last strength searched), and each labelled keep set's reading there (in the order given)."""

    strength: float
    stopped_by: str
    readings: tuple[KeptReading, ...]


def budget_strength(A: Tensor, keep: Sequence[ProbeGrid], budget: float, confidence: float, cap: float | None = None,
                    strengths: Sequence[float] = SEARCH) -> BudgetChoice:
    """The largest of `strengths` (ascending, from 0) below the first at which any labelled keep set's bound exceeds
    `budget` points at `confidence`, and not past `cap` (module docstring); each set's reading there."""
    if not keep:
        raise PlatonicError("the budget rule reads labelled keep sets; none was given")
    budget = check_budget(budget)
    z = z_score(confidence)
    searched = [c for c in strengths if cap is None or c <= cap]
    if not searched or searched[0] != 0:
        raise PlatonicError("the strengths searched start at 0")
    drop, bound = drop_bound(*flips(keep, A, searched), torch.tensor([[len(view.labels)] for view in keep]), z)
    at = first_crossing(bound, budget)
    stopped = "budget" if at < len(searched) - 1 else "cap" if cap is not None and cap < strengths[-1] else "search end"
    at = max(at, 0)
    readings = tuple(KeptReading(float(d), float(b)) for d, b in zip(drop[:, at], bound[:, at]))
    return BudgetChoice(float(searched[at]), stopped, readings)


@attrs.frozen
class KeptChoice:
    """The strength chosen for an edit's keep sets, what stopped it ("budget": a labelled set's bound; "task-only
    fit": an addition's cap; "held sets": the label-free rule over the sets read without labels; "search end"), and
    per keep set (in the order given) its reading at that strength, or None where it was read without labels."""

    strength: float
    stopped_by: str
    readings: tuple[KeptReading | None, ...]


def kept_strength(A: Tensor, task: Sequence[ProbeGrid], kept: Sequence[ProbeGrid], budget: float, confidence: float, hold: RuleFn,
                  addition: bool) -> KeptChoice:
    """The default rule with keep sets (docs/method.md sec. 18): c = budget_strength over the labelled sets large enough to
    read one flipped item within it (`fewest_items`), searched up to min(hold(A, task, the others), the task-only fit on additions); the
    others (grids, and labelled sets too small) are read by the label-free rule `hold` as unlabelled probes. Without a
    labelled set, hold(A, task, kept)."""
    need = fewest_items(budget, confidence)
    read = [k.labels is not None and len(k.labels) >= need for k in kept]
    held = [k for k, r in zip(kept, read) if not r]
    if not any(read):
        return KeptChoice(hold(A, task, held), "held sets", (None,) * len(kept))
    caps = ([(hold(A, task, held), "held sets")] if held else []) + ([(fitted(A, task, ()), "task-only fit")] if addition else [])
    cap, why = min(caps) if caps else (None, "search end")
    choice = budget_strength(A, [k for k, r in zip(kept, read) if r], budget, confidence, cap)
    readings = iter(choice.readings)
    return KeptChoice(choice.strength, why if choice.stopped_by == "cap" else choice.stopped_by,
                      tuple(next(readings) if r else None for r in read))
