"""The cell matrix and its methods: cell enumeration, per-cell numbers against real folds, shared caches
(resume and the run-folder guards: test_runfolder.py)."""

from __future__ import annotations

import copy
import functools
import math
from collections import Counter

import attrs
import numpy as np
import pytest
import torch
from grid_zoo import CONTROL, TASKS, build_models, build_tasks, build_workspace

import platonic_sdk as ps
from platonic_sdk.descriptor import UTD
from platonic_sdk.edits.edit import OperatorEdit
from platonic_sdk.evaluate import accuracy
from platonic_sdk.evaluate.measure.cells import addition_cells, negation_cells, relation
from platonic_sdk.evaluate.measure.methods import evaluate_cell
from platonic_sdk.evaluate.report.render import summarise
from platonic_sdk.evaluate.run.runner import run_experiment
from platonic_sdk.evaluate.plan.settings import CellSettings, ExperimentConfig
from platonic_sdk.finetune import TaskVector


@pytest.fixture(scope="module")
def models():
    return build_models()


@pytest.fixture(scope="module")
def tasks():
    return build_tasks()


@pytest.fixture(scope="module")
def ws(models, tasks):
    return build_workspace(models, tasks)


def test_relations_follow_the_architecture(ws):
    assert relation(ws, "clip", "clip") == "same-model"
    assert relation(ws, "clip", "clip_b") == "same-architecture"
    assert relation(ws, "clip", "wide") == "cross-family"  # a CLIPModel of another width
    assert relation(ws, "clip", "siglip") == "cross-family"


def test_cell_counts_match_the_paper_formula(models, tasks):
    # three mutually cross-family models: F x C(T, 2) x (F-1)(F-2) addition and F x (F-1) x T negation cells
    three = {k: models[k] for k in ("clip", "siglip", "wide")}
    ws3 = build_workspace(three, tasks)
    F, T = 3, len(TASKS)
    add = addition_cells(ws3)
    assert len(add) == F * math.comb(T, 2) * (F - 1) * (F - 2)
    assert all(c.target not in c.sources and c.sources[0] != c.sources[1] for c in add)
    assert len({c.key for c in add}) == len(add)
    assert len(negation_cells(ws3)) == F * (F - 1) * T
    assert len(addition_cells(ws3, pairing="any")) == F * math.comb(T, 2) * (F - 1) ** 2
    same = addition_cells(ws3, groups=["same-model"])
    assert len(same) == F * math.comb(T, 2) and all(c.sources == (c.target, c.target) for c in same)


def test_groups_with_a_same_architecture_pair(ws):
    cells = addition_cells(ws, groups=["same-architecture"], pairing="any")
    assert cells and all({c.target, *c.sources} <= {"clip", "clip_b"} and c.target not in c.sources for c in cells)
    with pytest.raises(ps.PlatonicError, match="unknown cell group"):
        addition_cells(ws, groups=["cross-model"])


def kept(tasks: tuple[str, ...]) -> list[str]:
    """What a cell on `tasks` must leave alone, by hand: the control, then the other transfer tasks (cells.kept_sets)."""
    return [CONTROL, *(t for t in TASKS if t not in tasks)]


def test_cell_numbers_equal_real_folded_models(ws, models, tasks):
    cell = next(c for c in addition_cells(ws) if c.target == "siglip")
    settings = CellSettings(addition_strength=0.7, strength_rule="fixed")
    record = evaluate_cell(ws, cell, settings)
    target = models["siglip"]
    bank = ps.OperatorBank(target, ws.ridge_a, ws.ridge_b)
    descriptors = []
    for source, task in zip(cell.sources, cell.tasks):
        grid = tasks[task].grid(ws.per_class, ws.grid_seed)
        bank.add_grid(grid)
        # an independent descriptor: two forward passes through the public API
        descriptors.append(UTD.compute(models[source], ws.finetuned[(source, task)], grid))
    names = [*cell.tasks, *kept(cell.tasks)]
    assert (record["controls"], record["others"]) == ([CONTROL], kept(cell.tasks)[1:])
    # the labelled reference by hand: one-hot of each probe's train label minus 1/M, scaled to the descriptor's norm
    labelled = []
    for task, d in zip(cell.tasks, descriptors):
        grid = tasks[task].grid(ws.per_class, ws.grid_seed)
        M = len(tasks[task].classnames)
        L = np.zeros(grid.shape, dtype=np.float32)
        for i, probe in enumerate(grid.probe_ids):
            L[i] = -1.0 / M
            L[i, tasks[task].train.labels[probe]] += 1.0
        L *= float(d.matrix.norm()) / np.linalg.norm(L)
        labelled.append(UTD(torch.from_numpy(L), grid.identity, task))
    for method, composition in (("closed_form", descriptors[0] + descriptors[1]), ("single_a", descriptors[0].as_composition()),
                                ("label_reference", labelled[0] + labelled[1])):
        with bank.edit(composition, settings.addition_strength).applied_to(target):
            folded = {n: accuracy(target, tasks[n]) for n in names}
        assert record["results"][method] == pytest.approx(folded, abs=1e-6)
    assert record["results"]["zero_shot"] == pytest.approx({n: accuracy(target, tasks[n]) for n in names})
    assert set(record["results"]) == {"zero_shot", "random_utd", "single_a", "single_b", "closed_form", "oracle", "label_reference",
                                      "alignment", "alignment_lstsq"}
    # centred addition: the closed form folds the operator of the row-centred descriptors
    centred = evaluate_cell(ws, cell, attrs.evolve(settings, centre=("addition",)), ["closed_form"])
    with bank.edit(descriptors[0] + descriptors[1], settings.addition_strength, centre=True).applied_to(target):
        folded = {n: accuracy(target, tasks[n]) for n in names}
    assert centred["results"]["closed_form"] == pytest.approx(folded, abs=1e-6)
    assert record["finetuned"][cell.tasks[0]] == pytest.approx(accuracy(ws.finetuned[("siglip", cell.tasks[0])], tasks[cell.tasks[0]]))


def test_negation_and_weight_space_on_a_same_architecture_cell(ws, models, tasks):
    cell = next(c for c in negation_cells(ws, groups=["same-architecture"]) if c.target == "clip")
    settings = CellSettings(negation_strength=1.0, weight_space_strength=0.8)
    record = evaluate_cell(ws, cell, settings)
    (source,), (task,) = cell.sources, cell.tasks
    target = copy.deepcopy(models["clip"])
    vector = TaskVector.from_models(models[source].media_encoder, ws.finetuned[(source, task)].media_encoder)
    vector.apply_to(target.media_encoder, -0.8, allow_other_target=True)  # task arithmetic on another model
    assert record["results"]["weight_space"] == pytest.approx({n: accuracy(target, tasks[n]) for n in (task, *kept((task,)))})
    assert "single_a" not in record["results"]
    # the workspace's target is restored after the weight-space baseline
    assert ws.accuracies("clip", [task]) == pytest.approx({task: accuracy(models["clip"], tasks[task])})


def test_negation_cells_anchor_the_tasks_that_read_other_attributes(ws, models, tasks):
    """By default a negation's solve holds the probes of the transfer tasks with other class names in place."""
    assert ws.anchor_tasks(["amber_shapes"]) == ("small_shapes", "fine_patterns")  # colours vs shapes vs patterns
    assert ws.anchor_tasks(["amber_shapes", "small_shapes"]) == ("fine_patterns",)
    cell = next(c for c in negation_cells(ws) if c.target == "siglip" and c.sources == ("clip_b",) and c.tasks == ("amber_shapes",))
    target = models["siglip"]
    bank = ps.OperatorBank(target, ws.ridge_a, ws.ridge_b)
    grid = tasks["amber_shapes"].grid(ws.per_class, ws.grid_seed)
    bank.add_grid(grid)
    descriptor = UTD.compute(models[cell.sources[0]], ws.finetuned[(cell.sources[0], "amber_shapes")], grid)
    anchors = [tasks[t].grid(ws.per_class, ws.grid_seed) for t in ("small_shapes", "fine_patterns")]
    names = ["amber_shapes", *kept(("amber_shapes",))]
    results = []
    for settings, held in ((CellSettings(strength_rule="fixed"), anchors), (CellSettings(anchor=(), strength_rule="fixed"), [])):
        results.append(evaluate_cell(ws, cell, settings, ["closed_form"])["results"]["closed_form"])
        with bank.edit(-descriptor, settings.negation_strength, centre=True, anchors=held).applied_to(target):
            folded = {n: accuracy(target, tasks[n]) for n in names}
        assert results[-1] == pytest.approx(folded, abs=1e-6)
    assert results[0] != results[1]  # the anchors change the edit
    # an anchored addition: each term's solve holds the other attributes' probes, the other term's among them
    cell = next(c for c in addition_cells(ws) if c.target == "siglip" and set(c.tasks) == {"amber_shapes", "small_shapes"})
    record = evaluate_cell(ws, cell, CellSettings(addition_strength=0.7, anchor=("addition",), strength_rule="fixed"), ["closed_form"])
    A = 0
    for source, task in zip(cell.sources, cell.tasks):
        grid = tasks[task].grid(ws.per_class, ws.grid_seed)
        bank.add_grid(grid)
        held = [tasks[t].grid(ws.per_class, ws.grid_seed) for t in TASKS if t != task]
        A = A + bank.operator(UTD.compute(models[source], ws.finetuned[(source, task)], grid), anchors=held)
    names = [*cell.tasks, *kept(cell.tasks)]
    with OperatorEdit(A, 0.7, bank.site_kind, {}, bank.binding).applied_to(target):
        folded = {n: accuracy(target, tasks[n]) for n in names}
    assert record["results"]["closed_form"] == pytest.approx(folded, abs=1e-6)
    with pytest.raises(ps.PlatonicError, match="anchor lists cell kinds"):
        CellSettings(anchor=("deletion",))


def test_no_item_is_encoded_twice_by_one_model(models, tasks, tmp_path, monkeypatch):
    """Each family preprocesses each probe and test item once in a run (its fine-tunes and edited copies read
    the same preprocessed sets; the adapters' own `preprocess` is counted at the class, which every path calls),
    and two items more per feature-store key."""
    from platonic_sdk.encoding.feature_store import caching

    counts: Counter = Counter()
    three = {k: copy.deepcopy(models[k]) for k in ("clip", "siglip", "wide")}
    ws3 = build_workspace(three, tasks)
    for cls in {type(m) for m in three.values()}:
        original = cls.preprocess

        def counting(self, items, _orig=original):
            counts[self.family] += len(items)
            return _orig(self, items)

        monkeypatch.setattr(cls, "preprocess", counting)
    cells_only = ExperimentConfig(sweep_cells=1, accumulation=False, guarantee=False, similarity=False,
                                  settings=CellSettings(keep="probes"))  # no keep split to encode: the count below is by hand
    with caching(tmp_path / "cache"):  # a fresh feature store: nothing read from earlier tests
        run_experiment(ws3, tmp_path / "run", cells_only)
    probes = sum(ws3.grid(t).shape[0] for t in TASKS)
    tests = sum(len(tasks[t].test) for t in (*TASKS, CONTROL))
    # plus the first two items of each set a feature-store key is taken of, preprocessed on their own (feature_store):
    # the pretrained model's test splits and probe grids, each fine-tune's own probe grid and test split
    keyed = 2 * (len(TASKS) + 1 + len(TASKS) + 2 * len(TASKS))
    assert dict(counts) == {m.family: probes + tests + keyed for m in three.values()}


@pytest.mark.parametrize("method, params", [("ties", {"keep": 0.5}), ("iso_c", {})])
def test_merging_methods_on_a_same_architecture_cell(ws, models, tasks, method, params):
    from platonic_sdk.evaluate.measure.merging import merged_weight_space
    from platonic_sdk.finetune import merge

    cell = next(c for c in addition_cells(ws, groups=["same-architecture"], pairing="any") if c.target == "clip")
    settings = CellSettings(weight_space_strength=0.7)
    result = merged_weight_space(method, **params)(ws, cell, settings)
    target = copy.deepcopy(models["clip"])
    vectors = [TaskVector.from_models(models[s].media_encoder, ws.finetuned[(s, t)].media_encoder) for s, t in zip(cell.sources, cell.tasks)]
    merge(vectors, method, **params).apply_to(target.media_encoder, 0.7, allow_other_target=True)
    names = [*cell.tasks, *kept(cell.tasks)]
    assert result == pytest.approx({n: accuracy(target, tasks[n]) for n in names})
    cross = next(iter(addition_cells(ws)))
    assert merged_weight_space(method, **params)(ws, cross, settings) is None  # weight space needs one architecture
    with pytest.raises(ps.PlatonicError, match="unknown merge method"):
        merged_weight_space("mean")


def _validation_pick(target, vector, tasks, seed, kind, task_names, control_names):
    """Brute force over the selection grid (extended as select_extending does): the strength whose
    validation accuracies win, computed on a copy of the target with the vector folded in by hand."""
    from platonic_sdk.evaluate.measure.merging import validation_part
    from platonic_sdk.evaluate.measure.selection import DEFAULT_STRENGTHS

    val = {n: validation_part(tasks[n], seed) for n in (*task_names, *control_names)}

    @functools.cache
    def accs(c):
        model = copy.deepcopy(target)
        vector.apply_to(model.media_encoder, c, allow_other_target=True)
        return {n: accuracy(model, t) for n, t in val.items()}

    grid = list(DEFAULT_STRENGTHS)
    if kind == "addition":
        score = lambda c: (np.mean([accs(c)[t] for t in task_names]), -c)  # noqa: E731
        best = max(grid, key=score)
        for _ in range(3):  # the grid grows by its span while the pick is its top
            if best < max(grid):
                break
            grid += [round(max(grid) + c, 10) for c in DEFAULT_STRENGTHS if c > 0]
            best = max(grid, key=score)
        return best
    floor = 0.95 * np.mean([accs(0.0)[c] for c in control_names])
    feasible = [c for c in grid if np.mean([accs(c)[n] for n in control_names]) >= floor]
    return min(feasible, key=lambda c: (accs(c)[task_names[0]], c))


def test_every_merging_method_chooses_its_strength_on_validation(ws, models, tasks, monkeypatch):
    from platonic_sdk.evaluate.measure import selection
    from platonic_sdk.evaluate.plan.settings import MERGED
    from platonic_sdk.finetune import merge, merge_methods

    assert MERGED == tuple(f"weight_space_{m}" for m in merge_methods())  # all five, registered, in the grid's defaults
    assert set(MERGED) <= set(ExperimentConfig().methods)
    seen = []
    original = selection.accuracy
    monkeypatch.setattr(selection, "accuracy", lambda encoder, task, split="test": seen.append(task) or original(encoder, task, split))
    train_ids = {n: {id(x) for x in tasks[n].train.items} for n in tasks}
    test_ids = {n: {id(x) for x in tasks[n].test.items} for n in tasks}
    settings = CellSettings(seed=3)
    for cell in (next(c for c in addition_cells(ws, groups=["same-architecture"], pairing="any") if c.target == "clip"),
                 next(c for c in negation_cells(ws, groups=["same-architecture"]) if c.target == "clip")):
        seen.clear()
        record = evaluate_cell(ws, cell, settings, methods=MERGED)
        assert set(record["results"]) == set(MERGED)  # every method's row is there
        assert seen and all({id(x) for x in t.test.items} <= train_ids[t.name] and not {id(x) for x in t.test.items} & test_ids[t.name]
                            for t in seen)  # selection only ever looked at validation items, never at a test split
        assert {t.name for t in seen} >= set(cell.tasks) and (cell.kind == "addition" or CONTROL in {t.name for t in seen})
        vectors = [TaskVector.from_models(models[s].media_encoder, ws.finetuned[(s, t)].media_encoder) for s, t in zip(cell.sources, cell.tasks)]
        for m in (("ties",) if cell.kind == "addition" else ("dare",)):
            result = record["results"][f"weight_space_{m}"]
            merged = merge(vectors, m) if cell.kind == "addition" else -merge(vectors, m)
            controls = () if cell.kind == "addition" else (CONTROL,)
            assert result["strength"] == _validation_pick(models["clip"], merged, tasks, 3, cell.kind, cell.tasks, controls)
            target = copy.deepcopy(models["clip"])
            merged.apply_to(target.media_encoder, result["strength"], allow_other_target=True)
            names = [*cell.tasks, CONTROL]
            assert {n: result[n] for n in names} == pytest.approx({n: accuracy(target, tasks[n]) for n in names})  # reported on test
    summary = summarise([record], "negation", MERGED)
    assert summary["weight_space_dare"]["strength"] == record["results"]["weight_space_dare"]["strength"]
