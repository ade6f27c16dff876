"""The budget rule's mathematics (strength/budget.py, docs/method.md sec. 18) against independent computations:
predictions against normalised edited embeddings, the bound against Bonett and Price's formula written out in numpy,
and the chosen strength against a brute force over the strengths on hand-built keep sets whose flips sit at known
strengths (so the right strength is known)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from platonic_sdk.errors import PlatonicError
from platonic_sdk.strength import ProbeGrid
from platonic_sdk.strength import strength_rule
from platonic_sdk.strength.budget import (SEARCH, budget_strength, drop_bound, fewest_items, first_crossing, flips, kept_strength,
                                         predictions, z_score)

# An edit that moves item i from class 0 towards class 1 as c t_i: site input s_i = (1, t_i), A s_i = (0, t_i),
# z_i = (1, 0), landmarks e1 and e2. Item i is predicted 1 exactly when c t_i > 1 (a tie keeps class 0).
A = torch.tensor([[0.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
LANDMARKS = torch.eye(2, dtype=torch.float64)


def keep_set(turns: list[float], labels: list[int]) -> ProbeGrid:
    """Items that turn from class 0 to class 1 at the strengths `turns` (t_i = 1 / turn), with `labels`."""
    t = torch.tensor([1.0 / c for c in turns], dtype=torch.float64)
    S = torch.stack([torch.ones_like(t), t], dim=1)
    Z = torch.stack([torch.ones_like(t), torch.zeros_like(t)], dim=1)
    return ProbeGrid(S, Z, LANDMARKS, labels=torch.tensor(labels))


def bonett_price(down: int, up: int, n: int, z: float) -> float:
    """The one-sided upper bound (points) written out: adjusted Wald for a paired difference, one added per discordant cell."""
    p12, p21 = (down + 1) / (n + 2), (up + 1) / (n + 2)
    return 100 * (p12 - p21 + z * math.sqrt((p12 + p21 - (p12 - p21) ** 2) / (n + 2)))


def brute_force(sets: list[tuple[list[float], list[int]]], budget: float, z: float, strengths: list[float]) -> float:
    """The last strength before the first at which some set's bound exceeds the budget, counting flips from the turns."""
    chosen = strengths[0]
    for c in strengths:
        for turns, labels in sets:
            now = [1 if c > turn else 0 for turn in turns]
            down = sum(1 for y, p in zip(labels, now) if y == 0 and p != 0)
            up = sum(1 for y, p in zip(labels, now) if y == 1 and p == 1)
            if bonett_price(down, up, len(labels), z) > budget:
                return chosen
        chosen = c
    return chosen


def test_predictions_are_the_normalised_edited_embeddings_argmax():
    g = torch.Generator().manual_seed(0)
    S, Z, G, A_r = (torch.randn(*shape, generator=g, dtype=torch.float64) for shape in ((40, 5), (40, 4), (3, 4), (4, 5)))
    view = ProbeGrid(S, Z, G, labels=torch.zeros(40, dtype=torch.long))
    strengths = [0.0, 0.3, 1.1, 2.5]
    got = predictions(view, A_r, strengths)
    for row, c in zip(got, strengths):
        f = Z + c * S @ A_r.T
        expected = (f / f.norm(dim=1, keepdim=True)) @ (G / G.norm(dim=1, keepdim=True)).T
        assert torch.equal(row, expected.argmax(dim=1))


def test_flips_count_right_to_wrong_and_back():
    view = keep_set([0.5, 1.0, 2.0, 0.75, 2.0], [0, 0, 0, 1, 1])
    down, up = (f[0] for f in flips([view], A, [0.0, 0.5, 0.6, 1.0, 1.5, 2.0, 2.5]))
    assert down.tolist() == [0, 0, 1, 1, 2, 2, 3]  # the ties at c = 0.5 and 2.0 keep class 0: right for a 0
    assert up.tolist() == [0, 0, 0, 1, 1, 1, 2]  # and wrong for a 1 (at 2.0)
    # landmarks swapped: the items start in class 1 and turn to class 0, whose tie at c = 2.0 it wins
    swapped = keep_set([2.0, 2.0], [0, 1])
    swapped = ProbeGrid(swapped.site_inputs, swapped.raw_embeddings, LANDMARKS.flip(0), labels=swapped.labels)
    down, up = (f[0] for f in flips([swapped], A, [0.0, 1.0, 2.0, 2.5]))
    assert down.tolist() == [0, 0, 1, 1] and up.tolist() == [0, 0, 1, 1]


def test_the_bound_is_bonett_and_prices():
    z = z_score(0.9)
    down, up = torch.tensor([0, 3, 10, 0]), torch.tensor([0, 1, 2, 5])
    drop, bound = drop_bound(down, up, 50, z)
    for d, u, est, b in zip(down.tolist(), up.tolist(), drop.tolist(), bound.tolist()):
        assert est == pytest.approx(100 * (d - u) / 52)
        assert b == pytest.approx(bonett_price(d, u, 50, z))
    assert z == pytest.approx(1.2815515655, abs=1e-9)
    assert z_score(0.84) == pytest.approx(0.9944578832, abs=1e-9)


def test_fewest_items_is_where_one_flipped_item_first_reads_within_the_budget():
    for budget, confidence in ((3.0, 0.84), (5.0, 0.95), (1.0, 0.7), (3.0, 0.7), (30.0, 0.6)):
        n = fewest_items(budget, confidence)
        z = z_score(confidence)
        assert bonett_price(1, 0, n, z) <= budget < bonett_price(1, 0, n - 1, z)
    assert fewest_items(3.0, 0.7) == 62


def test_a_known_strength():
    """1000 items; 100 of them turn wrong just past c = 1: the bound stays near 0.14 points up to 1, then reads ~10."""
    view = keep_set([1.0] * 100 + [100.0] * 900, [0] * 1000)
    choice = budget_strength(A, [view], 3.0, 0.84)
    assert choice.strength == 1.0 and choice.stopped_by == "budget"
    assert choice.readings[0].drop == pytest.approx(-0.0) and choice.readings[0].bound == pytest.approx(bonett_price(0, 0, 1000, z_score(0.84)))
    assert budget_strength(A, [view], 3.0, 0.84, cap=0.5).strength == 0.5
    assert budget_strength(A, [view], 3.0, 0.84, cap=0.5).stopped_by == "cap"
    assert budget_strength(A, [view], 20.0, 0.84).stopped_by == "search end"


def test_the_first_crossing_not_the_last_strength_under_the_budget():
    """The drop rises past the budget at c = 1 and falls back at c = 1.5 (wrong items turning right): the rule stops at 1."""
    turns, labels = [1.0] * 30 + [1.5] * 40 + [100.0] * 130, [0] * 30 + [1] * 40 + [0] * 130
    view = keep_set(turns, labels)
    assert budget_strength(A, [view], 3.0, 0.84).strength == 1.0
    bounds = drop_bound(*(f[0] for f in flips([view], A, SEARCH)), len(labels), z_score(0.84))[1]
    assert bounds[-1] < 3.0  # the last strength reads under the budget again


@pytest.mark.parametrize("seed", range(5))
def test_random_keep_sets_against_the_brute_force(seed):
    rng = np.random.default_rng(seed)
    sets = []
    for n in (60, 200, 400):
        turns = (rng.uniform(0.05, 6.0, size=n).round(4) + 3e-5).tolist()  # never a searched strength: no ties
        sets.append((turns, rng.integers(0, 2, size=n).tolist()))
    strengths = [k / 16 for k in range(0, 65)]
    for budget, confidence in ((3.0, 0.84), (5.0, 0.95), (2.0, 0.6)):
        got = budget_strength(A, [keep_set(*s) for s in sets], budget, confidence, strengths=strengths)
        assert got.strength == brute_force(sets, budget, z_score(confidence), strengths)


def test_a_set_too_small_to_read_the_budget_stops_at_zero():
    view = keep_set([100.0] * 20, [0] * 20)  # nothing flips, but 20 items cannot show 3 points at 84%
    assert first_crossing(drop_bound(*flips([view], A, [0.0, 1.0]), 20, z_score(0.84))[1], 3.0) == -1
    assert budget_strength(A, [view], 3.0, 0.84).strength == 0.0


def test_bad_input_is_refused():
    view = keep_set([1.0] * 10, [0] * 10)
    with pytest.raises(PlatonicError, match="confidence is a probability between 0.5 and 1"):
        budget_strength(A, [view], 3.0, 1.5)
    with pytest.raises(PlatonicError, match="budget is the accuracy points a kept set may lose"):
        budget_strength(A, [view], -1.0, 0.84)
    with pytest.raises(PlatonicError, match="reads labelled keep sets; none was given"):
        budget_strength(A, [], 3.0, 0.84)
    with pytest.raises(PlatonicError, match="flips reads labelled keep sets"):
        flips([ProbeGrid(view.site_inputs, view.raw_embeddings, view.landmarks)], A, [0.0])


def task_grid(fit: float) -> ProbeGrid:
    """A task grid whose descriptor the edit A realises at first order best at strength `fit` (task-only fit)."""
    g = torch.Generator().manual_seed(3)
    S, Z, G = torch.randn(12, 2, generator=g, dtype=torch.float64), torch.randn(12, 2, generator=g, dtype=torch.float64), LANDMARKS
    U = torch.randn(12, 2, generator=g, dtype=torch.float64)
    raw = strength_rule("least_squares").choose(A, [ProbeGrid(S, Z, G, U)], [])
    assert raw > 0
    return ProbeGrid(S, Z, G, U * fit / raw)


def test_kept_strength_caps_additions_at_the_task_only_fit():
    """A keep set that binds only past c = 2: an addition whose task-only fit is 1.3 stops at the last strength up to 1.3,
    the negation of the same operator runs on to the budget's crossing at 2; sets read without labels cap both."""
    view = keep_set([2.0] * 100 + [100.0] * 900, [0] * 1000)
    task = [task_grid(1.3)]
    assert strength_rule("least_squares").choose(A, task, []) == pytest.approx(1.3)
    add = kept_strength(A, task, [view], 3.0, 0.84, lambda *_: 9.0, addition=True)
    assert add.strength == max(c for c in SEARCH if c <= 1.3) and add.stopped_by == "task-only fit"
    neg = kept_strength(A, task, [view], 3.0, 0.84, lambda *_: 9.0, addition=False)
    assert neg.strength == 2.0 and neg.stopped_by == "budget"
    grid = ProbeGrid(view.site_inputs, view.raw_embeddings, view.landmarks)
    seen = []
    held = kept_strength(A, task, [view, grid], 3.0, 0.84, lambda A_, t, others: seen.append(others) or 0.7, addition=False)
    assert held.strength == max(c for c in SEARCH if c <= 0.7) and held.stopped_by == "held sets" and seen == [[grid]]
    assert held.readings[1] is None and held.readings[0].bound <= 3.0
    small = keep_set([100.0] * 20, [0] * 20)  # too few items to read 3 points: held without its labels
    alone = kept_strength(A, task, [small], 3.0, 0.84, lambda A_, t, others: float(len(others)), addition=True)
    assert alone.strength == 1.0 and alone.stopped_by == "held sets" and alone.readings == (None,)


def test_flips_from_intervals_equal_an_argmax_at_every_strength():
    """flips reads each item's range of strengths where it is right (right_range); on random keep sets, with tied
    classes and items the edit cannot move, it counts exactly what an argmax at each strength counts (`predictions`),
    for several sets at once as for each alone, and for strengths in any order."""
    g = torch.Generator().manual_seed(0)
    views: list[ProbeGrid] = []
    for trial in range(60):
        n, M = int(torch.randint(5, 200, (1,), generator=g)), int(torch.randint(2, 10, (1,), generator=g))
        S, Z, G = torch.randn(n, 12, generator=g), torch.randn(n, 10, generator=g), torch.randn(M, 10, generator=g)
        if trial % 3 == 0:
            G[1] = G[0]  # two classes tie at every strength: the first wins
        if trial % 4 == 0:
            S[: n // 2] = 0  # items the edit does not move
        labels = torch.randint(0, M, (n,), generator=g)
        views.append(ProbeGrid(S, Z, G, labels=labels))
        A = torch.randn(10, 12, generator=g) * float(torch.rand(1, generator=g) * 2)
        right = predictions(views[-1], A, SEARCH) == labels.reshape(1, -1)
        down, up = (f[0] for f in flips([views[-1]], A, SEARCH))
        assert torch.equal(down, (right[:1] & ~right).sum(dim=1)) and torch.equal(up, (~right[:1] & right).sum(dim=1)), trial
        # weighed together with the sets before it (other sizes and class counts, stacked and padded), each set's counts stay its own
        many = flips(views[-4:], A, SEARCH)
        alone = [flips([view], A, SEARCH) for view in views[-4:]]
        assert all(torch.equal(many[i], torch.cat([pair[i] for pair in alone])) for i in (0, 1)), trial
        shuffled = torch.randperm(len(SEARCH), generator=g)  # strengths in any order: each column stays its strength's
        assert all(torch.equal(f[:, shuffled], m) for f, m in zip(many, flips(views[-4:], A, [SEARCH[i] for i in shuffled]))), trial
