"""Items by reference: a split may hold references to files or dataset rows and decode them on demand.

`Items(refs)` is a read-only sequence with items[i] = refs[i].load(): an item is decoded only when it is
asked for (in a DataLoader worker when a batch is encoded), so a split of 100,000 images holds their
paths, not their pixels. Plain lists of in-memory items (PIL images, arrays, waveforms) work wherever
`Items` do; `take` and `join` keep references as references.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs

__all__ = ["FileRef", "ItemRef", "Items", "Row", "RowTable", "join", "take"]


@runtime_checkable
class ItemRef(Protocol):
    """What a reference offers: where the item lives, its stored bytes, and the decoded item."""

    path: str

    def content(self) -> bytes:
        """The stored bytes of the item (a file's bytes; a dataset cell's encoded bytes)."""

    def stamp(self) -> str:
        """A cheap string that changes when the item does (file stat, dataset fingerprint and row)."""

    def load(self) -> Any:
        """The decoded item, as a family's `preprocess` takes it."""


@attrs.frozen
class FileRef:
    """An item stored as one file; subclasses decode it (`ImageFile`, `AudioFile`)."""

    path: str = attrs.field(converter=str)

    def content(self) -> bytes:
        return Path(self.path).read_bytes()

    def stamp(self) -> str:
        """A cheap identity for caches: path, size and modification time (see `feature_store`)."""
        return file_stamp(self.path)

    def load(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not say how to decode {self.path!r}")


class RowTable(Protocol):
    """Rows stored together (an array file, a dataset column), shared by their `Row` references."""

    def name(self, index: int) -> str: ...

    def cell(self, index: int) -> bytes: ...

    def stamp(self, index: int) -> str: ...

    def decode(self, index: int) -> Any: ...


@attrs.frozen
class Row:
    """Row `index` of a `RowTable`: an item reference whose table says where it lives and how it decodes."""

    table: RowTable = attrs.field(eq=False, repr=False)
    index: int

    @property
    def path(self) -> str:
        return self.table.name(self.index)

    def content(self) -> bytes:
        return self.table.cell(self.index)

    def stamp(self) -> str:
        return self.table.stamp(self.index)

    def load(self) -> Any:
        return self.table.decode(self.index)


def file_stamp(path: str) -> str:
    """path|size|mtime_ns of a file; a missing file stamps as missing."""
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}|missing"
    return f"{path}|{st.st_size}|{st.st_mtime_ns}"


class Items(Sequence):
    """A sequence of item references; indexing decodes (items[i] = refs[i].load()), slicing does not."""

    __slots__ = ("refs",)

    def __init__(self, refs: Sequence[ItemRef]):
        self.refs: tuple[ItemRef, ...] = tuple(refs)

    def __len__(self) -> int:
        return len(self.refs)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return Items(self.refs[index])
        return self.refs[index].load()

    def subset(self, ids: Sequence[int]) -> "Items":
        """The references at `ids`, in that order (nothing is decoded)."""
        return Items([self.refs[int(i)] for i in ids])

    @property
    def paths(self) -> list[str]:
        """Where each item lives."""
        return [r.path for r in self.refs]

    def __repr__(self) -> str:
        first = f", first {self.refs[0]!r}" if self.refs else ""
        return f"Items({len(self.refs)} references{first})"


def take(items: Sequence[Any], ids: Sequence[int]) -> Sequence[Any]:
    """items[ids] without decoding references (a list for in-memory items)."""
    if isinstance(items, Items):
        return items.subset(ids)
    return [items[int(i)] for i in ids]


def identities(items: Sequence[Any]) -> list[int]:
    """id() of each item, never decoding one: of its reference for `Items` (a subset shares its parent's
    references), of the item itself otherwise. Equal ids within live sequences name the same item."""
    if isinstance(items, Items):
        return [id(r) for r in items.refs]
    return [id(items[i]) for i in range(len(items))]


def unheld(items: Sequence[Any], held: Sequence[Any]) -> list[int]:
    """Positions of the items of `items` that `held` does not hold (the same objects, `identities`)."""
    have = set(identities(held))
    return [i for i, key in enumerate(identities(items)) if key not in have]


def join(parts: Sequence[Sequence[Any]]) -> Sequence[Any]:
    """The concatenation of `parts`: references stay references when every part holds them."""
    if parts and all(isinstance(p, Items) for p in parts):
        return Items(list(chain.from_iterable(p.refs for p in parts)))
    return [part[i] for part in parts for i in range(len(part))]
