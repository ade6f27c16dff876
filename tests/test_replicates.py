"""Replicates (evaluate/measure/replicates.py): the real world's seeds redraw its garments' train/test split, a
replicate's fine-tunes never see a probe or a test item, and the grid's --world-seed draws the replicate."""

from __future__ import annotations

import numpy as np
import pytest

from platonic_sdk.errors import PlatonicError
from platonic_sdk.evaluate.measure.replicates import _without, replicate_workspace
from platonic_sdk.evaluate.run.experiment import Experiment
from platonic_sdk.tasks import item_fingerprint
from platonic_sdk.worlds.real import FASHION_TEST, FASHION_TRAIN, RealWorld, read_images


def _ids(split) -> set[str]:
    return {item_fingerprint(x) for x in split.items}


def test_resplit_redraws_the_garments_split_and_keeps_its_sizes():
    shipped = read_images("fashion")
    splits = {s: RealWorld(seed=s, resplit=True)._resplit(shipped.labels, shipped.splits) for s in (1, 2)}
    for codes in splits.values():
        for c in np.unique(shipped.labels):
            of_class = codes[shipped.labels == c]
            assert (of_class == 0).sum() == FASHION_TRAIN and (of_class == 1).sum() == FASHION_TEST
    assert not np.array_equal(splits[1], splits[2])
    assert not np.array_equal(splits[1], shipped.splits)
    assert np.array_equal(splits[1], RealWorld(seed=1, resplit=True)._resplit(shipped.labels, shipped.splits))  # seeded


def test_resplit_tasks_keep_train_and_test_apart_and_leave_clip_art_as_shipped():
    world, plain = RealWorld(seed=3, resplit=True), RealWorld(seed=3)
    for name in ("fashion_rotated_left", "fashion_inverted"):
        task = world.task(name)
        assert not _ids(task.train) & _ids(task.test)
        assert len(task.test) == FASHION_TEST * len(task.classnames)
    assert _ids(world.task("fashion_inverted").test) != _ids(plain.task("fashion_inverted").test)
    for name in ("card_suits", "control_food"):  # clip-art: its train items were in pretraining's corpus
        assert _ids(world.task(name).test) == _ids(plain.task(name).test)


def test_replicate_fine_tunes_hold_out_the_probes():
    whole, probed = RealWorld(seed=5, resplit=True), RealWorld(seed=5, train_per_class=RealWorld.replicate_probes, resplit=True)
    name = "fashion_tinted"
    probes = _ids(probed.task(name).train)
    rest = _without(whole.task(name), probes)
    assert len(probes) == RealWorld.replicate_probes * 10
    assert probes <= _ids(whole.task(name).train)  # the probes are a draw of the train pool
    assert not _ids(rest.train) & probes and not _ids(rest.train) & _ids(whole.task(name).test)
    assert len(rest.train) == (FASHION_TRAIN - RealWorld.replicate_probes) * 10
    assert [int(y) for y in rest.train.labels] == [int(whole.task(name).train.labels[i]) for i, x in
                                                   enumerate(whole.task(name).train.items) if item_fingerprint(x) not in probes]


def test_the_grid_draws_the_real_worlds_replicate_at_its_world_seed():
    """`platonic grid --world real --world-seed 24` (GridSettings -> Experiment.from_config) draws replicate 24 as the
    protocol does: the resplit garments' test items, 15 probes per class, sources fine-tuned anew; seed 0 stays the
    shipped world and zoo. Two seeds give different figures."""
    settings = {"world": "real", "families": ["lit_s"], "tasks": ["fashion_inverted", "fashion_tinted"]}
    shipped = Experiment.from_config({**settings, "world_seed": 0}).workspace
    replicate = Experiment.from_config({**settings, "world_seed": 24})
    ws = replicate.workspace
    assert replicate.describe["world"].startswith("real, replicate 24") and "15 probes per class" in replicate.describe["replicate"]
    drawn = RealWorld(seed=24, train_per_class=RealWorld.replicate_probes, resplit=True)
    for name in settings["tasks"]:
        assert _ids(ws.tasks[name].test) == _ids(drawn.task(name).test) != _ids(shipped.tasks[name].test)
        assert _ids(ws.tasks[name].train) == _ids(drawn.task(name).train)
    zero_shot = {seed: w.accuracies("lit_s", settings["tasks"]) for seed, w in ((0, shipped), (24, ws))}
    finetuned = {seed: [w.finetuned_accuracy("lit_s", t) for t in settings["tasks"]] for seed, w in ((0, shipped), (24, ws))}
    assert zero_shot[0] != zero_shot[24] and finetuned[0] != finetuned[24]


def test_a_real_replicate_needs_train_items_left_for_its_fine_tunes():
    with pytest.raises(PlatonicError, match=r"train_per_class must lie in 1\.\.29, got 30"):
        replicate_workspace("real", 3, train_per_class=FASHION_TRAIN)
