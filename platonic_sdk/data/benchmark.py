"""A benchmark as data: which datasets it reads under one data root, their class names and prompts,
its control sets and its held-out set, and the families it compares (the paper's: `paper_benchmarks`).

`load_benchmark(bench, root)` reads every dataset (file lists and labels only; nothing is decoded)
and refuses, in one error, every dataset that is missing or in another layout, naming the layout each
one expects. A control set keeps `per_class` items of each class, drawn with a fixed seed; controls and
the held-out set are evaluation-only (no train items, so nothing ever probes or fine-tunes them).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import attrs
import numpy as np

from ..errors import LayoutError, PlatonicError
from ..items import join
from ..named_registry import NamedRegistry
from ..tasks import Split, Task
from .audio import ESC50_LAYOUT, URBANSOUND8K_LAYOUT, esc50_task, urbansound8k_task
from .folders import class_key
from .torchvision_sets import DATASETS, torchvision_task

__all__ = ["Benchmark", "BenchmarkSet", "LoadedBenchmark", "benchmark", "benchmark_names", "load_benchmark", "register_benchmark"]

SOURCES = ("torchvision", "esc50", "urbansound8k")


def _strings(value: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(str(v) for v in value)


@attrs.frozen
class BenchmarkSet:
    """One dataset of a benchmark, read from `root / folder` by `source` (torchvision: the `dataset` key of
    `torchvision_sets.DATASETS`).

    `classnames`: the prompt names in the dataset's label order; the dataset on disk must carry the same
    classes (compared with case, `_` and `-` aside), or, with `select`, these classes are kept and the
    others dropped. None: the names are the dataset's own, read as `classnames_from` says. A control set
    (`per_class` set) keeps that many items of each class of its `pool` split ("test", or "all" for a
    folder that is an evaluation split as a whole), drawn with a fixed seed.
    """

    name: str
    source: str = attrs.field(validator=attrs.validators.in_(SOURCES))
    templates: tuple[str, ...] = attrs.field(converter=tuple)
    folder: str = "."
    dataset: str | None = None
    classnames: tuple[str, ...] | None = attrs.field(default=None, converter=_strings)
    classnames_from: str = ""
    select: bool = False
    per_class: int | None = None
    pool: str = attrs.field(default="test", validator=attrs.validators.in_(("test", "all")))

    def __attrs_post_init__(self) -> None:
        if (self.source == "torchvision") != (self.dataset is not None):
            raise PlatonicError(f"benchmark set {self.name!r}: a torchvision set names its dataset, other sources none")
        if (self.classnames is None) == (not self.classnames_from):
            raise PlatonicError(f"benchmark set {self.name!r}: give either literal classnames or classnames_from (where they come from)")

    def layout(self, root: str | os.PathLike) -> str:
        """The files this set expects under the data root `root`."""
        where = {"esc50": ESC50_LAYOUT, "urbansound8k": URBANSOUND8K_LAYOUT}
        text = DATASETS[self.dataset].layout if self.source == "torchvision" else where[self.source]
        return text.replace("DIR", os.path.normpath(Path(root) / self.folder))

    def read(self, root: str | os.PathLike, seed: int = 0, test_fraction: float = 0.2) -> Task:
        """The set as a Task: its classes checked (or selected), a control set's draw made."""
        folder = Path(root) / self.folder
        if self.source == "torchvision":
            task = torchvision_task(self.dataset, folder, self.name, self.templates, test_fraction=test_fraction, seed=seed)
        else:
            task = (esc50_task if self.source == "esc50" else urbansound8k_task)(folder, self.name, templates=self.templates)
        if self.classnames is not None:
            task = self._named(task, folder)
        return task if self.per_class is None else self._control(task, seed)

    def _named(self, task: Task, folder: Path) -> Task:
        """`task` with the literal class names: the same classes as on disk (or, with `select`, those kept)."""
        on_disk = {class_key(c): i for i, c in enumerate(task.classnames)}
        wanted = [class_key(c) for c in self.classnames]
        missing = [c for c, k in zip(self.classnames, wanted) if k not in on_disk]
        extra = [] if self.select else [c for c, k in zip(task.classnames, on_disk) if k not in set(wanted)]
        if missing or extra:
            raise PlatonicError(f"{self.name}: the dataset under {str(folder)!r} has other classes than the benchmark's "
                                f"{len(self.classnames)}" + (f"; missing {missing[:5]}" if missing else "")
                                + (f"; not in the benchmark {extra[:5]}" if extra else ""))
        new_label = np.full(task.num_classes, -1, dtype=np.int64)
        new_label[[on_disk[k] for k in wanted]] = np.arange(len(wanted))
        keep = lambda split: split.subset(np.flatnonzero(new_label[split.labels] >= 0))  # noqa: E731
        relabel = lambda split: Split(split.items, new_label[split.labels])  # noqa: E731
        return Task(task.name, self.classnames, relabel(keep(task.train)), relabel(keep(task.test)), task.templates)

    def _control(self, task: Task, seed: int) -> Task:
        """`per_class` items of each class of the pool, drawn with `seed`, evaluation only."""
        pool = task.test if self.pool == "test" else Split(join([task.train.items, task.test.items]),
                                                           np.r_[task.train.labels, task.test.labels])
        rng = np.random.default_rng(seed)
        ids = sorted(i for c in range(task.num_classes)
                     for i in rng.permutation(np.flatnonzero(pool.labels == c))[: self.per_class].tolist())
        return evaluation_only(task, pool.subset(ids))


def evaluation_only(task: Task, test: Split | None = None) -> Task:
    """`task` with no train items (nothing can probe or fine-tune it), tested on `test` (default: its test split)."""
    test = task.test if test is None else test
    return Task(task.name, task.classnames, test.subset([]), test, task.templates)


@attrs.frozen
class Benchmark:
    """A study as data: the families it compares, its tasks (fine-tuned and probed), its control sets and its
    held-out set (evaluated after the operators of `related` tasks are summed; never probed or fine-tuned)."""

    name: str
    modality: str
    description: str
    families: tuple[str, ...] = attrs.field(converter=tuple)
    tasks: tuple[BenchmarkSet, ...] = attrs.field(converter=tuple)
    controls: tuple[BenchmarkSet, ...] = attrs.field(default=(), converter=tuple)
    held_out: BenchmarkSet | None = None
    related: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    def __attrs_post_init__(self) -> None:
        names = [s.name for s in self.sets]
        if len(set(names)) < len(names):
            raise PlatonicError(f"benchmark {self.name!r} names a dataset twice: {names}")
        if bool(self.related) != (self.held_out is not None) or not set(self.related) <= {t.name for t in self.tasks}:
            raise PlatonicError(f"benchmark {self.name!r}: a held-out set needs related tasks among its tasks, and only then")

    @property
    def sets(self) -> tuple[BenchmarkSet, ...]:
        return (*self.tasks, *self.controls, *((self.held_out,) if self.held_out else ()))


@attrs.frozen
class LoadedBenchmark:
    """A benchmark's datasets as tasks: every task by name (controls and held-out set included)."""

    benchmark: Benchmark
    tasks: dict[str, Task]

    @property
    def controls(self) -> list[str]:
        return [s.name for s in self.benchmark.controls]

    @property
    def held_out(self) -> tuple[str, ...]:
        """Related task names, then the held-out set's (empty without one)."""
        held = self.benchmark.held_out
        return (*self.benchmark.related, held.name) if held else ()


def load_benchmark(bench: Benchmark | str, root: str | os.PathLike, seed: int = 0, test_fraction: float = 0.2) -> LoadedBenchmark:
    """Every dataset of `bench` under `root`; one PlatonicError lists each missing or misread dataset."""
    bench = benchmark(bench) if isinstance(bench, str) else bench
    tasks, problems = {}, []
    for entry in bench.sets:
        try:
            task = entry.read(root, seed, test_fraction)
            tasks[entry.name] = evaluation_only(task) if entry is bench.held_out else task
        except LayoutError:
            problems.append(f"{entry.name}: expected {entry.layout(root)}")
        except PlatonicError as exc:
            problems.append(f"{entry.name}: {exc}")
    if problems:
        raise PlatonicError(f"benchmark {bench.name}: {len(problems)} of {len(bench.sets)} datasets are missing or not in the "
                            f"expected layout under --data-root {str(root)!r}: " + "; ".join(f"[{i + 1}] {p}" for i, p in enumerate(problems)))
    return LoadedBenchmark(bench, tasks)


_BENCHMARKS: NamedRegistry[Benchmark] = NamedRegistry(
    "benchmark", sort=True, lazy={name: "platonic_sdk.data.paper_benchmarks" for name in ("paper-image", "paper-audio")})


def register_benchmark(bench: Benchmark, *, replace: bool = False) -> Benchmark:
    """Make `bench` known by name (`platonic grid --benchmark NAME`)."""
    return _BENCHMARKS.register(bench.name, bench, replace=replace)


def benchmark_names() -> list[str]:
    """The registered benchmarks (the paper's, in `paper_benchmarks`, register on first use)."""
    return _BENCHMARKS.names()


def benchmark_name(name: str) -> str:
    """`name` checked against the known benchmarks without loading them; PlatonicError with the nearest and the known ones."""
    return _BENCHMARKS.check(name)


def benchmark(name: str) -> Benchmark:
    """The registered benchmark `name`, or PlatonicError listing the known ones."""
    return _BENCHMARKS.lookup(name)
