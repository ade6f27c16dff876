"""Keep sets (keep.py): built from a task's split, from a Split or (items, labels) with class names, and from a grid;
what an edit file records of them; bad input refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from platonic_sdk.errors import PlatonicError, ShapeError
from platonic_sdk.data.keep import KeepSet
from platonic_sdk.tasks import Split, Task


def _task() -> Task:
    items = [np.full((2, 2), i, dtype=np.uint8) for i in range(10)]
    return Task("shapes", ("circle", "square"), Split(items[:6], [0, 1, 0, 1, 0, 1]), Split(items[6:], [1, 0, 1, 0]),
                ("a photo of a {}.", "a drawing of a {}."))


def test_from_task_takes_the_named_split():
    task = _task()
    train, test = KeepSet.from_task(task, "train"), KeepSet.from_task(task, "test")
    assert train.labelled and len(train) == 6 and train.labels.tolist() == [0, 1, 0, 1, 0, 1]
    assert test.labels.tolist() == [1, 0, 1, 0] and test.items == task.test.items
    assert train.prompts == (("a photo of a circle.", "a drawing of a circle."), ("a photo of a square.", "a drawing of a square."))
    assert train.record() == {"task": "shapes", "source": "train", "labelled": True, "size": 6, "content": train.content[:20]}
    assert train.content != test.content
    with pytest.raises(PlatonicError, match="a task's keep set is its 'train' or 'test' split, got 'validation'"):
        KeepSet.from_task(task, "validation")


def test_from_split_and_from_items_agree():
    task = _task()
    a = KeepSet.from_split("shapes", task.train, task.classnames, task.templates)
    b = KeepSet.from_split("shapes", (task.train.items, task.train.labels.tolist()), task.classnames, task.templates)
    assert a.content == b.content == KeepSet.from_task(task, "train").content
    assert a.source == "given"
    assert KeepSet.from_split("shapes", task.train, task.classnames).prompts == (("a photo of a circle.",), ("a photo of a square.",))
    with pytest.raises(ShapeError, match="labels fall outside 0..1"):
        KeepSet.from_split("shapes", (task.train.items, [0, 1, 2, 0, 0, 0]), task.classnames)
    with pytest.raises(PlatonicError, match="class names \\['Circle', 'circle'\\] coincide"):
        KeepSet.from_split("shapes", task.train, ("circle", "Circle"))


def test_from_grid_is_unlabelled():
    grid = _task().grid(per_class=2, seed=0)
    keep = KeepSet.from_grid(grid)
    assert not keep.labelled and keep.labels is None and keep.source == "grid"
    assert keep.items == grid.items and keep.prompts == grid.prompts and keep.name == "shapes"
    assert keep.record()["labelled"] is False and keep.record()["size"] == 4


def test_bad_keep_sets_are_refused():
    with pytest.raises(PlatonicError, match="keep set 'x' holds no items"):
        KeepSet("x", [], [["a {}."]])
    with pytest.raises(ShapeError, match="keep set 'x' has 2 items but 1 labels"):
        KeepSet("x", [1, 2], [["a"], ["b"]], [0])
    with pytest.raises(PlatonicError, match="every class needs at least one prompt"):
        KeepSet("x", [1, 2], [["a"], []])
    with pytest.raises(PlatonicError, match="source is one of train, test, grid, given"):
        KeepSet("x", [1, 2], [["a"]], source="elsewhere")
    with pytest.raises(TypeError):
        KeepSet.from_task(_task(), split="train", labelled=True)
