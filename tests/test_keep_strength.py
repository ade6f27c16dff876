"""Keep sets through the bank (OperatorBank.edit(..., keep=, budget=, confidence=); docs/method.md sec. 18): the strength
against a brute force written out in numpy over the same strengths, the keep set's drop against a forward pass of the
edited model, the record in the edit file, the default strength, and bad input refused before anything is chosen."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from grid_zoo import moved

import platonic_sdk as ps
from platonic_sdk.encoding.features import site_features
from platonic_sdk.encoding.zeroshot import accuracy
from platonic_sdk.errors import PlatonicError
from platonic_sdk.data.keep import KeepSet
from platonic_sdk.strength.budget import SEARCH, z_score
from platonic_sdk.tasks import Split
from platonic_sdk.worlds.image import ImageWorld

BUDGET, CONFIDENCE = 8.0, 0.8  # tiny keep sets: 8 points at 80% needs 16 items


@pytest.fixture(scope="module")
def tiny():
    world = ImageWorld(train_per_class=8, test_per_class=6)
    pre = ps.from_config("clip", seed=0)
    grids = {t: world.task(t).grid(2, 0) for t in ("small_shapes", "amber_shapes")}
    utd = ps.UTD.compute(pre, moved(pre, seed=7, scale=0.2), grids["small_shapes"])
    target = ps.from_config("siglip", seed=2)
    bank = ps.OperatorBank(target, ridge_a=0.1, ridge_b=0.5)
    for g in grids.values():
        bank.add_grid(g)
    keep = [KeepSet.from_task(world.task(t), "train") for t in ("amber_shapes", "control_shapes")]
    return world, target, bank, grids, utd, keep


def numpy_choice(bank: ps.OperatorBank, A: torch.Tensor, keep: list[KeepSet], cap: float | None) -> float:
    """The last strength of SEARCH (up to `cap`) before any keep set's bound first exceeds BUDGET, every step written out:
    normalised edited embeddings, argmax, flips counted against c = 0, Bonett and Price's bound."""
    z, A = z_score(CONFIDENCE), A.double().numpy()
    views = [tuple(m.double().numpy() for m in (v.site_inputs, v.raw_embeddings, v.landmarks)) for v in map(bank.keep_view, keep)]

    def right(S: np.ndarray, Z: np.ndarray, G: np.ndarray, labels: np.ndarray, strength: float) -> np.ndarray:
        f = Z + strength * S @ A.T
        return ((f / np.linalg.norm(f, axis=1, keepdims=True)) @ (G / np.linalg.norm(G, axis=1, keepdims=True)).T).argmax(1) == labels

    chosen = 0.0
    for c in (s for s in SEARCH if cap is None or s <= cap):
        for (S, Z, G), k in zip(views, keep):
            before, after, n = right(S, Z, G, k.labels, 0.0), right(S, Z, G, k.labels, c), len(k)
            p_d, p_u = (np.sum(before & ~after) + 1) / (n + 2), (np.sum(~before & after) + 1) / (n + 2)
            if 100 * (p_d - p_u + z * math.sqrt((p_d + p_u - (p_d - p_u) ** 2) / (n + 2))) > BUDGET:
                return chosen
        chosen = c
    return chosen


def test_labelled_keep_sets_against_a_numpy_brute_force(tiny, tmp_path):
    world, target, bank, grids, utd, keep = tiny
    add = bank.edit(utd, keep=keep, budget=BUDGET, confidence=CONFIDENCE)
    task_only = bank.edit(utd, "least_squares").strength
    assert add.strength == numpy_choice(bank, add.operator, keep, task_only)  # additions stop at the task-only fit at most
    neg = bank.edit(-utd, keep=keep, budget=BUDGET, confidence=CONFIDENCE)
    assert neg.strength == numpy_choice(bank, neg.operator, keep, None)  # negations search to the end
    assert add.strength != neg.strength  # each sign its own strength (the label-free fit gives both one)
    assert bank.edit(utd).strength == pytest.approx(bank.edit(-utd).strength)

    record = neg.meta["strength_rule"]
    assert record["rule"] == "auto" and record["strength"] == neg.strength
    assert record["budget"] == BUDGET and record["confidence"] == CONFIDENCE and record["stopped_by"] == "budget"
    assert [k["task"] for k in record["kept"]] == ["amber_shapes", "control_shapes"]
    assert all(k["labelled"] and k["source"] == "train" and k["drop"] <= k["bound"] <= BUDGET for k in record["kept"])
    assert record["kept"][0]["content"] == keep[0].content[:20] and record["kept"][1]["size"] == len(keep[1])
    neg.save(tmp_path / "kept.safetensors")
    assert ps.Edit.load(tmp_path / "kept.safetensors").meta["strength_rule"] == record
    assert add.meta["strength_rule"]["stopped_by"] == "search end" and task_only > SEARCH[-1]  # untrained towers: a large fit


def test_the_recorded_drop_is_the_edited_models(tiny):
    """The rule never runs the model; its drop on a keep set is what a forward pass of the folded model measures."""
    world, target, bank, grids, utd, keep = tiny
    edit = bank.edit(-utd, keep=keep, budget=BUDGET, confidence=CONFIDENCE)
    assert edit.strength > 0
    task = world.task("control_shapes")
    before = accuracy(target, task, "train")
    with edit.applied_to(target):
        after = accuracy(target, task, "train")
    n = len(task.train)
    assert edit.meta["strength_rule"]["kept"][1]["drop"] * (n + 2) / n == pytest.approx(before - after, abs=1e-6)


def test_unlabelled_and_absent_keep_sets(tiny):
    world, target, bank, grids, utd, keep = tiny
    as_grid = bank.edit(utd, keep=[KeepSet.from_grid(grids["amber_shapes"])])
    assert as_grid.strength == bank.edit(utd).strength  # the bank's other grid, named or not
    assert as_grid.meta["strength_rule"]["kept"][0]["labelled"] is False and "budget" not in as_grid.meta["strength_rule"]
    with pytest.warns(UserWarning, match="nothing to keep: strength='auto' chose the strength from the edit's own grids alone"):
        lone = bank.edit(utd, keep=[])
    assert lone.strength == pytest.approx(bank.edit(utd, "least_squares").strength)
    small = KeepSet.from_split("few", world.task("control_counts").train.subset(range(8)), world.task("control_counts").classnames)
    with pytest.warns(UserWarning, match=r"'few' \(8 items\): too few labelled items for one flipped item to read within 8 points at 80%"):
        held = bank.edit(utd, keep=[small], budget=BUDGET, confidence=CONFIDENCE)
    assert held.strength == bank.edit(utd, "least_squares_off_task", keep=[small]).strength  # read as unlabelled probes
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bank.edit(utd, keep=keep, budget=BUDGET, confidence=CONFIDENCE)


def test_the_default_strength_is_auto(tiny):
    world, target, bank, grids, utd, keep = tiny
    assert bank.edit(utd).meta["strength_rule"]["rule"] == "auto" and bank.edit(utd, 0.5).strength == 0.5


def test_bad_keep_input_is_refused(tiny, tmp_path):
    world, target, bank, grids, utd, keep = tiny
    cases = [
        (dict(strength=0.5, keep=keep), "keep=, budget= and confidence= are read by a strength rule"),
        (dict(keep=[KeepSet.from_grid(grids["amber_shapes"])], budget=3.0), "keep= holds none"),
        (dict(strength="least_squares_off_task", keep=keep, budget=3.0), "rule 'least_squares_off_task' reads no labels"),
        (dict(keep=[KeepSet.from_task(world.task("small_shapes"), "train")]), "'small_shapes' name a task the edit transfers"),
        (dict(keep=[grids["amber_shapes"]]), "keep= takes KeepSets .* got Grid"),
        (dict(keep=keep, confidence=1.2), "confidence is a probability between 0.5 and 1"),
        (dict(keep=keep, budget=-1.0), "budget is the accuracy points a kept set may lose"),
        (dict(keep=keep, budget="3"), "budget must be a finite real number"),
    ]
    for kwargs, message in cases:
        with pytest.raises(PlatonicError, match=message):
            bank.edit(utd, **kwargs)
    with pytest.raises(TypeError):
        bank.edit(utd, keeps=keep)
    saved = bank.save(tmp_path / "bank.safetensors", {"a": utd})
    with pytest.raises(PlatonicError, match="strength 'auto' chooses the strength from the target's probes and keep sets, which a saved"):
        saved.edit([("a", 1.0)], "auto")
    with pytest.raises(PlatonicError, match="keep= is read on the target model, which a saved bank does not hold"):
        saved.edit([("a", 1.0)], keep=keep)
    assert saved.edit([("a", 1.0)]).strength == 0.5


def test_a_keep_set_of_other_items_is_encoded_once(tiny):
    world, target, bank, grids, utd, keep = tiny
    items = world.task("control_glyphs").test
    one = KeepSet.from_split("glyphs", Split(items.items[:30], items.labels[:30]), world.task("control_glyphs").classnames)
    again = KeepSet.from_split("glyphs", (list(items.items[:30]), items.labels[:30].tolist()), world.task("control_glyphs").classnames)
    assert bank.keep_view(one) is bank.keep_view(again)


def test_a_keep_set_reads_the_probes_it_holds_from_the_grid_and_encodes_only_the_rest(tiny, monkeypatch):
    world, target, _, grids, _, _ = tiny
    bank = ps.OperatorBank(target, ridge_a=0.1, ridge_b=0.5)
    bank.add_grid(grids["amber_shapes"])
    keep = KeepSet.from_task(world.task("amber_shapes"), "train")  # the train split the grid's probes were drawn from
    probes = {id(item) for item in grids["amber_shapes"].items}
    assert 0 < len(probes) < len(keep)
    seen: list[int] = []
    preprocess = type(target).preprocess
    monkeypatch.setattr(type(target), "preprocess", lambda self, items: seen.extend(map(id, items)) or preprocess(self, items))
    view = bank.keep_view(keep)
    assert sorted(seen) == sorted(id(item) for item in keep.items if id(item) not in probes)  # each rest item once, no probe
    S, Z = site_features(target, keep.items)  # the whole set encoded at once, independently
    torch.testing.assert_close(view.site_inputs, S, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(view.raw_embeddings, Z, rtol=1e-5, atol=1e-5)
