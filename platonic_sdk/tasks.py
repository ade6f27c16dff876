"""Tasks (class names, templates, splits) and grids (probe items x class prompts) with a stable identity."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from typing import Any, Collection, Mapping, Sequence

import attrs
import numpy as np

from .errors import GridMismatchError, PlatonicError, ShapeError
from .items import join, take

DEFAULT_TEMPLATE = "a photo of a {}."


def _labels(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.int64).reshape(-1)


@attrs.frozen(eq=False)
class Split:
    """Items with integer labels: in memory (PIL images, waveforms, ...; anything the family's `preprocess`
    takes) or `items.Items` references to files or dataset rows, decoded on demand."""

    items: Sequence[Any]
    labels: np.ndarray = attrs.field(converter=_labels)

    def __attrs_post_init__(self) -> None:
        if len(self.items) != len(self.labels):
            raise ShapeError(f"split has {len(self.items)} items but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.items)

    def subset(self, ids: Sequence[int]) -> "Split":
        """The items and labels at `ids`, in that order."""
        ids = [int(i) for i in ids]
        return Split(take(self.items, ids), self.labels[ids])

    @functools.cached_property
    def content(self) -> str:
        """sha256 of the items' content (`items_fingerprint`) and the labels: equal only on the same data."""
        return hashlib.sha256((items_fingerprint(self.items) + json.dumps(self.labels.tolist())).encode()).hexdigest()


def _tuple_of_str(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(str(v) for v in value)


@attrs.frozen(eq=False)
class Task:
    """A classification problem: class names, prompt templates, a train split and a disjoint test split."""

    name: str
    classnames: tuple[str, ...] = attrs.field(converter=_tuple_of_str)
    train: Split
    test: Split
    templates: tuple[str, ...] = attrs.field(default=(DEFAULT_TEMPLATE,), converter=_tuple_of_str)

    def __attrs_post_init__(self) -> None:
        if not self.classnames:
            raise PlatonicError(f"task {self.name!r} has no classes")
        keys = [" ".join(c.split()).casefold() for c in self.classnames]
        if "" in keys:
            raise PlatonicError(f"task {self.name!r}: class {keys.index('')} has an empty name")
        if len(set(keys)) < len(keys):
            twice = sorted({c for c, k in zip(self.classnames, keys) if keys.count(k) > 1})
            raise PlatonicError(f"task {self.name!r}: class names {twice} coincide (case and spacing aside): one could never be predicted")
        if not self.templates or any("{}" not in t for t in self.templates):
            raise PlatonicError(f"task {self.name!r}: every template needs a '{{}}' slot, got {self.templates}")
        for split_name in ("train", "test"):
            labels = getattr(self, split_name).labels
            if len(labels) and (labels.min() < 0 or labels.max() >= len(self.classnames)):
                raise ShapeError(f"task {self.name!r}: {split_name} labels fall outside 0..{len(self.classnames) - 1}")

    @property
    def num_classes(self) -> int:
        return len(self.classnames)

    def prompts(self) -> tuple[tuple[str, ...], ...]:
        """For each class, its templates filled with the class name."""
        return tuple(tuple(t.format(c) for t in self.templates) for c in self.classnames)

    def grid(self, per_class: int = 30, seed: int = 0, stratified: bool = False) -> "Grid":
        """The task's probe grid: see `Grid.from_task`."""
        return Grid.from_task(self, per_class=per_class, seed=seed, stratified=stratified)


def item_fingerprint(item: Any) -> str:
    """sha256 of one item's content, never decoding a reference: its own `fingerprint()`, else its stored
    bytes (`content()` of an item reference, or the file of a path or of an item with a `.path`), else its
    parts (attrs fields such as a Waveform's, dict entries such as a datasets audio dict's, tuple members
    such as (samples, rate)), else its decoded array (PIL images, numpy arrays, tensors)."""
    own = getattr(item, "fingerprint", None)
    if callable(own):
        return str(own())
    path = item if isinstance(item, (str, os.PathLike)) else getattr(item, "path", None)
    stored = getattr(item, "content", None)
    if callable(stored) or isinstance(path, (str, os.PathLike)):
        try:
            if callable(stored):
                return hashlib.sha256(stored()).hexdigest()
            with open(path, "rb") as fh:
                return hashlib.file_digest(fh, "sha256").hexdigest()
        except OSError as exc:
            raise PlatonicError(f"cannot read item {str(path if path is not None else item)!r}: {exc.strerror or exc}") from None
    if attrs.has(type(item)) or isinstance(item, (Mapping, tuple, list)):
        digest = hashlib.sha256(type(item).__name__.encode())
        parts = (
            {f.name: getattr(item, f.name) for f in attrs.fields(type(item))} if attrs.has(type(item))
            else item if isinstance(item, Mapping) else dict(enumerate(item))
        )
        for key in sorted(parts, key=repr):
            digest.update(f"{key!r}:{_part_fingerprint(parts[key])};".encode())
        return digest.hexdigest()
    array = np.asarray(item)
    if array.dtype == object:
        raise PlatonicError(
            f"cannot fingerprint an item of type {type(item).__name__}: give it a fingerprint() method or a .path, "
            "or make it array-like"
        )
    array = np.ascontiguousarray(array)  # the decoded content, whatever holds it (PIL image, ndarray, tensor)
    digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    digest.update(array.data)
    return digest.hexdigest()


def _part_fingerprint(value: Any) -> str:
    """A part of an item: plain values as themselves (a string part is a value, not a path), bytes by their
    hash, anything else as an item."""
    if value is None or isinstance(value, (bool, int, float, str, np.number)):
        return repr(value)
    if isinstance(value, bytes):
        return hashlib.sha256(value).hexdigest()
    return item_fingerprint(value)


def items_fingerprint(items: Sequence[Any]) -> str:
    """sha256 over the items' fingerprints (see `item_fingerprint`), in order; a sequence of item
    references (with `.refs`, e.g. `items.Items`) is hashed by reference, undecoded."""
    digest = hashlib.sha256()
    for item in getattr(items, "refs", items):
        digest.update(item_fingerprint(item).encode())
    return digest.hexdigest()


def _prompt_tuple(value: Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(str(p) for p in cls) for cls in value)


@attrs.frozen(eq=False)
class Grid:
    """Probe items of a task's train split x its class prompts; descriptors live on one grid.

    `identity` hashes (task, probe ids, prompts, content of the probe items): two descriptors are
    comparable only when equal, so a descriptor computed on other data is refused.
    """

    task: str
    probe_ids: tuple[int, ...] = attrs.field(converter=lambda v: tuple(int(i) for i in v))
    prompts: tuple[tuple[str, ...], ...] = attrs.field(converter=_prompt_tuple)
    items: Sequence[Any] = attrs.field(repr=False)

    def __attrs_post_init__(self) -> None:
        if len(self.items) != len(self.probe_ids):
            raise ShapeError(f"grid {self.task!r}: {len(self.items)} items for {len(self.probe_ids)} probe ids")
        if not self.prompts or any(not p for p in self.prompts):
            raise PlatonicError(f"grid {self.task!r}: every class needs at least one prompt")

    @classmethod
    def from_task(cls, task: Task, per_class: int = 30, seed: int = 0, stratified: bool = False) -> "Grid":
        """Draw min(per_class * M, |train|) probes from the train split with a fixed seed.

        Uniform draws (the authors' protocol) never look at labels; `stratified=True` takes
        per_class items of each class instead.
        """
        rng = np.random.default_rng(seed)
        n = len(task.train)
        if stratified:
            ids = []
            for c in range(task.num_classes):
                members = np.flatnonzero(task.train.labels == c)
                ids.extend(rng.permutation(members)[:per_class].tolist())
            ids = sorted(ids)
        else:
            budget = min(per_class * task.num_classes, n)
            ids = sorted(rng.choice(n, size=budget, replace=False).tolist())
        if not ids:
            raise PlatonicError(f"task {task.name!r} has no train items to draw probes from")
        return cls(task.name, ids, task.prompts(), take(task.train.items, ids))

    @property
    def shape(self) -> tuple[int, int]:
        """(P, M): probes x classes, the shape of every descriptor on this grid."""
        return len(self.probe_ids), len(self.prompts)

    @functools.cached_property
    def content(self) -> str:
        """`items_fingerprint` of the probe items, in probe order; hashed once per grid."""
        return items_fingerprint(self.items)

    @functools.cached_property
    def identity(self) -> str:
        """Stable hash of (task name, probe ids, prompt lists, probe content): equal only on the same data."""
        return hashlib.sha256((self._names_payload() + self.content).encode()).hexdigest()[:20]

    @property
    def names_identity(self) -> str:
        """The identity of SDK files written before it covered the probe content (names, ids, prompts only)."""
        return hashlib.sha256(self._names_payload().encode()).hexdigest()[:20]

    def _names_payload(self) -> str:
        return json.dumps([self.task, list(self.probe_ids), [list(p) for p in self.prompts]])

    @classmethod
    def union(cls, grids: Sequence["Grid"], name: str = "union") -> "Grid":
        """All probes of all grids x all their prompts: a common grid for cross-task comparisons."""
        if len({g.identity for g in grids}) != len(grids):
            raise GridMismatchError("union needs distinct grids")
        ids, prompts = [], []
        offset = 0
        for g in grids:
            ids.extend(offset + i for i in range(len(g.items)))
            offset += len(g.items)
            prompts.extend(g.prompts)
        return cls(name + ":" + "+".join(f"{g.task}@{g.identity[:8]}" for g in grids), ids, prompts, join([g.items for g in grids]))


def anchor_grids(term_grids: Collection[str], anchors: Sequence[Grid]) -> tuple[Grid, ...]:
    """The distinct anchor grids (by identity, first occurrence kept), refusing one that is also a term's
    grid: its probes cannot both move and stay."""
    both = [a.task for a in anchors if a.identity in term_grids]
    if both:
        raise GridMismatchError(f"{', '.join(map(repr, both))}: a grid cannot be both a term and an anchor "
                                "(anchors are grids whose probes must not move)")
    return tuple({a.identity: a for a in anchors}.values())
