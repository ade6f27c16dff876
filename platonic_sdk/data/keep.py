"""Keep sets: what an edit must leave alone (docs/method.md sec. 18).

A keep set is items that the target classifies with a task's class prompts. LABELLED, it is a user's eval set of
another task (items, their labels and that task's prompts; never the transferred task's labels): the default strength
rule spends a budget of accuracy points on it. UNLABELLED, it is a grid's probes: the rule holds what the edit does to
their affinities. `record()` is what an edit file keeps of it: the task, where the items come from, whether they are
labelled, how many, and a fingerprint of their content.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any, Sequence

import attrs
import numpy as np

from ..errors import PlatonicError, ShapeError
from ..tasks import DEFAULT_TEMPLATE, Grid, Split, Task, items_fingerprint

SOURCES = ("train", "test", "grid", "given")  # where a keep set's items come from


def _prompts(value: Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(str(p) for p in cls) for cls in value)


def _labels(value: Any) -> np.ndarray | None:
    return None if value is None else np.asarray(value, dtype=np.int64).reshape(-1)


@attrs.frozen(eq=False)
class KeepSet:
    """Items an edit must leave alone, with the class prompts the target reads them by (`prompts[j]`: class j's
    templates filled in), and `labels` (class indices) when the user holds them; `source` says where the items come
    from ("train" or "test": a task's split; "grid": a grid's probes; "given")."""

    name: str
    items: Sequence[Any] = attrs.field(repr=False)
    prompts: tuple[tuple[str, ...], ...] = attrs.field(converter=_prompts)
    labels: np.ndarray | None = attrs.field(default=None, converter=_labels, repr=False)
    source: str = "given"
    items_content: str | None = attrs.field(default=None, repr=False)  # items_fingerprint(items) where known (a grid's)

    def __attrs_post_init__(self) -> None:
        if not len(self.items):
            raise PlatonicError(f"keep set {self.name!r} holds no items")
        if not self.prompts or any(not p for p in self.prompts):
            raise PlatonicError(f"keep set {self.name!r}: every class needs at least one prompt")
        if self.source not in SOURCES:
            raise PlatonicError(f"keep set {self.name!r}: source is one of {', '.join(SOURCES)}, got {self.source!r}")
        if self.labels is not None:
            if len(self.labels) != len(self.items):
                raise ShapeError(f"keep set {self.name!r} has {len(self.items)} items but {len(self.labels)} labels")
            if self.labels.min() < 0 or self.labels.max() >= len(self.prompts):
                raise ShapeError(f"keep set {self.name!r}: labels fall outside 0..{len(self.prompts) - 1} (its {len(self.prompts)} classes)")

    @classmethod
    def from_task(cls, task: Task, split: str) -> "KeepSet":
        """A labelled keep set: the items and labels of `task`'s `split` ("train" or "test": whichever the user holds
        for that task; experiments use "train", so that no scored test item is read) with the task's prompts."""
        if split not in ("train", "test"):
            raise PlatonicError(f"a task's keep set is its 'train' or 'test' split, got {split!r}")
        data = getattr(task, split)
        return cls(task.name, data.items, task.prompts(), data.labels, split)

    @classmethod
    def from_split(cls, name: str, split: Split | tuple[Sequence[Any], Sequence[int]], classnames: Sequence[str],
                   templates: Sequence[str] = (DEFAULT_TEMPLATE,)) -> "KeepSet":
        """A labelled keep set of task `name` from a Split or (items, labels), read with `classnames` in `templates`."""
        data = split if isinstance(split, Split) else Split(*split)
        task = Task(name, classnames, data, Split([], []), templates)  # Task checks names, templates and label range
        return cls(name, data.items, task.prompts(), data.labels)

    @classmethod
    def from_grid(cls, grid: Grid) -> "KeepSet":
        """An unlabelled keep set: a grid's probes and prompts (what OperatorBank's other grids are to a strength rule)."""
        return cls(grid.task, grid.items, grid.prompts, None, "grid", grid.content)

    @property
    def labelled(self) -> bool:
        return self.labels is not None

    def __len__(self) -> int:
        return len(self.items)

    @functools.cached_property
    def content(self) -> str:
        """sha256 of the items' content (tasks.items_fingerprint), the prompts and the labels: equal only on the same set."""
        payload = json.dumps([self.prompts, None if self.labels is None else self.labels.tolist()])
        return hashlib.sha256(((self.items_content or items_fingerprint(self.items)) + payload).encode()).hexdigest()

    def record(self) -> dict[str, Any]:
        """What an edit file keeps of the set: task, source, labelled, size and a content fingerprint."""
        return {"task": self.name, "source": self.source, "labelled": self.labelled, "size": len(self), "content": self.content[:20]}
