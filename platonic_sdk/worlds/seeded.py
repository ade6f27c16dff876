"""What every synthetic world shares: per-item seeded streams and a lazily built, cached task table.

Item `index` of stream `name` draws from numpy's generator seeded by [world seed, crc32(name), index],
so every item is independent of every other and of the order in which they are built.
"""

from __future__ import annotations

import zlib
from functools import cached_property
from typing import Any, ClassVar, Mapping

import numpy as np

from ..errors import PlatonicError
from ..tasks import Task


def stream_key(name: str) -> int:
    """A stable integer for a stream name."""
    return zlib.crc32(name.encode())


class SeededWorld:
    """Mixin of the worlds: subclasses set `specs` (task name -> spec) and `kind`, and implement `_build`."""

    specs: ClassVar[Mapping[str, Any]]
    kind: ClassVar[str]
    seed: int
    demo_tasks: tuple[str, ...]
    controls: tuple[str, ...]
    trio: tuple[str, str, str]

    def rng(self, stream: str, index: int) -> np.random.Generator:
        """The generator of item `index` of `stream` (independent of every other item)."""
        return np.random.default_rng([self.seed, stream_key(stream), index])

    @property
    def task_names(self) -> tuple[str, ...]:
        """All tasks of the world (controls included)."""
        return tuple(self.specs)

    @property
    def transfer_tasks(self) -> tuple[str, ...]:
        """Tasks that the zoo's fine-tunes, descriptors and compositions use: `demo_tasks` less controls and trio[2]."""
        return tuple(n for n in self.demo_tasks if n not in self.controls and n != self.trio[2])

    def task(self, name: str) -> Task:
        """The task `name` with balanced train/test splits from disjoint seed streams (built once)."""
        if name not in self.specs:
            raise PlatonicError(f"unknown task {name!r} of the {self.kind} world; known: {', '.join(self.specs)}")
        if name not in self._tasks:
            self._tasks[name] = self._build(name)
        return self._tasks[name]

    @cached_property
    def _tasks(self) -> dict[str, Task]:
        return {}

    def _build(self, name: str) -> Task:
        raise NotImplementedError
