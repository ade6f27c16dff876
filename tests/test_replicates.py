"""Replicates (evaluate/replicates.py): the real world's seeds redraw its garments' train/test split, and a
replicate's fine-tunes never see a probe or a test item."""

from __future__ import annotations

import numpy as np

from platonic_sdk.evaluate.measure.replicates import REAL_PROBES_PER_CLASS, _without
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
    whole, probed = RealWorld(seed=5, resplit=True), RealWorld(seed=5, train_per_class=REAL_PROBES_PER_CLASS, resplit=True)
    name = "fashion_tinted"
    probes = _ids(probed.task(name).train)
    rest = _without(whole.task(name), probes)
    assert len(probes) == REAL_PROBES_PER_CLASS * 10
    assert probes <= _ids(whole.task(name).train)  # the probes are a draw of the train pool
    assert not _ids(rest.train) & probes and not _ids(rest.train) & _ids(whole.task(name).test)
    assert len(rest.train) == (FASHION_TRAIN - REAL_PROBES_PER_CLASS) * 10
    assert [int(y) for y in rest.train.labels] == [int(whole.task(name).train.labels[i]) for i, x in
                                                   enumerate(whole.task(name).train.items) if item_fingerprint(x) not in probes]
